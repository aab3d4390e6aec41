"""Text helpers: the fast paths of ``clean`` and ``one_line`` answer as the general ones."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_diary.text import _NON_PRINTABLE, clean, one_line


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=st.characters(max_codepoint=0x7F)),
                 st.text(alphabet=st.characters(max_codepoint=0x3000, blacklist_categories=()))))
def test_clean_drops_what_the_pattern_drops(text: str) -> None:
    assert clean(text) == _NON_PRINTABLE.sub("", text)


def test_clean_keeps_line_breaks_and_tabs_and_drops_controls() -> None:
    assert clean("a\tb\nc\rd\x00e\x1bf\x7fg") == "a\tb\nc\rdefg"
    assert clean("plain") == "plain"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(alphabet=" \t\nab\x00~"), st.text()), st.integers(1, 12))
def test_one_line_is_the_text_flattened_and_capped(text: str, limit: int) -> None:
    flat = " ".join(_NON_PRINTABLE.sub("", text).split())
    expected = flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
    assert one_line(text, limit) == expected
