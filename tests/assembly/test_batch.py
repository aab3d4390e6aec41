"""The estimated bytes of attributes, which bound every queue in bytes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from otel_diary.assembly.batch import estimate, held_by_values

SCALARS = st.one_of(st.text(max_size=50), st.binary(max_size=50), st.integers(),
                    st.floats(), st.booleans())
VALUES = st.recursive(SCALARS, lambda children: st.one_of(
    st.lists(children, max_size=4), st.lists(children, max_size=4).map(tuple),
    st.dictionaries(st.text(max_size=8), children, max_size=4)), max_leaves=20)


@given(st.dictionaries(st.text(max_size=40), VALUES, max_size=8))
def test_estimate_counts_slots_keys_and_what_values_hold(attrs: dict[str, object]) -> None:
    assert estimate(attrs) == (64 + 120 * len(attrs) + sum(len(key) for key in attrs)
                               + held_by_values(attrs))


def test_estimate_counts_text_at_every_depth() -> None:
    assert estimate({}) == 64
    assert estimate({"k": "x" * 1000, "n": 5}) == 64 + 2 * 121 + 1000
    assert estimate({"k": ("ab", ["cde", {"f": b"gh"}])}) == \
        64 + 121 + 64 * 2 + 2 + 64 * 2 + 3 + 64 + 1 + 2
