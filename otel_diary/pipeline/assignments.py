"""Assignments that name a secret: ``password=…``, ``api_key: "…"``, ``"token": "…"`` in
the usual spellings of code, config and logs, and ``--password X``-style flags. The value
is redacted unless it names a secret kept elsewhere (:func:`keys.reference`); the kind
follows the name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_diary.pipeline.keys import (
    CALL,
    COMPOSER_AUTH,
    EMPHASIS,
    MARK,
    NAMES_NO_SECRET,
    quoted,
    reference,
    value_end,
)
from otel_diary.pipeline.rule import Rule

_GLUED_ONLY = ("pass", "pwd", "pw", "key", "salt")
"""Keys that name a secret only as the end of a longer name (``DB_PASS``, ``MYSQL_PWD``,
``ROOT_PW``, ``smtp-pass``, ``OPENAI_KEY``, ``stripe-key``, WordPress's ``NONCE_SALT``):
alone they are test results (``PASS: test_x``, ``{"pass": 12}``), the working directory
(``PWD=/app``), any mapping's keys (``key: value``) and a salt code makes (``salt =
bcrypt.gensalt()``). A lower-case ``pass`` with a quoted value is one too (``pass: "…"``,
``{"pass": "…"}``)."""

_NOT_SECRET = {"key": "".join(
    rf"(?<!{name}[_-])" for name in ("cache", "sort", "primary", "partition", "foreign",
                                      "build", "group", "routing", "shard", "hash", "lookup",
                                      "idempotency", "dedup", "unique", "composite", "row"))}
"""Names ending in ``_KEY`` that are no secret (``CACHE_KEY=v1``, ``PRIMARY_KEY=id``)."""

ASSIGNMENT_KEYS: dict[str, str] = {
    "password": "password", "passwd": "password", "passphrase": "password",
    "pass": "password", "pwd": "password", "pw": "password", "sshpass": "password",
    "secret": "secret",
    "token": "token",
    "api_key": "api_key", "api-key": "api_key", "apikey": "api_key",
    "private_key": "private_key", "private-key": "private_key", "privatekey": "private_key",
    "access_key": "api_key", "access-key": "api_key", "accesskey": "api_key",
    "key": "api_key", "salt": "secret", "psk": "password",
}


QUOTED_VALUE = (
    r"(?P<quote>[\"'])" + quoted("quote") +
    # In backticks (Markdown's inline code): one word, no template (`${x}`) or command.
    r"|(?P<tick>`)(?=[^`\s$]{1,256}`)[^`\s$]{1,256}" +
    # In escaped quotes (JSON inside a string, at any depth: \" \\\" \\\\\\\"): up to
    # the same escaped quote, the value's own more deeply escaped quotes included.
    r"|(?P<escaped>(?P<escapes>\\{1,7})[\"'])"
    r"(?:(?!(?<!\\)(?P=escapes)[\"'])[^\r\n]){1,512}")
"""A value in quotes, in backticks (one word), or in escaped quotes (groups ``quote``,
``tick`` and ``escaped``)."""


NO_COUNT = (r"(?![0-9][0-9.,/]{0,39}(?:ms|s|m|h|%)?(?![^\s\"'`,;)\]}]))"
             r"(?!\.{0,2}/|~/|[A-Za-z]:[\\/]|\\\\)"
             r"(?!(?i:true|false|yes|no|none|null|ok|n/a|all|passed|failed|pass|fail|skipped)"
             r"(?![A-Za-z0-9_]))(?!\[REDACTED:)(?!\\[\"'])[^\s\"'`]{1,512}")
"""An unquoted value that is no count, duration, ratio, path or verdict (``12``, ``1.2s``,
``3/4``, ``./build``, ``C:\\app``, ``PASSED``): where ``pass`` or ``pwd`` ending a dotted
name names test results or a folder, those are."""


_GENERATED = (r"(?=[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?![^\s,;])"
              r"|[0-9a-f]{16,128}(?![^\s,;])"
              r"|(?![^\s]{0,500}[a-z]{5})(?=[^\s]{0,511}[0-9])(?=[^\s]{0,511}[a-z])"
              r"(?=[^\s]{0,511}[A-Z])[A-Za-z0-9_.+=-]{20,512}(?![^\s,;]))")
"""A value that looks generated: after a name aligned with others (``SecretID:         …``):
a UUID, hex, or twenty characters or more of both cases and digits with no word in them
(not ``password:     The password for …``, ``StrongPasswordPolicyV2``, a path, an id in
capitals)."""
_LABELLED = r"(?=[ \t]{0,4}(?:`|[^\s]{0,255}[0-9!@#$%^&*+=?~]))"
"""A value after a label in Markdown's or HTML's emphasis (``**Password:** …``): in
backticks, or holding a digit or a sign (not ``**Locating a Token**: There are …``)."""

_NO_CODE = (r"(?![ \t]{0,16}(?:(?:raise|return|pass|continue|break|if|elif|else|for|while"
            r"|try|with|import|from|yield|del|assert|await|print|def|class|throw|const|let|var)"
            r"(?=[ \t(:;]|\r?$)|(?:self|this|log|logger)\.))")
"""A line under a name and a colon that is code, not the name's value: the block a
Python ``if not api_key:`` or ``except InvalidToken:`` opens."""


_CAMEL: dict[str, tuple[str, ...]] = {
    "key": ("signing", "jwt", "encryption", "decryption", "master", "auth", "license",
            "subscription", "service", "servicerole", "admin", "account", "hmac", "shared",
            "preshared", "consumer", "webhook", "write", "server", "deploy", "enc", "aes",
            "cipher", "crypto", "integration", "ingest", "restapi", "sdk"),
    "pass": ("db", "smtp", "mail", "email", "admin", "root", "user", "mysql", "postgres", "pg",
             "redis", "ftp", "sftp", "ssh", "ldap", "bind", "proxy", "account", "login", "sudo",
             "vnc", "wifi", "keystore", "store", "key", "sql", "rabbit", "mongo", "amqp", "imap",
             "pop", "mqtt", "broker", "vpn", "rdp", "app", "api"),
}
_CAMEL["pw"] = _CAMEL["pass"]
"""The words that make a name in camel case ending in ``Key``, ``Pass`` or ``Pw`` a
secret's (``signingKey``, ``JwtKey``, ``dbPass``, ``rootPw``): ``dataKey``, ``queryKey``,
``sessionKey``, ``renderPass``, ``showPw`` and most such names in code are not. ``Pwd``
ends a secret's name after any word (``dbPwd``)."""


def _camel(key: str) -> str:
    """``key`` ending a name in camel case (``signingKey``, ``DbPass``, ``userPwd``),
    case-sensitively, after one of :data:`_CAMEL`'s words (``Pwd``, or ``PWD`` as Azure's
    ``userPWD``, after any)."""
    capital = f"(?-i:{key.capitalize()}|{key.upper()})" if key == "pwd" \
        else f"(?-i:{key.capitalize()})"
    words = _CAMEL.get(key)
    if words is None:
        return rf"(?-i:(?<=[a-z0-9])){capital}"
    return "(?:" + "|".join(rf"(?<={word})" for word in words) + ")" + capital


_LAST = {"pw": r"(?![\w-])", "psk": r"(?![\w.-])"}
"""Keys that name a secret only as a name's last word (``wpa_psk``, not
``UNKNOWN_PSK_IDENTITY``); ``pw`` after one of :data:`_CAMEL`'s
(``ROOT_PW``, ``dbPw``; not ``async_pw_transport``, ``gpu_pw``, ``servo_pw``: power, a
pulse's width)."""


def _glued(key: str) -> str:
    """``key`` ending a longer name: after ``_``, ``-`` or ``__`` (unless the name is one
    of :data:`_NOT_SECRET`'s), or in camel case; followed by no letter (for
    :data:`_LAST`'s: after one of :data:`_CAMEL`'s words, and by nothing of a name)."""
    after_separator = (rf"(?:(?<=[A-Za-z0-9][_-])|(?<=[A-Za-z0-9]__)){_NOT_SECRET.get(key, '')}"
                       if key not in _LAST else
                       "(?:" + "|".join(rf"(?<={word}[_-])" for word in _CAMEL[key]) + ")")
    return rf"(?:{after_separator}{key}|{_camel(key)})(?![A-Za-z]){_LAST.get(key, '')}"


def _names(keys: tuple[str, ...]) -> str:
    """The alternatives of ``keys``, longest first; ``pass``, ``pwd`` and ``key`` only
    ending a longer name (:func:`_glued`)."""
    return "|".join(_glued(key) if key in _GLUED_ONLY else re.escape(key) + _LAST.get(key, "")
                    for key in sorted(keys, key=len, reverse=True))


def assignment(keys: tuple[str, ...]) -> str:
    """``<key>=<value>`` for one of ``keys``, in the usual spellings of config and logs.

    After the key comes (case-sensitively) no lower-case letter, so ``tokens: 5`` and
    ``secretary:`` are prose, and a chart's ``existingSecret:`` and an ARN's
    ``…:123456789012:secret:NAME`` name a secret (``pass``
    and ``pwd`` end a longer name, followed by no letter: ``DB_PASS``, not ``PASS:`` or
    ``TESTS_PASSED``); then a separator and a value, quoted up to its quote or the line
    end, else up to white space. A quote may be escaped (``{\\"password\\": \\"x\\"}``,
    JSON logged inside a string). The value may be on the next line, or be the value of
    a mapping nested under the key (``password:\\n  value: x``) or a YAML block's first
    line (``password: |``); a word that is itself a key takes the value after it along
    (``api_key: secret: x``, ``KEY= password = x``). The name may be a subscript's, given
    a quoted value (``os.environ["DB_PASSWORD"] = "…"``; an expression is code).
    """
    return (
        r"(?i)(?!(?<=existing)secret|(?<=[0-9]{12}:)secret:)"
        r"(?P<head>(?P<key>" + _names(keys) + r")(?-i:(?![a-z]))"
        + NAMES_NO_SECRET
        + r"[A-Za-z0-9_.-]{0,40}"
        r"(?:\\{0,7}[\"'](?P<subscript>\])?)?"
        r"(?:(?P<emph>" + EMPHASIS + r")[ \t]{0,4}(?::=|=>|[:=])"
        r"|[ \t]{0,4}(?::=|=>|[:=])(?:[ \t]{0,4}(?P<emph2>" + EMPHASIS + r")(?=[ \t]))?"
        r"|[ \t]{5,40}=(?=[ \t]{1,4}\\{0,7}[\"']))"
        r"(?:[ \t]{0,4}|[ \t]{5,16}" + _GENERATED + ")"
        r"(?(emph)" + _LABELLED + ")(?(emph2)" + _LABELLED + ")"
        r"(?:(?<=:)(?:[ \t]{0,4}(?:[|>][1-9+-]{0,2}[ \t]{0,4}(?=\r?\n[ \t]))?\r?\n)" + _NO_CODE +
        r"(?:[ \t]{0,8}-[ \t]{1,4}|[ \t]{1,8}(?:[A-Za-z0-9_-]{1,40}:[ \t]{1,4})?)"
        r"|\{[ \t]{0,4}(?P<nested>\\{0,7}[\"'])"
        r"(?:value|secret|password|token|key|data)(?P=nested)[ \t]{0,4}:[ \t]{0,4}"
        r"(?=\\{0,7}[\"']))?)"
        r"(?!(?:\\{0,7}[\"'])?\[REDACTED:|[=>]|[{\[](?![^\s\"'`])"
        r"|[\"'][ \t]{0,4}(?:[)\],;}]|\r?\n|$)|" + EMPHASIS + r"[ \t]"
        r"|\|[1-9+-]{0,2}[ \t]{0,4}\r?\n|\|?[1-9+-]{0,2}\\{1,7}[nr])"
        r"(?:" + QUOTED_VALUE + "|(?:" + CALL + r"|(?!\\[\"'])[^\s\"'`]{1,512})"
        r"(?:(?:(?<=[:=])[ \t]{0,4}|[ \t]{1,4}(?::=|=>|[:=])[ \t]{0,4})"
        r"(?:(?P<inner>[\"'])(?!\[REDACTED:)(?P<second>" + quoted("inner") + r")(?P=inner)?"
        r"|[^\s\"'`]{1,512}))?)"
        r"(?P<fallback>[ \t]{1,4}(?:or|\|\||\?\?)[ \t]{1,4}(?P<fq>[\"'])"
        r"(?:(?!(?P=fq))[^\r\n]){1,512}(?P=fq))?"
    )


_IDENTIFIER = re.compile(r"(?:[A-Za-z_]\w{0,60}\.){0,6}(?P<last>[A-Za-z_]\w{0,60})"
                         r"(?P<end>[)\]},;]{0,8})")
_NAME_BEFORE = re.compile(r"[\w.$]{0,100}\Z")
_NAME = re.compile(r"[\w.-]{1,140}")
_SECRET_WORD = re.compile(r"(?i)pass|pwd|secret|token|key|credential")
_CODE_WORD = re.compile(r"_|[a-z][A-Z]")
"""A name only code gives: words joined by ``_`` or in camel case (``eos_token``)."""
_OPERATOR = re.compile(r"[ \t]{0,4}(?:[-+*/%|&^<>.\[]|(?:or|and|if|is|in|not)(?![\w]))")
"""What follows a value that is code: an operator (``password = password + salt``)."""


def _names_itself(match: re.Match[str]) -> bool:
    """Whether the unquoted value is code naming the secret, not the secret: the name's
    last part again, given to an attribute or as an argument (``self.api_key = api_key``,
    ``this.signingKey = signingKey;``, ``OpenAI(api_key=api_key)``), or an attribute whose
    name in code says it holds one (``pad_token = tokenizer.eos_token``); not
    ``POSTGRES_PASSWORD: password`` nor ``password=Hunter2.pass``."""
    text = match.string
    value = _IDENTIFIER.fullmatch(text, match.end("head"), match.end())
    if value is None:
        return False
    last = value.group("last")
    if "." in value.group(0):
        return _SECRET_WORD.search(last) is not None and _CODE_WORD.search(last) is not None
    before = _NAME_BEFORE.search(text, max(0, match.start() - 100), match.start())
    name = _NAME.match(text, match.start(), match.end("head"))
    if before is None or name is None:
        return False
    whole = before.group(0) + name.group(0)
    return whole.rpartition(".")[2].lstrip("_").lower() == last.lower() \
        and ("." in whole or bool(value.group("end"))
             or _OPERATOR.match(text, match.end()) is not None)


_CALLED_VALUE = re.compile(r"(?:\[\])?[A-Za-z_](?:[\w.]|::){0,100}\(")
_LITERAL = re.compile(r"\"([^\"\r\n]{0,200})\"|'([^'\r\n]{0,200})'")
_A_NAME = re.compile(r"[A-Za-z_.-]{0,60}|[A-Z0-9_.-]{1,60}"
                     r"|\[REDACTED:\w{1,40}\]|[^\r\n]{0,200}\s[^\r\n]{0,200}")
_CODEC = re.compile(r"(?i)utf-?(?:8|16|32)(?:-sig)?|latin-?1|iso-?8859-[0-9]{1,2}|cp[0-9]{3,4}"
                    r"|sha-?[0-9]{1,3}|[hre]s[0-9]{3}|(?:ed|x)25519|ed448|base64|md5"
                    r"|[0-9]{1,6}(?:ms|[smhdwy])")


def _names_only(code: str) -> bool:
    """Whether every literal in ``code`` names something or says something
    (``'password'``, ``"DB_PASSWORD"``, ``'AccessKeyId'``, ``'Enter password: '``), not a
    secret: no digit but in capitals, or words; or an encoding's or an algorithm's name
    (``'utf-8'``, ``"HS256"``), or a duration (``expiresIn: '1h'``)."""
    for double, single in _LITERAL.findall(code):
        literal = double or single
        if not (_A_NAME.fullmatch(literal) or _CODEC.fullmatch(literal)):
            return False
    return True


_AFTER_CALL = re.compile(r"\)\w")
"""A word right after a call's closing parenthesis (``Aaa()0``): no call, a password."""
_ARGUMENT_VALUE = re.compile(r"[A-Za-z_](?:[A-Za-z_]{0,59}|\w{0,29}_\w{1,30}"
                             r"|\w{0,56}?[a-z]{3}\w{0,56})\)")
"""A variable or a type given as an argument: a name of letters, of words joined by ``_``
or holding one (``pkv``, ``api_key_2``, ``X25519PublicKey``; not ``A0000``, which may be
the secret)."""
_WORD = re.compile(r"[a-z]{3}")


def _computed(match: re.Match[str]) -> bool | None:
    """Whether an unquoted value is code computing the secret from names (``next(tokens)``,
    ``secrets.token_hex(32)``, ``input('Password: ')``, ``bcrypt.hashpw(pw.encode(), s)``)
    or a variable given as an argument (``f(past_key_values=pkv)``): True; a call given a
    literal that may be the secret on its line (``decrypt('Xk7pL2mQ9rTz')``), or any other
    value: None."""
    text, start, end = match.string, match.end("head"), match.end()
    groups = match.groupdict()
    if groups.get("quote") or groups.get("tick") or groups.get("escaped") \
            or groups.get("fallback") \
            or text.startswith("-", match.start()):
        return None  # a literal, a literal to fall back to, a command's flag
    line_start = text.rfind("\n", 0, match.start()) + 1
    if _ARGUMENT_VALUE.fullmatch(text, start, end):  # in a call: f(past_key_values=pkv)
        return text.rfind("(", line_start, match.start()) \
            > text.rfind(")", line_start, match.start()) or None
    called = _CALLED_VALUE.match(text, start, end)
    if called is None or not _WORD.search(called.group(0)) \
            or _AFTER_CALL.search(text, start, end + 1):
        return None  # no word of code in its name, or a word after the call: A000(), Aaa()0
    line_end = text.find("\n", start, start + 400)
    line = text[start:line_end if line_end >= 0 else start + 400]
    if ")" not in line:
        return None  # not a call: a password that holds "(" (AA(:::)
    return _names_only(line) or None


@dataclass(frozen=True)
class AssignmentRule(Rule):
    """``password=…``-style assignments and ``--password X`` flags; the kind follows the key."""

    def replace(self, match: re.Match[str]) -> str:
        groups = match.groupdict()
        mark = MARK.format(kind=ASSIGNMENT_KEYS.get(groups["key"].lower(), "secret"))
        if groups.get("subscript") and not (groups.get("quote") or groups.get("escaped")):
            return match.group(0)  # code: credentials["token"] = token
        if _names_itself(match):
            return match.group(0)  # code: self.api_key = api_key, pad_token = t.eos_token
        if _computed(match):
            return match.group(0)  # code: token = next(tokens), f(past_key_values=pkv)
        named = reference().match(match.string, match.end("head"))
        if named and _names_only(named.group(0)):
            if groups.get("second") and not reference().match(match.string,
                                                              match.start("inner")):
                # a type, then the name's default: token: str = "…" (not "$TOKEN")
                return (match.string[match.start():match.start("second")] + mark
                        + match.string[match.end("second"):match.end()])
            if not groups.get("fallback"):
                return match.group(0)  # a variable, code reading one, a type, a placeholder
            end = match.end("fq") - match.start()  # but the literal it falls back to
            return match.group(0)[:end] + mark + groups["fq"]
        start, value, end = match.start(), match.end("head"), match.end()
        ends = None if groups.get("quote") or groups.get("tick") \
            else value_end(match.string, start)
        if ends is not None:  # at the next parameter of a URL's query, or setting of a list
            rest = ends.search(match.string, value, end)
            if rest is not None:
                return match.group(0) if rest.start() == value else \
                    groups["head"] + mark + match.string[rest.start():end]
        return groups["head"] + (groups.get("escaped") or groups.get("quote")
                                 or groups.get("tick") or "") + mark



def argument(keys: tuple[str, ...]) -> str:
    """A call's first argument naming a secret (its name ends as one of ``keys`` does),
    quoted, then its second, the value, quoted (``setenv("API_TOKEN", "…")``,
    ``define('DB_PASSWORD', '…')``, ``os.getenv("API_KEY", "…")``): what
    :class:`ArgumentRule` takes."""
    return (r"(?i)(?P<head>(?P<key>" + _names(keys) + r")\\{0,7}[\"'][ \t]{0,4},[ \t]{0,16})"
            r"(?!(?:\\{0,7}[\"'])?\[REDACTED:)(?:" + QUOTED_VALUE + ")")


_CALLED = re.compile(r"[A-Za-z0-9_]\([ \t]{0,4}\\{0,7}[\"'][A-Za-z0-9_.-]{0,60}")
"""What comes before a secret's name given as a call's first argument: ``setenv("``."""


@dataclass(frozen=True)
class ArgumentRule(AssignmentRule):
    """A secret given to a call after its name: only where the name is the call's first
    argument, not a tuple's or a list's first item (``("token", "…")``, ``["password",
    "email"]``), and only a value of one word (not ``print("password", "is wrong")``)."""

    def fits(self, text: str, position: int) -> bool:
        paren = text.rfind("(", max(0, position - 80), position)
        return paren > 0 and _CALLED.fullmatch(text, paren - 1, position) is not None

    def replace(self, match: re.Match[str]) -> str:
        if any(map(str.isspace, match.string[match.end("head"):match.end()])):
            return match.group(0)  # words, not a secret: print("password", "is wrong")
        return super().replace(match)


_SET = re.compile(r"[ \t]{0,4}[:=]")
_USER_BEFORE = re.compile(r"(?i)(?<![\w-])(?:user(?:name)?|login)[\"']?[ \t]{0,4}[:=]")


@dataclass(frozen=True)
class UserPassRule(AssignmentRule):
    """``pass`` alone with an unquoted value, after a user's name on its line or the line
    before (``user=admin pass=…``, ``login: bob, pass: …``, ``user: bob`` then ``pass:
    …``): alone, ``pass: 12`` is a count."""

    def fits(self, text: str, position: int) -> bool:
        if _SET.match(text, position + 4) is None:
            return False  # not "pass" given a value (the needle is in "password>")
        low = max(0, position - 256)
        line = text.rfind("\n", low, position)
        start = text.rfind("\n", low, line) + 1 if line >= 0 else low
        return _USER_BEFORE.search(text, max(start, low), position) is not None


USER_PASS = UserPassRule("password", (
    r"(?P<head>(?P<key>(?<![A-Za-z0-9_.-])pass)[ \t]{0,4}[:=][ \t]{0,4})(?!\[REDACTED:)"
    + NO_COUNT), ("pass",), anchored=True)
"""A user's password after its name: ``user=admin pass=…``."""


FLAG_RULES: tuple[Rule, ...] = (
    AssignmentRule("secret", (
        r"(?P<head>--(?<!pulumi[ \t]config[ \t]set[ \t]--)(?=[A-Za-z])"
        r"(?i:(?:[a-z0-9]{1,20}[-_](?:[a-z0-9]{1,20}[-_])?)?"
        r"(?P<key>password|passwd|passphrase|secret|token|api[-_]?key|access[-_]?key|auth"
        r"(?:[-_]?key|token)?"
        r"|(?<=[a-z0-9][-_])(?:pass|pwd|pw)|(?:(?<=account[-_])|(?<=signing[-_])"
        r"|(?<=master[-_])|(?<=encryption[-_])|(?<=certificate[-_]))key))"
        r"(?![A-Za-z0-9_-])(?:[ \t]{1,4}|[ \t]{0,4}=[ \t]{0,4}"
        # an argument list: ['--password', 'value'], ["--token", "value"]
        r"|(?P<listed>[\"']),[ \t]{0,2}(?=(?P=listed))))"
        r"(?!(?:\\{0,7}[\"'])?\[REDACTED:)"
        r"(?!(?<=-auth[ \t=])" + COMPOSER_AUTH + ")"
        r"(?:(?P<quote>\\{0,7}[\"'])" + quoted("quote")
        + r"|(?!--|[<>]|\.{0,2}/|~/)[^\s\"'`\\]{1,512})"),
        ("--",)),
)
"""Secrets given to a command as a flag's value, with ``=`` or a space (not ``pulumi config
set --secret NAME …``, where the flag takes none, nor the name of the credentials composer's
``--auth`` sets: ``bearer.HOST``, ``github-oauth.HOST``)."""
