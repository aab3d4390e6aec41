"""Lessons as the read side finds them: what a search shows of one."""

from __future__ import annotations

import pytest

from otel_diary.readers.lessons import shown_snippet

KEY = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
BODY = (f"# Lesson\n\n## What worked\n- Export {KEY} before the release step\n"
        "- Pin the compiler version\n")


def test_a_snippet_of_lines_without_a_secret_keeps_its_matches_marked() -> None:
    assert shown_snippet("…Pin the \x02compiler\x03 version", BODY) == \
        "…Pin the **compiler** version"


@pytest.mark.parametrize("snippet", [
    f"…Export \x02ghp\x03_{KEY[4:]} before the…",  # a match marked inside the key
    f"…{KEY[4:]} before the \x02release\x03 step",  # cut inside the key
    f"…{KEY[12:]} before the \x02release\x03 step",
])
def test_a_snippet_cut_or_marked_inside_a_key_shows_its_lines_redacted(snippet: str) -> None:
    shown = shown_snippet(snippet, BODY)
    assert KEY[12:20] not in shown
    assert shown.endswith("Export [REDACTED:github_token] before the release step")


def test_a_snippet_inside_a_long_line_starts_about_where_it_did() -> None:
    body = "word " * 400 + KEY + " then the release step" * 40
    shown = shown_snippet(f"…{KEY[12:]} then the \x02release\x03 step then…", body)
    assert shown.startswith("…word [REDACTED:github_token] then the release step")
    assert KEY[12:20] not in shown and len(shown) < 120


def test_a_snippet_not_found_in_the_body_shows_its_start_redacted() -> None:
    shown = shown_snippet(f"…{KEY[12:]} \x02elsewhere\x03…", BODY)
    assert KEY[12:20] not in shown and shown.startswith("# Lesson ## What worked")
