"""Reading a diary's front matter the way the renderer writes it, and redacting what a
document read from a file says."""

from __future__ import annotations

from otel_diary.index.documents import _UNREADABLE, entry_from_parts, redacted_document
from otel_diary.pipeline.render import parse_front_matter
from tests.pipeline.test_render import matched_code_points


def test_unreadable_is_exactly_what_the_fast_reader_leaves_to_yaml() -> None:
    """The characters YAML reads as a line break or refuses (anything but a newline,
    printable ASCII, U+00A0 to U+FFFD without surrogates, separators and the byte-order
    mark, and the planes past U+FFFF): checked on every code point."""
    readable = bytes(
        (c == 0x0A or 0x20 <= c <= 0x7E or 0xA0 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD
         or c >= 0x10000) and c not in (0x2028, 0x2029, 0xFEFF) for c in range(0x110000))
    assert matched_code_points(_UNREADABLE) == bytes(1 - flag for flag in readable)


KEY = "ghp_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7c"
DOCUMENT = ("---\nid: kh-1\nsource_type: diary\ntitle: Deploy the orders service\n"
            "created: 2026-01-01T00:00:00Z\ntags:\n- agent:coder\n---\n\n"
            "# Deploy the orders service\n\n## What was done\nSet the token for the release "
            "step.\n")


def test_a_document_without_a_secret_is_kept_as_it_is() -> None:
    front = parse_front_matter(DOCUMENT)
    assert redacted_document(front, DOCUMENT) == (front, DOCUMENT)


def test_a_key_in_the_body_is_redacted_and_the_front_matter_kept_byte_for_byte() -> None:
    content = DOCUMENT.replace("Set the token", f"Set {KEY}")
    front, redacted = redacted_document(parse_front_matter(content), content)
    assert redacted == DOCUMENT.replace("Set the token", "Set [REDACTED:github_token]")
    assert front == parse_front_matter(DOCUMENT)


def test_a_key_in_the_front_matter_is_written_again_as_a_string() -> None:
    """A value that is a key whole becomes ``[REDACTED:…]``, which YAML would read as a
    list were it not quoted: the front matter is written again from the values, and reads
    back as the index and the readers need it."""
    content = DOCUMENT.replace("title: Deploy the orders service", f"title: {KEY}") \
        .replace("tags:\n", f"password: hunter2xyz\ntags:\n- {KEY}\n")
    front, redacted = redacted_document(parse_front_matter(content), content)
    assert KEY[4:] not in redacted and "hunter2xyz" not in redacted
    again = parse_front_matter(redacted)
    assert again == front
    assert again["title"] == "[REDACTED:github_token]"
    assert again["password"] == "[REDACTED:password]"
    assert again["tags"] == ["[REDACTED:github_token]", "agent:coder"]
    assert again["created"] == parse_front_matter(DOCUMENT)["created"]  # a date still
    assert redacted.endswith("---\n\n# Deploy the orders service\n\n## What was done\n"
                             "Set the token for the release step.\n")
    assert entry_from_parts("p.md", front, redacted).title == "[REDACTED:github_token]"


def test_a_key_escaped_in_a_quoted_value_or_in_a_comment_is_taken_out() -> None:
    """``"\\ngsk_…"`` reads as a line break and the key, but as text the key is glued to
    an ``n``; a comment is no value at all. The front matter is written again from its
    values, redacted, and keeps no comment."""
    groq = "gsk_" + "0" * 52
    for line in (f'note: "\\r\\n{groq} "', f"# password: hunter2xyz {KEY}"):
        content = DOCUMENT.replace("tags:\n", f"{line}\ntags:\n")
        front, redacted = redacted_document(parse_front_matter(content), content)
        assert groq not in redacted and KEY not in redacted and "hunter2xyz" not in redacted
        assert parse_front_matter(redacted) == front
        assert front["title"] == "Deploy the orders service"
