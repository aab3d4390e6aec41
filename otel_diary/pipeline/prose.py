"""Secrets told in words: a prompt or a reply giving a password (``the password for the
admin account is …``), a key (``use API key …``) or a user's credentials (``Credentials:
admin:…``), a server printing the one it generated (MySQL's temporary password,
Elasticsearch's), and a command's output printing one it read (``cat
…/initialAdminPassword`` then the password on its own line).

A value is taken only when it holds a letter and a digit, so the words that usually follow
a secret's name stay (``the password is required``, ``the token for this run is
expired``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_diary.pipeline.rule import Rule

_FOR_WHOM = (r"(?:[ \t]{1,4}(?:for|of)(?:[ \t]{1,4}[^\s:,;]{1,64}){1,4}?"
             r"(?=[ \t]{1,4}(?:is|was)[ \t:]|[ \t]{0,4}:))?")
"""Whose secret it is, up to four words (``for the admin account``, ``for root@localhost``,
``for the elastic built-in superuser``), when a verb follows."""

_TOLD = (r"(?:[ \t]{1,4}(?:(?:is|was|set to|is now|has been (?:set|changed|reset) to)"
         r"[ \t]{0,4}:?[ \t]{1,4})?"
         r"|[ \t]{0,4}:[ \t]{1,4}"
         r"|[ \t]{0,2},[ \t]{1,4}(?:(?:it|which)[ \t]{1,4}(?:is|was)|it['\u2019]s)[ \t]{1,4})")
"""How the value follows the name: after a space or a verb (``password hunter2xyz``, ``is``,
``set to``, Elasticsearch's ``is :``), a
colon, or a comma and ``it is`` (``my password, it's …``)."""

_WORD = r"[^\s\"'`,;]"
_QUOTED_WORD = r"[^\s\"'`]"


def _told_value(minimum: int, what: str = "") -> str:
    """A value of ``minimum`` to 128 characters holding a letter and a digit: in quotes or
    backticks (opened in group 1, as group ``q``), else one word up to ``,`` or ``;``;
    not a word that says how it is kept (``base64-encoded``)."""
    word = what or _WORD
    quoted = what or _QUOTED_WORD
    return (r"(?P<q>[\"'`])?)(?!\[REDACTED:|[A-Za-z0-9]{1,20}-[a-z]{2,20}ed(?![A-Za-z0-9-]))"
            rf"(?(q)(?={quoted}{{0,127}}[0-9])(?={quoted}{{0,127}}[A-Za-z])"
            rf"{quoted}{{{minimum},128}}(?=(?P=q))"
            rf"|(?={word}{{0,127}}[0-9])(?={word}{{0,127}}[A-Za-z]){word}{{{minimum},128}})")


@dataclass(frozen=True)
class _Said(Rule):
    """A rule tried only where the text, lower-cased, starts with one of ``starts`` (a
    title naming "the orders API" compiles no rule)."""

    starts: tuple[str, ...] = ()

    def fits(self, text: str, position: int) -> bool:
        return text[position:position + 24].lower().startswith(self.starts)


_KEYS_TOLD = (*(f"{what}{between}{key}" for what in ("api", "secret", "access", "auth", "private")
                for between in ("", " ", "_", "-") for key in ("key", "token")),
              *(f"token{verb}" for verb in (" for", " of", " is", " was", " set", ":", " :")))
"""What the rule of a key told in words starts with."""

_KEY_CHARS = "[A-Za-z0-9_.~+/=-]"
"""What a key told in words is made of (no sign that ends a sentence)."""


@dataclass(frozen=True)
class _Printed(Rule):
    """A secret a command printed on the line after it, the command reading a file or a
    variable named as a secret's (``cat /var/jenkins_home/secrets/initialAdminPassword``,
    ``echo $DB_PASSWORD``, ``kubectl get secret db -o jsonpath='{.data.password}' |
    base64 -d``): tried only where the needle is on such a command's line."""

    def fits(self, text: str, position: int) -> bool:
        if text.find("\n", position, position + 80) < 0:
            return False
        line = text[text.rfind("\n", max(0, position - 512), position) + 1:position]
        return _PRINTS.search(line) is not None


_PRINTS = re.compile(r"(?:^|[\s$>#;|&(])(?:(?:cat|type|more|head|tail|Get-Content|gc)"
                     r"[ \t]{1,4}(?:-[\w-]{1,20}[ \t]{1,4}){0,4}[^\s;|&]{0,256}"
                     r"|(?:echo|printenv)[ \t]{1,4}(?:-[neE]{1,3}[ \t]{1,4})?[\"']?\$?\{?"
                     r"[\w.]{0,60}"
                     r"|kubectl[ \t]{1,4}get[ \t]{1,4}secrets?[ \t][^\n]{0,256})\Z")
"""A command that prints what it reads, ending at the file or the variable it names (the
needle ends its last word)."""


@dataclass(frozen=True)
class _Row(Rule):
    """A table's row naming a secret, then its value (``vault kv get``, ``pulumi config
    --show-secrets``, ``doppler secrets``): tried only where the needle is in the row's
    first cell."""

    def fits(self, text: str, position: int) -> bool:
        start = text.rfind("\n", max(0, position - 80), position) + 1
        return (start > 0 or position < 80) and _FIRST_CELL.fullmatch(text, start, position) \
            is not None


_FIRST_CELL = re.compile(r"[ \t]{0,16}(?:[│|┃][ \t]{0,16})?[\w.:-]{0,60}")
_CELL_END = r"(?=[ \t]{0,8}(?:[│|┃][ \t]{0,8})?\r?(?:\n|$))"
_IN_CELL = "[^\\s│|┃]"


PROSE_ANCHORED: tuple[Rule, ...] = (
    # "with password hunter2xyz", "the passphrase is S3cret-pw", "my password, it is
    # S3cret-pw", "the password for the admin account is `Hunter2!`": a word of letters and
    # digits after it (not "the password field", "password reset", "password, build42
    # failed", "password is base64-encoded").
    Rule("password", r"(?i)(\b(?:passw(?:or)?d|passphrase)\b" + _FOR_WHOM + _TOLD
         + _told_value(6), ("passw", "passphrase"), keep_prefix=True, anchored=True),
    # MySQL's first start: "A temporary password is generated for root@localhost: …" (any
    # sign but a space).
    _Said("password", r"(?i)(password[ \t]{1,4}is[ \t]{1,4}generated[ \t]{1,4}for[ \t]{1,4}"
          r"[^\s]{1,64}:[ \t]{1,4})(?!\[REDACTED:)[^\s]{1,256}", ("passw",), keep_prefix=True,
          anchored=True, starts=("password is generated",)),
    # Elasticsearch's elasticsearch-reset-password: "Password for the [elastic] user
    # successfully reset." then "New value: …".
    _Said("password", r"(?i)(password[ \t]{1,4}for[ \t]{1,4}the[ \t]{1,4}\[?[\w.-]{1,64}\]?"
          r"[ \t]{1,4}user[ \t]{1,4}successfully[ \t]{1,4}reset\.?\s{1,16}new[ \t]{1,4}value"
          r"[ \t]{0,4}:[ \t]{0,4})[^\s]{1,256}", ("passw",), keep_prefix=True, anchored=True,
          starts=("password for the",)),
    # A key in words: "use API key 9f8e…", "the access token is …", "secret key: …", and a
    # token after a verb ("the token for the bot is …"): a word of sixteen characters or
    # more.
    _Said("api_key", r"(?i)(\b(?:(?:api|secret|access|auth|private)[ _-]?(?:key|token)"
          r"|token(?=[ \t]{1,4}(?:for|of|is|was|set)\b|[ \t]{0,4}:))\b" + _FOR_WHOM + _TOLD
          + _told_value(16, _KEY_CHARS), ("api", "secret", "access", "auth", "private", "token"),
          keep_prefix=True, anchored=True, starts=_KEYS_TOLD),
    # A user's credentials in words: "Credentials: admin:S3cret!", "credentials =
    # 'admin:S3cret'" (not a URL, nor a name: "aws:default").
    _Said("password", r"(?i)(\bcredentials?[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"'`]?"
          r"[^\s:\"'`/@]{1,64}:)(?!//|\[REDACTED:)(?=[^\s\"'`]{0,255}[^A-Za-z\s\"'`])"
          r"[^\s\"'`]{4,256}", ("credential",), keep_prefix=True, anchored=True,
          starts=tuple(f"credential{s}{q}{sign}" for s in ("", "s") for q in ("", '"', "'")
                       for sign in (":", "=", " :", " ="))),
    # A table's row: the secret's name in its first cell, its value in the last, a word of
    # eight characters or more holding a letter and a digit (not a version: "2.1.0b1").
    _Row("secret", r"(?i)((?:passw(?:or)?d|passphrase|pass|pwd?|secret|token|api[_-]?key"
         r"|access[_-]?key|private[_-]?key)(?-i:(?![a-z]))[\w.-]{0,40}"
         r"(?:[ \t]{2,40}|[ \t]{0,8}[│|┃][ \t]{0,8}))(?!\[REDACTED:|\$|[vV]?[0-9]{1,4}\.[0-9])"
         rf"(?={_IN_CELL}{{0,511}}[0-9])(?={_IN_CELL}{{0,511}}[A-Za-z]){_IN_CELL}{{8,512}}"
         + _CELL_END, ("pass", "pw", "secret", "token", "api", "access", "private"),
         keep_prefix=True, anchored=True),
    # A secret a command printed on the next line: a lone word of letters and digits.
    _Printed("secret", r"(?i)((?:passw(?:or)?d|passphrase|token|secret|key)[\w.}\]'\"-]{0,40}"
             r"(?:[ \t]{1,4}\|[ \t]{0,4}base64[ \t]{1,4}(?:-d|-D|--decode))?[ \t]{0,4}\r?\n)"
             r"(?![^\r\n]{257})(?=[^\s]{0,255}[0-9])(?=[^\s]{0,255}[A-Za-z])"
             r"[^\s]{8,256}(?=[ \t]{0,4}(?:\r?\n|$))",
             ("passw", "passphrase", "token", "secret", "key"), keep_prefix=True,
             anchored=True),
)
"""The case-insensitive rules of secrets told in words: each is tried where one of its
needles starts."""
