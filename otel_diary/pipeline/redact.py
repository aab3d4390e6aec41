"""Redaction: text -> the same text with every secret replaced by ``[REDACTED:<kind>]``.

Runs before anything leaves the process (the model call, the hub POST, the file). Every
pattern is anchored on a literal or a token boundary and uses bounded quantifiers with no
ambiguous nested repetition (the repeated groups, a command's words before its flag in
:mod:`~otel_diary.pipeline.commands`, are delimited by white space), and private-key blocks
are found with plain string search, so the work is linear in the input: a megabyte of
build log costs about a fifth of a second, one built to be slow up to about two seconds
(``benchmarks/redaction.py``). A JSON string holding escapes (a file a tool call writes)
is also read as the text it stands for.
"""

from __future__ import annotations

import binascii
import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from otel_diary.pipeline.assignments import (
    ASSIGNMENT_KEYS,
    FLAG_RULES,
    NO_COUNT,
    QUOTED_VALUE,
    USER_PASS,
    ArgumentRule,
    AssignmentRule,
    argument,
    assignment,
)
from otel_diary.pipeline.commands import COMMAND_ANCHORED, COMMAND_RULES
from otel_diary.pipeline.formats import FORMAT_ANCHORED, FORMAT_RULES
from otel_diary.pipeline.keys import (
    MARK,
    SECRET_NAME,
    SERVICE_KEYS,
    WORD_CHARS,
    generated,
    key_runs,
    quoted,
    redact_private_keys,
    reference,
    token_start,
)
from otel_diary.pipeline.prose import PROSE_ANCHORED
from otel_diary.pipeline.rule import Rule
from otel_diary.text import clean

LITERAL_MARK = MARK.format(kind="configured_secret")
MIN_LITERAL = 6
"""Shorter configured secrets are not searched for literally (they would match prose)."""

_KIND = re.compile(r"[a-z0-9_]{1,40}")


_AWS_PREFIXES = ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AIPA", "ANPA", "ANVA",
                 "APKA", "AROA")

_USER = r"(?:\[REDACTED:[a-z0-9_]{1,40}\]|[^\s:/@\"'<>\[]{0,256})"
"""A URL's user: a key redacted already (``https://ghp_…@github.com``) is one, whole."""

BUILTIN_RULES: tuple[Rule, ...] = (
    Rule("aws_access_key",
         r"A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA)(?<![A-Z0-9].{4})"
         r"[A-Z0-9]{16}(?![A-Z0-9])",
         _AWS_PREFIXES),
    # The secret access key given with it (``AKIA… wJalr…``, ``AKIA…:wJalr…``,
    # ``AKIA… secret wJalr…``): forty characters of base64 just after the access key,
    # found by the marker the rule before left (the rules run in this order).
    Rule("aws_secret_key",
         r"(\[REDACTED:aws_access_key\][\s\"',:;=|]{1,4}(?:[A-Za-z_]{1,32}[\s\"':=]{1,4})?)"
         r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
         ("[REDACTED:aws_access_key]",), keep_prefix=True),
    Rule("gitlab_token",
         r"gl(?<![A-Za-z0-9_.-].{2})(?:pat|dt|rt|ptt|ft|soat|cbt|imt|oas|agent)"
         r"-[A-Za-z0-9_-]{20,255}",
         ("gl",)),
    Rule("slack_token",
         r"xox(?<![A-Za-z0-9_.-].{3})(?:e\.xox)?[abposre]-[A-Za-z0-9-]{10,255}", ("xox",)),
    Rule("slack_token",
         r"xapp-(?<![A-Za-z0-9_.-].{5})[0-9]-[A-Za-z0-9-]{10,255}", ("xapp-",)),
    Rule("slack_token",
         r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,255}",
         ("hooks.slack.com",)),
    # Discord's and Teams' incoming webhooks: whoever has the URL posts to the channel.
    Rule("discord_webhook",
         r"(discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/)[A-Za-z0-9_-]{20,255}",
         ("discord.com/api/webhooks/", "discordapp.com/api/webhooks/"), keep_prefix=True),
    Rule("teams_webhook", r"(\.webhook\.office\.com/webhookb2/)[^\s\"'<>]{20,512}",
         (".webhook.office.com/webhookb2/",), keep_prefix=True),
    Rule("teams_webhook", r"(outlook\.office\.com/webhook/)[^\s\"'<>]{20,512}",
         ("outlook.office.com/webhook/",), keep_prefix=True),
    Rule("zapier_webhook", r"(hooks\.zapier\.com/hooks/catch/[0-9]{1,20}/)[A-Za-z0-9]{4,64}",
         ("hooks.zapier.com/hooks/catch/",), keep_prefix=True),
    # A registry's credentials in Docker's config.json: base64 of user:password.
    Rule("docker_auth", r"(\"auth\"[ \t]{0,4}:[ \t]{0,4}\")(?:[A-Za-z0-9+/]{4}){3,1024}"
         r"(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?(?=\")", ('"auth"',), keep_prefix=True),
    # An API key as a URL's query parameter: ``?key=…``, as Google's APIs take it, and,
    # when it holds a letter and a digit, OpenWeather's ``?appid=``, Firebase's ``?auth=``
    # and a session's ``?sessionid=``.
    Rule("api_key", r"([?&](?:key|(?P<other>appid|auth|sessionid))=)(?!\[REDACTED:)"
         r"(?(other)(?=[^\s&#\"'<>]{0,511}[0-9])(?=[^\s&#\"'<>]{0,511}[A-Za-z]))"
         r"[^\s&#\"'<>]{8,512}",
         ("key=", "appid=", "auth=", "sessionid="), keep_prefix=True),
    Rule("api_key", r"sk-" + token_start(3) + r"[A-Za-z0-9_-]{20,255}", ("sk-",)),
    Rule("api_key", r"sk_(?:live|test)_" + token_start(8) + r"[A-Za-z0-9]{16,255}",
         ("sk_live_", "sk_test_")),
    Rule("api_key", r"rk_(?:live|test)_" + token_start(8) + r"[A-Za-z0-9]{16,255}",
         ("rk_live_", "rk_test_")),
    Rule("jwt",
         r"eyJ" + token_start(3) + r"[A-Za-z0-9_-]{4,8192}\.[A-Za-z0-9_-]{4,8192}"
         r"\.[A-Za-z0-9_-]{0,8192}",
         ("eyJ",)),
    Rule("google_oauth_token", r"ya29\." + token_start(5) + r"[A-Za-z0-9_.-]{20,2048}",
         ("ya29.",)),
    # A Telegram bot's token after its numeric id (``123456789:AA…``, ``/bot123456789:AA…``).
    Rule("telegram_bot_token", r"(:)(?<=[0-9]{6}:)AA[A-Za-z0-9_-]{30,40}(?![A-Za-z0-9_-])",
         (":AA",), keep_prefix=True),
    # A Terraform Cloud token's secret after its id (``<14 characters>.atlasv1.…``).
    Rule("terraform_token", r"(\.atlasv1\.)(?<=[A-Za-z0-9]{14}\.atlasv1\.)"
         r"[A-Za-z0-9_=-]{60,255}", (".atlasv1.",), keep_prefix=True),
    *(Rule("azure_storage_key", "(" + key + r")[A-Za-z0-9+/]{20,512}={0,2}", (key,),
           keep_prefix=True) for key in ("AccountKey=", "SharedAccessKey=")),
    Rule("azure_sas", r"(sig=(?<=[?&;]sig=))[A-Za-z0-9%+/=_-]{16,512}", ("sig=",),
         keep_prefix=True),
    Rule("url_signature", r"(X-(?:Amz|Goog)-Signature=)[0-9a-fA-F]{16,1024}",
         ("X-Amz-Signature=", "X-Goog-Signature="), keep_prefix=True),
    # The user may be empty (redis://:pw@host). MongoDB drivers take a password holding
    # "/" unescaped; elsewhere a "/" after a port ends the authority (https://host:8080/a@b
    # is a path), and one in a password (mysql://root:ab/cd@db) holds no "@" or ":". A password
    # holding "@" runs to the authority's last one (p@ss in ://u:p@ss@host).
    Rule("url_credentials",
         r"(mongodb(?:\+srv)?://" + _USER + r":)[^\s:\"'<>]{1,256}(?=@)",
         ("mongodb",), keep_prefix=True),
    Rule("url_credentials",
         r"(://" + _USER + r":)(?:[^\s/\"'<>]{1,256}"
         r"|(?![0-9]{1,5}/)[^\s\"'<>@:]{1,256})(?=@)",
         ("://",), keep_prefix=True),
    # A database URL has no port before its user's password (mysql://root:2024/pw@db).
    Rule("url_credentials",
         r"((?:mysql|mariadb|postgres(?:ql)?|rediss?|amqps?)(?:\+[a-z0-9]{1,20})?"
         r"://" + _USER + r":)(?!\[REDACTED:)[^\s\"'<>@:]{1,256}(?=@)",
         ("mysql", "mariadb", "postgres", "redis", "amqp"), keep_prefix=True),
    *COMMAND_RULES,
    *FORMAT_RULES,
    # A default code gives a secret it reads from the environment (``os.getenv(
    # "DB_PASSWORD", "hunter2")``, ``ENV.fetch('API_TOKEN', '…')``, ``process.env.
    # DB_PASSWORD || "hunter2"``, Java's ``getenv().getOrDefault("DB_PASSWORD", "…")``, Rust's
    # ``env::var("DB_PASSWORD").unwrap_or("…")``): a traceback's source line may show one.
    Rule("secret", (
        r"((?:(?:getenv|get|fetch|setdefault|getenv\(\)\.getOrDefault)\([ \t]{0,4}[\"']"
        + SECRET_NAME + r"[\"'][ \t]{0,4},"
        r"|process\.env\." + SECRET_NAME + r"[ \t]{0,4}(?:\|\||\?\?)"
        r"|var(?:_os)?\([ \t]{0,4}\"" + SECRET_NAME + r"\"[ \t]{0,4}\)\s{0,16}\.unwrap_or(?:_else)?"
        r"\((?:\|_?\|)?[ \t]{0,4}(?:String::from\()?)"
        r"[ \t]{0,4}(?P<q>[\"']))(?!\[REDACTED:)" + quoted("q")),
        ("getenv(", "get(", "fetch(", "setdefault(", "getOrDefault(", "process.env.",
         ".unwrap_or"), keep_prefix=True),
    # A user and a password given together in code: ``auth=("bob", "…")`` (requests),
    # ``HTTPBasicAuth(``, ``NetworkCredential(``, ``smtp.login(``.
    Rule("password", r"((?:auth=\(|(?:(?<=Basic)|(?<=Digest))Auth\(|NetworkCredential\(|\.login\()"
         r"[ \t]{0,4}(?:(?P<u>[\"'])[^\"'\r\n]{0,256}(?P=u)|[\w.]{1,64})[ \t]{0,4},[ \t]{0,4}"
         r"(?P<q>[\"']))(?!\[REDACTED:)" + quoted("q"),
         ("auth=(", "Auth(", "NetworkCredential(", ".login("), keep_prefix=True),
)
"""The case-sensitive families, each scanned by the regex engine from its literal prefix."""


@dataclass(frozen=True)
class _GluedRule(Rule):
    """A key glued to a longer word, taken only when its prefix names the key's kind on its
    own (``sk-proj-``, not ``sk-``: branch names and cloud resource names end words in
    ``-task-``, ``Disk-``) and its body looks generated (:func:`keys.generated`). Checked on
    each match, not in the pattern, so that a run of prefixes is scanned once."""

    def replace(self, match: re.Match[str]) -> str:
        if generated(match.group("key")):
            return MARK.format(kind=self.kind)
        return match.group(0)


GLUED_RULES: tuple[Rule, ...] = tuple(
    _GluedRule("api_key", (re.escape(prefix) + rf"(?<=[A-Za-z0-9_.-].{{{len(prefix)}}})"
                           r"(?P<key>[A-Za-z0-9_-]{20,255})"), (prefix,))
    for prefix in ("sk-proj-", "sk-ant-", "sk-svcacct-", "sk-admin-"))
"""OpenAI's and Anthropic's keys glued to a longer word (``task-sk-proj-…``), which their
own rules pass over as part of it."""


@dataclass(frozen=True)
class _ServiceRule(Rule):
    """A service's key by its prefix (:data:`keys.SERVICE_KEYS`): taken where a word starts
    with it, and glued to a longer word (``kh-gsk_…``, ``cfg.ghp_…``) when its body looks
    generated (:func:`keys.generated`)."""

    def replace(self, match: re.Match[str]) -> str:
        start = match.start()
        if start == 0 or match.string[start - 1] not in WORD_CHARS \
                or generated(match.group("key")):
            return MARK.format(kind=self.kind)
        return match.group(0)



_LITERAL_RULES = BUILTIN_RULES + FLAG_RULES
"""The case-sensitive rules: each is tried only on a text holding one of its needles."""

SERVICE_RULES: tuple[Rule, ...] = tuple(
    _ServiceRule(kind, re.escape(prefix) + f"(?P<key>{body})", (prefix,))
    for kind, prefixes, body in SERVICE_KEYS for prefix in prefixes)
"""The keys of services agents call, by their prefixes (:data:`keys.SERVICE_KEYS`)."""

WORD_RULES = SERVICE_RULES + GLUED_RULES
"""The rules whose every match is a run of :data:`keys.KEY_MIN` or more :data:`keys.KEY_CHARS`:
only such runs of a text are searched for their needles."""


_WORD = "[A-Za-z0-9._~+/=-]"
"""A credential's characters in a header."""

@dataclass(frozen=True)
class _CredentialsRule(Rule):
    """Base64 of ``user:password`` (HTTP Basic, npm's ``_auth``), taken only when it
    decodes to that: ``Basic realm`` and other words after the name stay."""

    def replace(self, match: re.Match[str]) -> str:
        try:
            decoded = binascii.a2b_base64(match.group("value")).decode()
        except (binascii.Error, UnicodeDecodeError):
            return match.group(0)
        if ":" in decoded and decoded.isprintable():
            return match.group(1) + MARK.format(kind=self.kind)
        return match.group(0)


ANCHORED_RULES: tuple[Rule, ...] = (
    Rule("bearer", (r"(?i)(\bbearer[ \t]{1,8})[A-Za-z0-9._~+/=-]{8,4096}"),
         ("bearer",), keep_prefix=True, anchored=True),
    # Basic credentials outside an Authorization header (``auth: "Basic …"``), and .npmrc's
    # ``_auth=…`` (also after a registry: ``//registry.example/:_auth=…``).
    _CredentialsRule("authorization", r"(?i)(\bbasic[ \t]{1,8})(?P<value>(?:[A-Za-z0-9+/]{4})"
                     r"{2,1024}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)(?![A-Za-z0-9+/=])",
                     ("basic",), anchored=True),
    _CredentialsRule("npm_token", r"(?i)((?<![A-Za-z0-9])_auth[ \t]{0,4}=[ \t]{0,4}[\"']?)"
                     r"(?P<value>(?:[A-Za-z0-9+/]{4}){2,1024}(?:[A-Za-z0-9+/]{2}=="
                     r"|[A-Za-z0-9+/]{3}=)?)(?![A-Za-z0-9+/=])", ("_auth",), anchored=True),
    # After its scheme, or alone (some APIs take the key itself): then a word of twelve
    # characters or more holding a letter and a digit (not "Authorization: required").
    Rule("authorization",
         (r"(?i)(\bauthorization[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?"
                     r"(?:(?:basic|token|digest|api-?key|key|bot|ssws|splunk|geniekey|sso-key)"
                     r"[ \t]{1,8}|(?=" + _WORD + "{12})"
                     r"(?=" + _WORD + "{0,4095}[0-9])(?=" + _WORD + "{0,4095}[a-z])))"
                     r"[A-Za-z0-9._~+/=:-]{4,4096}"),
         ("authorization",), keep_prefix=True, anchored=True),
    *(AssignmentRule("secret", assignment(tuple(k for k in ASSIGNMENT_KEYS
                                                  if k.startswith(needle))),
                      (needle,), anchored=True)
      for needle in ("pass", "secret", "token", "api", "access", "pw", "sshpass", "private",
                     "key", "salt", "psk")),
    *(ArgumentRule("secret", argument(tuple(k for k in ASSIGNMENT_KEYS
                                            if k.startswith(needle))), (needle,), anchored=True)
      for needle in ("pass", "secret", "token", "api", "access", "pw", "sshpass", "private",
                     "key", "salt", "psk")),
    *PROSE_ANCHORED,
    *FORMAT_ANCHORED,
    *COMMAND_ANCHORED,
    # Cookie: and Set-Cookie: headers: session ids, to the line's end.
    Rule("cookie", (r"(?i)(\b(?:set-)?cookie[\"']?[ \t]{0,4}:[ \t]{0,4}[\"']?)"
                             r"[^\s\"'][^\r\n\"']{0,4095}"),
         ("cookie",), keep_prefix=True, anchored=True),
    # pass alone, lower-case, with a quoted value (``pass: "…"``, ``{"pass": "…"}``); pass
    # or pwd ending a dotted name, also with one that is no count or path
    # (``mail.smtp.pass=…``, not ``results.pass=12`` or ``os.pwd=/app``).
    AssignmentRule("password", (
        r"(?P<head>(?P<key>(?P<dotted>(?<=[A-Za-z0-9]\.)(?i:pass|pwd)(?![A-Za-z0-9_]))"
        r"|(?<![A-Za-z0-9_.-])pass)(?:\\{0,7}[\"'])?[ \t]{0,4}[:=][ \t]{0,4})"
        r"(?!(?:\\{0,7}[\"'])?\[REDACTED:)(?:" + QUOTED_VALUE + "|(?(dotted)" + NO_COUNT
        + "|(?!)))"), ("pass", "pwd"), anchored=True),
    USER_PASS,
    # PWD= alone: a connection string's password (``Server=db;UID=sa;PWD=…;``, quoted,
    # braced, or to the next ``;``; ``pwd: "…"`` quoted, as MongoDB's createUser takes
    # it), elsewhere one that is no folder, variable or code
    # (``PWD=/app``, ``PWD=$HOME``, ``PWD=%CD%``, ``pwd=os.getcwd()``, ``pwd=password``:
    # it must hold a digit or a sign).
    AssignmentRule("password", (
        r"(?i)(?P<head>(?P<key>(?:(?P<connection>(?<=;))|(?<![A-Za-z0-9_.;-]))pwd)"
        r"(?:=|[\"']?[ \t]{0,4}:[ \t]{0,4}(?=[\"'])))"
        r"(?!\[REDACTED:)(?:(?P<quote>[\"'])(?!\.{0,2}/|~/|[A-Za-z]:[\\/]|\$)"
        + quoted("quote") + r"|\{[^}\r\n]{1,512}\}"
        r"|(?(connection)[^\s;\"'`]{1,512}"
        r"|(?![$%=]|\.{0,2}/|~/|[A-Za-z]:[\\/])(?=[^\s;\"'`(){}]{0,511}[0-9!@#^&*+?<>|~-])"
        r"(?![^\s;\"'`(){}]{0,512}\()[^\s;\"'`(){}]{1,512}))"),
        ("pwd",), anchored=True),
)
"""The case-insensitive families, tried at each occurrence of a needle, leftmost first."""

_SPACES = {ord(space): " " for space in
           "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
           "\u200a\u202f\u205f\u3000"}
"""The space separators other than the space itself, which the patterns' separators
(``[ \t]``) would not take: each becomes a space before redaction."""
_RECENT_MAX = 4096
_RECENT_CHARS = 200


class SecretRedactor:
    """Replaces secrets with ``[REDACTED:<kind>]``; a ``Redactor`` for the pipeline.

    Usage::

        redact = SecretRedactor({"ticket": r"TCK-[0-9]{8}"})
        redact("password=hunter2 TCK-12345678")
        # 'password=[REDACTED:password] [REDACTED:ticket]'

    ``extra`` maps a kind (``[a-z0-9_]``) to a regular expression; a group named
    ``secret`` limits the replacement to that group. Keep extra patterns linear: bounded
    quantifiers and no nested repetition. ``literals`` are secret values known in advance
    (the configured API keys): each occurrence becomes ``[REDACTED:configured_secret]``
    (values shorter than :data:`MIN_LITERAL` characters are ignored). Characters that
    hide text (zero-width, bidi controls) are removed first (see ``text.clean``), so they
    cannot split a secret past the patterns.
    """

    def __init__(self, extra: Mapping[str, str] | None = None, *,
                 literals: Iterable[str | None] = ()) -> None:
        self._extra = tuple(compile_extra(kind, pattern)
                            for kind, pattern in (extra or {}).items())
        usable = {clean(value) for value in literals if value and len(value) >= MIN_LITERAL}
        self._literals = tuple(sorted(usable, key=len, reverse=True))
        self._clean_texts: set[str] = set()
        """Short texts found to hold no secret (agent, model, route and tool names recur
        in every run): at most ``_RECENT_MAX`` of at most ``_RECENT_CHARS`` characters.
        A text that had one is not kept, so no secret stays in memory."""

    def prepare(self) -> SecretRedactor:
        """Compile every rule now, as ``serve``'s pipeline does before it listens; otherwise
        each is compiled when a text first holds one of its needles (most never are)."""
        for rule in (*WORD_RULES, *_LITERAL_RULES, *ANCHORED_RULES, *self._extra):
            rule.pattern  # noqa: B018  (compiled once, then kept on the rule)
        reference()
        return self

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if len(text) > _RECENT_CHARS:
            return self._redact(text)
        if text in self._clean_texts:
            return text
        done = self._redact(text)
        if done == text:
            if len(self._clean_texts) >= _RECENT_MAX:
                self._clean_texts.clear()
            self._clean_texts.add(text)
        return done

    def _redact(self, text: str) -> str:
        text = clean(text)
        if not text.isascii():  # a no-break or other wide space between key and value
            text = text.translate(_SPACES)
        for literal in self._literals:  # the configured secrets themselves, wherever they are
            if literal in text:
                text = text.replace(literal, LITERAL_MARK)
        kept: list[str] = []
        if ("\\n" in text or '\\"' in text) and _KEPT_OPEN not in text:
            text = _JSON_STRING.sub(functools.partial(self._redact_json_string, kept), text)
        text = redact_private_keys(text)
        words = key_runs(text)
        for rule in WORD_RULES if words else ():
            if rule.needles[0] in words:  # each is in a long word (and has one needle)
                text = rule.pattern.sub(rule.replace, text)
        text = _redact_literal(text)
        text = _redact_anchored(text)
        for rule in self._extra:
            text = rule.pattern.sub(rule.replace, text)
        if kept:
            text = _KEPT.sub(lambda match: kept[int(match.group(1))], text)
        return text

    def _redact_json_string(self, kept: list[str], match: re.Match[str]) -> str:
        """A JSON string holding escapes (a file a tool call writes, code a shell tool
        runs, JSON in JSON), redacted as the text it stands for, so that what the rules read
        across lines or quotes is read in it too; re-encoded only when that changed it.
        When it is a JSON value (after ``:``, ``[``, ``,`` or ``{``), what it becomes is
        kept aside, and its text is a placeholder while the rules read the rest: they read
        its decoded text already, and read escaped (a value's backslash before its quote)
        they would change code that holds no secret, and leave the JSON unparsable. Its
        name still makes it a secret's value (``"password": "…"``)."""
        literal = match.group(0)
        if "\\" not in literal:
            return literal
        try:
            decoded = json.loads(literal, strict=False)
        except ValueError:
            return literal
        done = self._redact(decoded)
        if done.count("[REDACTED:") != decoded.count("[REDACTED:"):
            literal = json.dumps(done, ensure_ascii=False)  # (cleaning alone is no reason)
        if not match.string[max(0, match.start() - 16):match.start()].rstrip().endswith(
                (":", "[", ",", "{")):
            return literal  # not a JSON value: a shell's quotes (-u "bob:pa\\"ss")
        kept.append(literal)
        return f'"{_KEPT_OPEN}{len(kept) - 1}{_KEPT_CLOSE}"'


_KEPT_OPEN, _KEPT_CLOSE = "\ue000", "\ue001"
_KEPT = re.compile('"' + _KEPT_OPEN + "([0-9]{1,9})" + _KEPT_CLOSE + '"')
"""A JSON string redacted on its own, kept aside while the rules read the text around it
(private-use characters, which a text that holds them does not get)."""


_JSON_STRING = re.compile(r'(?<!\\)"(?:[^"\\\r\n]|\\[^\r\n]){0,65536}"')
"""A JSON string on one line (its quote not escaped itself)."""


def _by_first(indexed: Iterable[tuple[int, str]]) -> dict[str, tuple[tuple[int, str], ...]]:
    """Needles (each with an index) by their first character: a text is searched only for
    the needles starting with one of its characters (a name or an id has few)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for index, needle in indexed:
        found.setdefault(needle[0], []).append((index, needle))
    return {first: tuple(pairs) for first, pairs in found.items()}


_RULE_OF = tuple(rule for rule in _LITERAL_RULES for _ in rule.needles)
_ALL_NEEDLES = tuple(enumerate(needle for rule in _LITERAL_RULES for needle in rule.needles))
_NEEDLES_BY_FIRST = _by_first(_ALL_NEEDLES)
"""The rule of each case-sensitive needle, and the needles with their indices (in the
rules' order), all and by first character."""
_MARKS = "\n".join({MARK.format(kind=rule.kind) for rule in (
    *WORD_RULES, *_LITERAL_RULES, *ANCHORED_RULES)} | {LITERAL_MARK})
_MARKED_NEEDLES = tuple((index, needle) for index, needle in _ALL_NEEDLES
                        if needle in _MARKS or "[" in needle or "]" in needle)
"""The needles a marker may spell, whole or in part (``[REDACTED:aws_access_key]``): the
only ones a text may hold after a rule changed it and not before, since a rule only ever
replaces a part of the text with a marker (a needle spanning a marker's edge holds its
bracket)."""
_FEW_CHARS = 4096
"""Past this length, counting a text's characters costs more than it saves."""


def _redact_literal(text: str) -> str:
    """Apply each case-sensitive rule to ``text`` if it holds one of the rule's needles
    (every match holds one: the scan is skipped), in the rules' order. A text up to
    :data:`_FEW_CHARS` long is searched only for the needles starting with one of its
    characters. After a rule changed it, only the later needles it held, and those a
    marker may spell (:data:`_MARKED_NEEDLES`), may be in it."""
    pairs = [pair for pair in _ALL_NEEDLES if pair[1] in text] if len(text) > _FEW_CHARS \
        else sorted((index, needle) for first in _NEEDLES_BY_FIRST.keys() & set(text)
                    for index, needle in _NEEDLES_BY_FIRST[first] if needle in text)
    done = None
    while True:
        for index in (index for index, needle in pairs if needle in text):
            rule = _RULE_OF[index]
            if rule is not done:  # a rule is tried once, whichever of its needles is found
                done, changed = rule, rule.pattern.sub(rule.replace, text)
                if changed is not text:
                    text = changed
                    pairs = sorted({*(pair for pair in pairs if pair[0] > index),
                                    *(pair for pair in _MARKED_NEEDLES if pair[0] > index)})
                    break
        else:
            return text


_SEPARATED = re.compile(r"(?i)[a-z0-9_.-]{0,52}(?:\\{0,7}[\"']\]?)?[ \t]{0,40}[:=,]")
"""What starts every assignment: a name, then ``:``, ``=`` or (a call's argument) ``,``.
Until its rule is compiled, a needle without one ("the build passed") is passed over: a
reader compiles none."""


_ANCHORED_RULES_OF: dict[str, list[int]] = {}
for _index, _rule in enumerate(ANCHORED_RULES):
    for _needle in _rule.needles:
        _ANCHORED_RULES_OF.setdefault(_needle, []).append(_index)
_ANCHORED_BY_FIRST = {first: tuple(
    (needle, -len(needle), tuple(sorted({index for shorter, indices in _ANCHORED_RULES_OF.items()
                                         if needle.startswith(shorter) for index in indices})))
    for _, needle in pairs) for first, pairs in _by_first(enumerate(_ANCHORED_RULES_OF)).items()}
"""The case-insensitive needles, by first character, each with the indices of the rules
tried where it is found: its own and those of the needles it starts with (``pass`` is
found wherever ``passw`` is, and tried with it, in the rules' order). A needle several
rules share is searched for once."""


def _replace_fitting(rule: Rule, match: re.Match[str]) -> str:
    return rule.replace(match) if rule.fits(match.string, match.start()) else match.group(0)


def _redact_anchored(text: str) -> str:
    """Apply the case-insensitive rules at their needles' positions, leftmost match first
    (a text up to :data:`_FEW_CHARS` long is searched only for the needles starting with
    one of its characters)."""
    rules = ANCHORED_RULES
    lowered = text.lower()
    if len(lowered) != len(text):  # a character changed length when lower-cased
        for rule in rules:
            text = rule.pattern.sub(functools.partial(_replace_fitting, rule), text)
        return text
    firsts = _ANCHORED_BY_FIRST.keys()
    candidates: list[tuple[int, int, tuple[int, ...]]] = []
    for first in firsts if len(lowered) > _FEW_CHARS else firsts & set(lowered):
        for needle, longest_first, indices in _ANCHORED_BY_FIRST[first]:
            position = lowered.find(needle)
            while position >= 0:
                candidates.append((position, longest_first, indices))
                position = lowered.find(needle, position + 1)
    if not candidates:
        return text
    candidates.sort()  # at one position, the longest needle's rules (all of them) first
    out: list[str] = []
    done = 0
    tried = -1
    for position, _, indices in candidates:
        if position < done or position == tried:
            continue  # (a shorter needle's rules were tried with the longest's)
        tried = position
        for index in indices:
            rule = rules[index]
            if ("pattern" not in rule.__dict__ and isinstance(rule, AssignmentRule)
                    and not _SEPARATED.match(text, position)) or not rule.fits(text, position):
                continue
            match = rule.pattern.match(text, position)
            if match is None:
                continue
            out.append(text[done:position])
            out.append(rule.replace(match))
            done = match.end()
            break
    out.append(text[done:])
    return "".join(out)


def compile_extra(kind: str, pattern: str) -> Rule:
    """A configured pattern as a rule; ``ValueError`` naming the kind when it is unusable."""
    if not _KIND.fullmatch(kind):
        raise ValueError(f"redaction kind {kind!r} must match [a-z0-9_]{{1,40}}")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"redaction pattern {kind!r} does not compile: {exc}") from None
    if compiled.fullmatch(""):
        raise ValueError(f"redaction pattern {kind!r} matches the empty string")
    return Rule(kind, pattern)


_default: SecretRedactor | None = None


def redact(text: str) -> str:
    """``text`` with the secrets of the process's redactor replaced: the built-in
    families, unless :func:`use` gave it another."""
    global _default
    if _default is None:
        _default = SecretRedactor()
    return _default(text)


def use(redactor: SecretRedactor) -> None:
    """Make ``redactor`` the one :func:`redact` applies (a CLI reader's: the configured
    patterns and keys too)."""
    global _default
    _default = redactor


def display_url(url: str) -> str:
    """``url`` fit for a log line: no user name, password, query or fragment, and redacted."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return redact(url)
    host = parts.netloc.rpartition("@")[2]
    return redact(urlunsplit((parts.scheme, host, parts.path, "", "")))
