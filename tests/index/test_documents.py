"""Reading a diary's front matter the way the renderer writes it."""

from __future__ import annotations

from otel_diary.index.documents import _UNREADABLE
from tests.pipeline.test_render import matched_code_points


def test_unreadable_is_exactly_what_the_fast_reader_leaves_to_yaml() -> None:
    """The characters YAML reads as a line break or refuses (anything but a newline,
    printable ASCII, U+00A0 to U+FFFD without surrogates, separators and the byte-order
    mark, and the planes past U+FFFF): checked on every code point."""
    readable = bytes(
        (c == 0x0A or 0x20 <= c <= 0x7E or 0xA0 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD
         or c >= 0x10000) and c not in (0x2028, 0x2029, 0xFEFF) for c in range(0x110000))
    assert matched_code_points(_UNREADABLE) == bytes(1 - flag for flag in readable)
