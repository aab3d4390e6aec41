"""Secrets told in words and printed by tools: a prompt or a reply giving a password (``the
password for the admin account is …``), a key (``use API key …``) or a user's credentials
(``Credentials: admin:…``); a server printing one it generated (MySQL's temporary
password, Elasticsearch's); a command printing one on the next line (``cat
…/initialAdminPassword``, ``vault kv get -field=password …``); and a table's row (``vault
kv get``, ``pulumi config --show-secrets``).

A value told in words is taken only when it holds a letter and a digit and is no name
(``the password is required``, ``the API key is OPENAI_API_KEY``, ``the token for this run
is expired``, ``the key is /run/secrets/key2``); a server's banner is taken as it prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_diary.pipeline.keys import EMPHASIS
from otel_diary.pipeline.rule import Rule

_FOR_WHOM = (r"(?:[ \t]{1,4}(?:for|of|to|on)(?:[ \t]{1,4}[^\s:,;]{1,64}){1,4}?"
             r"(?=[ \t]{1,4}(?:is|was)[ \t:\r\n]|[ \t]{0,4}(?::|=|->|\u2192)))?")
"""Whose secret it is, up to four words (``for the admin account``, ``to the staging
database``, ``for the elastic built-in superuser``), when a verb follows."""

_AFTER = r"(?:[ \t]{1,4}|[ \t]{0,4}(?:\r?\n[ \t]{0,8}){1,2})"
"""White space after a verb or a sign, or the value's line (after an empty one, too)."""


def _told_after(signs: str) -> str:
    """How the value follows the name: after a verb (``is``, ``was set to``,
    Elasticsearch's ``is :``; also on the next line), one of ``signs`` (``:``, ``->``; also
    in a label's emphasis, ``**API key:**``), `` - ``, a comma and ``it is`` (``my
    password, it's …``), or a space (``password hunter2xyz``)."""
    return (r"(?:[ \t]{1,4}(?:(?:is|was)(?:[ \t]{1,4}(?:now|still))?"
            r"|(?:(?:was|is|has[ \t]{1,4}been)[ \t]{1,4})?(?:set|changed|reset|updated)"
            r"[ \t]{1,4}to)"
            r"(?:[ \t]{0,4}:)?" + _AFTER + r"|" + EMPHASIS + r"?[ \t]{0,4}(?:" + signs + ")"
            + EMPHASIS + r"?(?:" + _AFTER + "|(?=[^\\s]))"
            + r"|[ \t]{1,4}-[ \t]{1,4}"
            r"|[ \t]{0,2},[ \t]{1,4}(?:(?:it|which)[ \t]{1,4}(?:is|was)|it['\u2019]s)[ \t]{1,4}"
            r"|[ \t]{1,4})")


_END = r"(?![^\s\"'`,;])"
_A_NAME = (r"[$%/~.<{(\[]|[A-Za-z0-9]{1,20}-[a-z]{2,20}ed(?![A-Za-z0-9-])"
           r"|[A-Z][A-Z0-9]{0,40}(?:_[A-Z0-9]{1,40}){1,8}" + _END
           + r"|(?(q)(?!)|[a-z0-9]{1,40}(?:[-._][a-z0-9]{1,40}){2,8}" + _END + ")"
           + r"|[A-Za-z_]\w{0,40}(?:\.[A-Za-z_]\w{0,40}){1,6}" + _END + r"|[\w.]{1,60}[(\[]")
"""A value that names or places the secret, or says how it is kept: a variable, a path, a
placeholder, ``base64-encoded``, ``OPENAI_API_KEY_2024``, ``gpt-4o-mini-2024-07-18`` (not
in quotes or backticks: ``"kettle-zephyr-8304"`` is one), ``settings.GITHUB_TOKEN``,
code (``f(x)``, ``pw[:-1]``)."""


def _told(name: str, minimum: int, maximum: int, chars: str = "",
          signs: str = ":|->|\u2192") -> str:
    """``name`` (group 1, with whose it is, what follows it (:func:`_told_after`) and an
    opening quote or backtick, group ``q``), then a value of ``minimum`` to ``maximum`` of
    ``chars`` holding a letter and a digit (by default: in quotes, up to the quote; else
    one word, up to ``,`` or ``;``). A password's name and ``=`` are code's (``pw = pw[:-1]``,
    an assignment's rule's); a key's may be prose's (``API Key = …``)."""
    word = chars or r"[^\s\"'`,;]"
    quoted = chars or r"[^\s\"'`]"
    most = maximum - 1
    return (r"(?i)(" + name + _FOR_WHOM + _told_after(signs) + r"(?P<q>[\"'`])?)(?!\[REDACTED:|"
            + _A_NAME
            + ")" rf"(?(q)(?={quoted}{{0,{most}}}[0-9])(?={quoted}{{0,{most}}}[A-Za-z])"
            rf"{quoted}{{{minimum},{maximum}}}(?=(?P=q))"
            rf"|(?={word}{{0,{most}}}[0-9])(?={word}{{0,{most}}}[A-Za-z]){word}{{{minimum},{maximum}}})")


def _line_start(text: str, position: int, within: int) -> int | None:
    """Where the line holding ``position`` starts, if it starts at most ``within``
    characters before it."""
    start = text.rfind("\n", max(0, position - within), position) + 1
    return start if start > 0 or position < within else None


def _said(text: str, position: int, starts: tuple[str, ...]) -> bool:
    """Whether the words at ``position``, lower-cased and single-spaced, start with one of
    ``starts``."""
    head = text[position:position + 48].lower()
    if head.startswith(starts):
        return True
    return ("  " in head or "\t" in head or "\n" in head) \
        and " ".join(head.split()).startswith(starts)


@dataclass(frozen=True)
class _Said(Rule):
    """A rule tried only where the text, lower-cased and single-spaced, starts with one of
    ``starts`` (a title naming "the orders API" compiles no rule)."""

    starts: tuple[str, ...] = ()

    def fits(self, text: str, position: int) -> bool:
        return _said(text, position, self.starts)


_A_SCHEME = (r"(?:https?|ssh|git|file|s3|gs|env|arn|sasl_\w{1,20}|plain|scram|oauth\w{0,20}"
             r"|bearer|basic|none)")
"""What before ``:`` names a scheme or a mechanism, not a user (``GIT_AUTH=ssh:…``,
``KAFKA_AUTH=SASL_SSL:…``)."""


@dataclass(frozen=True)
class _NameEnding(Rule):
    """A rule tried only where its needle ends a longer name: after a letter or a digit and
    ``_`` or ``-`` (``BASIC_AUTH``), or in camel case (``basicAuth``)."""

    def fits(self, text: str, position: int) -> bool:
        before = text[max(0, position - 2):position]
        return (len(before) == 2 and before[1] in "_-" and before[0].isalnum()) \
            or (before[-1:].islower() and text[position:position + 1].isupper())


_QUALIFIED = ("client", "bot", "refresh", "session", "signing", "license", "webhook")
"""Words that make ``secret``, ``token`` or ``key`` after them a secret's name in words."""


@dataclass(frozen=True)
class _KeyTold(_Said):
    """A key told in words: where the text starts as one does, or ``secret``, ``token`` or
    ``key`` follows one of :data:`_QUALIFIED`'s words (``bot token …``)."""

    def fits(self, text: str, position: int) -> bool:
        return super().fits(text, position) or (
            text[position - 1:position] in (" ", "_", "-")
            and text[max(0, position - 9):position].lower().rstrip(" _-").endswith(_QUALIFIED)
            and text[position:position + 6].lower().startswith(("secret", "token", "key")))


_KEYS_TOLD = (*(f"{what}{between}{key}" for what in ("api", "secret", "access", "auth", "private")
                for between in ("", " ", "_", "-") for key in ("key", "token")),
              *(f"{word} {verb}" for word in ("token", "secret", "key")
                for verb in ("for", "of", "to", "is", "was", "set", "changed", "updated")))
"""What the rule of a key told in words starts with."""

_KEY_NAME = (r"\b(?:(?:api|secret|access|auth|private)[ _-]?(?:key|token)"
             r"|(?:" + "|".join(f"(?<={word}[ _-])" for word in _QUALIFIED)
             + r")(?:secret|token|key)"
             r"|(?:token|secret|key)(?=[ \t]{1,4}(?:for|of|to|is|was)\b"
             r"|[ \t]{1,4}(?:set|changed|updated)[ \t]{1,4}to\b))\b")
"""A key's name in words: ``API key``, ``access token``, ``client secret``, ``bot token``,
or ``token``, ``secret`` and ``key`` alone before a verb or whose it is."""

_KEY_CHARS = "[A-Za-z0-9_.~+/=-]"
"""What a key told in words is made of (no sign that ends a sentence)."""


@dataclass(frozen=True)
class _Printed(Rule):
    """A secret a command printed on the line after it: a command reading a file or a
    variable named as a secret's (``cat /var/jenkins_home/secrets/initialAdminPassword``,
    ``echo $DB_PASSWORD``), a secret store's (``vault kv get -field=password …``,
    ``kubectl get secret db -o jsonpath='{.data.password}' | base64 -d``), or one printing
    a secret it made (``aws ecr get-login-password``, ``gh auth token``): tried only where
    the needle is on such a command's line."""

    def fits(self, text: str, position: int) -> bool:
        if text.find("\n", position, position + 300) < 0:
            return False
        start = _line_start(text, position, 512)
        line = None if start is None else _PRINTS.fullmatch(text, start, position)
        if line is None:
            return False
        if line.group("read") is None:
            return True  # a secret store's read, or a command printing a secret it made
        # a file or a variable: the needle is a word of its name, and its last
        before = text[position - 1:position]
        return (not before.islower() or text[position:position + 1].isupper()) \
            and _NAME_END.match(text, position) is not None


_PRINTS = re.compile(
    r"[ \t]{0,16}(?:(?:[$#%>]|PS[ \t][^>\r\n]{0,200}>|[\w.-]{1,32}@[\w.-]{1,64}:[^$#\r\n]{0,200}"
    r"[$#]|(?:Ran|Running|Command:|In[ \t]\[[0-9]{1,5}\]:)[ \t]{0,4}[`!]?)[ \t]{0,4})?"
    r"(?:sudo[ \t]{1,4}(?:-\S{1,20}[ \t]{1,4}){0,3})?"
    r"(?:(?:docker|podman|kubectl)[ \t]{1,4}exec(?:[ \t]{1,4}-\S{1,20}){0,4}[ \t]{1,4}"
    r"[^\s-]\S{0,127}(?:[ \t]{1,4}--)?[ \t]{1,4})?(?:"
    # a file or a variable, the needle in its name
    r"(?P<read>(?:cat|type|more|head|tail|Get-Content|gc|echo|printenv|Write-Output"
    r"|terraform[ \t]{1,4}output)[ \t]{1,4}"
    r"(?:-\S{1,20}[ \t]{1,4}){0,4}[\"']?[^\s;|&]{0,256})"
    # a secret store's read
    r"|(?:vault[ \t]{1,4}(?:kv[ \t]{1,4}get|read)|op[ \t]{1,4}read|pass(?:[ \t]{1,4}show)?"
    r"|bw[ \t]{1,4}get|security[ \t]{1,4}find-generic-"
    r"|gcloud[ \t]{1,4}secrets[ \t]{1,4}versions"
    r"[ \t]{1,4}access|az[ \t]{1,4}keyvault[ \t]{1,4}secret[ \t]{1,4}show|aws[ \t]{1,4}"
    r"secretsmanager[ \t]{1,4}get-|kubectl(?:[ \t]{1,4}-\S{1,40}(?:[ \t]{1,4}[^\s-]\S{0,60})?)"
    r"{0,3}[ \t]{1,4}get[ \t]{1,4})[^\r\n]{0,256}"
    # a secret it made
    r"|aws[ \t]{1,4}ecr[ \t]{1,4}get-login-|argocd[ \t]{1,4}admin[ \t]{1,4}initial-"
    r"|docker[ \t]{1,4}swarm[ \t]{1,4}join-|(?:bin/|bundle[ \t]{1,4}exec[ \t]{1,4})?rails[ \t]{1,4}"
    r"|(?:php[ \t]{1,4})?artisan[ \t]{1,4}|cloudflared[ \t]{1,4}tunnel[ \t]{1,4}"
    r"|heroku[ \t]{1,4}auth:|gh[ \t]{1,4}auth[ \t]{1,4}|gcloud[ \t]{1,4}auth[ \t]{1,4}"
    r"(?:application-default[ \t]{1,4})?print-(?:access|identity)-"
    r"|az[ \t]{1,4}account[ \t]{1,4}get-access-|wg[ \t]{1,4}(?:gen|show[ \t][^\r\n]{0,64})"
    r"|kubeadm[ \t]{1,4})")
"""A command's line up to the needle: a prompt (``$``, ``PS C:\\>``, ``user@host:~$``, a
transcript's ``Ran `…` ``, ``Command: …``, Jupyter's ``In [3]: !…``), a container it runs
in (``docker exec jenkins``), then a command that prints what it reads
(group ``read``: the needle in the name it reads, also ``terraform output``'s), a secret
store's read, or a command
printing a secret it made (the needle in its name)."""
_BEFORE_OUTPUT = (r"(?:[ \t]{0,8}(?:\u203a[^\r\n]{0,256}|(?:`{3}[\w-]{0,16}"
                  r"|[A-Za-z][\w ]{0,24}:(?:[ \t]{1,4}[0-9]{1,3})?)[ \t]{0,4})?\r?\n){0,4}")
"""What may come between a command and its output, each on its line: nothing, a code fence,
a label (``Output:``, ``Exit code: 0``), a warning after U+203A (``heroku auth:token``'s
``Warning: token will expire``)."""
_NAME_END = re.compile(r"(?i)(?:passw(?:or)?d|passphrase|(?:private[_-]?)?key|token|secret)"
                       r"(?:[_-]?[0-9]{1,3})?(?:\.[a-z]{1,6})?[}\]'\"]{0,4}(?:[ \t;|&)]|\r?\n)")
"""Where the name a file or a variable printed ends, after the needle (not
``tokenizer_config.json``, ``$TOKEN_URL``)."""


@dataclass(frozen=True)
class _Row(Rule):
    """A table's row naming a secret, then its value (``vault kv get``, ``pulumi config
    --show-secrets``, ``doppler secrets``): tried only where the needle is in the row's
    first cell."""

    def fits(self, text: str, position: int) -> bool:
        start = _line_start(text, position, 80)
        return start is not None and _FIRST_CELL.fullmatch(text, start, position) is not None


_FIRST_CELL = re.compile(r"[ \t]{0,16}(?:[│|┃][ \t]{0,16})?[\w.:-]{0,60}")
_CELL_END = r"(?=[ \t]{0,8}(?:[│|┃][ \t]{0,8})?\r?(?:\n|$))"
_IN_CELL = "[^\\s│|┃]"


PROSE_ANCHORED: tuple[Rule, ...] = (
    # "with password hunter2xyz", "the passphrase is S3cret-pw", "my password, it is
    # S3cret-pw", "set the password to R@Si+pX9", "the password for the admin account is
    # `Hunter2!`": a word of letters and digits after it (not "the password field",
    # "password reset", "password, build42 failed", "password is base64-encoded").
    _Said("password", _told(r"\b(?:passw(?:or)?d|passphrase|pwd?)\b", 6, 128,
                            signs=":|->|\u2192|to(?=[ \t])"),
          ("passw", "passphrase", "pw"), keep_prefix=True, anchored=True,
          starts=("passw", "passphrase", "pw ", "pw:", "pwd ", "pwd:")),
    # MySQL's first start: "A temporary password is generated for root@localhost: …" (any
    # sign but a space).
    _Said("password", r"(?i)(password[ \t]{1,4}is[ \t]{1,4}generated[ \t]{1,4}for[ \t]{1,4}"
          r"[^\s]{1,64}:[ \t]{1,4})(?!\[REDACTED:)[^\s]{1,256}", ("passw",), keep_prefix=True,
          anchored=True, starts=("password is generated",)),
    # Elasticsearch's elasticsearch-reset-password: "Password for the [elastic] user
    # successfully reset." then "New value: …"; its first start's banner: "Password for the
    # elastic user (reset with `…`):" then the password on the next line.
    _Said("password", r"(?i)(password[ \t]{1,4}for[ \t]{1,4}the[ \t]{1,4}\[?[\w.-]{1,64}\]?"
          r"[ \t]{1,4}user(?:[ \t]{1,4}successfully[ \t]{1,4}reset\.?\s{1,16}new[ \t]{1,4}value"
          r"[ \t]{0,4}:[ \t]{0,4}|[ \t]{0,4}\([^()\r\n]{0,160}reset[^()\r\n]{0,160}\)[ \t]{0,4}:"
          r"[ \t]{0,4}\r?\n"
          r"[ \t]{0,8}))(?!\[REDACTED:)[^\s]{1,256}", ("passw",), keep_prefix=True,
          anchored=True, starts=("password for the",)),
    # aws configure's prompt: "AWS Secret Access Key [None]: …".
    _Said("secret", r"(?i)(secret[ \t]{1,4}access[ \t]{1,4}key[ \t]{0,4}(?:\[[^\]\r\n]{0,64}\])?"
          r"[ \t]{0,4}:[ \t]{1,4})(?!\[REDACTED:)[A-Za-z0-9/+=]{16,128}(?![A-Za-z0-9/+=])",
          ("secret",), keep_prefix=True, anchored=True, starts=("secret access key",)),
    # A key in words: "use API key 9f8e…", "the access token is …", "secret key: …", and a
    # token after a verb ("the token for the bot is …"): a word of sixteen characters or
    # more.
    _KeyTold("api_key", _told(_KEY_NAME, 16, 4096, _KEY_CHARS, ":|=|->|\u2192"),
             ("api", "secret", "access", "auth", "private", "token", "key"), keep_prefix=True,
             anchored=True, starts=_KEYS_TOLD),
    # A user's credentials in words: "Credentials: admin:S3cret!", "credentials =
    # 'admin:S3cret'": a password holding a letter and a digit or a sign (not a URL, a
    # reference or a name: "arn:aws:…", "file:~/.aws/credentials", "aws:default",
    # "$USER:$PASS"; nor Markdown's closing "**").
    _Said("password", r"(?i)(\bcredentials?[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"'`]?\*{0,2}"
          r"(?!(?:arn|file|env|vault|secret|secrets|ssm|s3|gs|https?|type|see|db|aws|gcp"
          r"|azure|k8s|docker|profile|role)[ \t]{0,4}:)[^\s:\"'`/@$*]{1,64}[ \t]{0,4}:[ \t]{0,4})"
          r"(?!//|\[REDACTED:|\$)(?=[^\s\"'`]{0,255}[A-Za-z])(?=[^\s\"'`]{0,255}[0-9!@#%^&+=?~])"
          r"(?:(?!\*\*)[^\s\"'`]){4,256}", ("cred",), keep_prefix=True, anchored=True,
          starts=tuple(f"credential{s}{q}{sign}" for s in ("", "s") for q in ("", '"', "'")
                       for sign in (":", "=", " :", " ="))),
    # A user's credentials under a name ending as theirs: BASIC_AUTH=admin:…,
    # NEO4J_AUTH=neo4j/…, MAIL_CREDENTIALS: ops@example.com:…, basicAuth: admin:… (not
    # OAUTH, AUTHOR, a URL, a path, a time or a scheme's name; the user starts with a letter,
    # the password holds a letter and a digit or a sign).
    _NameEnding("password", r"(?i)((?:(?<=[a-z0-9][_-])|(?-i:(?<=[a-z])(?=[A-Z])))"
                r"(?:credentials?|creds|(?P<auth>auth))(?![a-z0-9])[\"']?[ \t]{0,4}[:=][ \t]{0,4}"
                r"[\"'`]?(?!" + _A_SCHEME + r"[:/])[a-z][^\s:/\\\"'`$*=]{1,63}(?(auth)[:/]|:))"
                r"(?!//|\[REDACTED:|\$)(?=[^\s\"'`/\\]{0,127}[a-z])"
                r"(?=[^\s\"'`/\\]{0,127}[0-9!@#%^&+=?~])[^\s\"'`/\\]{4,128}", ("cred", "auth"),
                keep_prefix=True, anchored=True),
    # A wallet's recovery phrase: twelve to twenty-four words after its name, also over
    # lines (MNEMONIC="…", "seed phrase: …", "Your recovery phrase is …", solana-keygen's
    # "Save this seed phrase … to recover your new keypair:", Foundry's "Phrase:").
    _Said("secret", r"(?i)((?:mnemonic|(?:seed|recovery)[ _-]?phrase|phrase(?=:))"
          r"(?:[\w-]{0,20}[\"']?[ \t]{0,4}[:=]|[ \t]{1,4}is:?|[^\r\n:=]{0,128}:)[ \t]{0,4}"
          r"(?:\r?\n[ \t]{0,8}){0,2}[\"'`]?)(?:[a-z]{3,8}(?:[ \t]{1,4}|[ \t]{0,4}\r?\n[ \t]{0,8}))"
          r"{11,23}[a-z]{3,8}(?![\w-])",
          ("mnemonic", "seed", "recovery", "phrase"), keep_prefix=True, anchored=True,
          starts=("mnemonic", "phrase:", *(f"{what}{between}phrase" for what in ("seed", "recovery")
                                          for between in (" ", "_", "-", "")))),
    # A table's row: the secret's name in its first cell, its value in the last, a word of
    # eight characters or more holding a letter and a digit (not a version: "2.1.0b1").
    _Row("secret", r"(?i)((?:passw(?:or)?d|passphrase|pass|pwd?|secret|token|api[_-]?key"
         r"|access[_-]?key|private[_-]?key)(?-i:(?![a-z]))[\w.-]{0,40}"
         r"(?:[ \t]{2,40}|[ \t]{0,8}[│|┃][ \t]{0,8}))(?!\[REDACTED:|\$|[vV]?[0-9]{1,4}\.[0-9])"
         rf"(?={_IN_CELL}{{0,511}}[0-9])(?={_IN_CELL}{{0,511}}[A-Za-z]){_IN_CELL}{{8,512}}"
         + _CELL_END, ("pass", "pw", "secret", "token", "api", "access", "private"),
         keep_prefix=True, anchored=True),
    # A secret a command printed on the next line (after what _BEFORE_OUTPUT lets come
    # between): a lone word of letters and digits, no path, variable or document (where the
    # needle may be: _Printed.fits).
    _Printed("secret", r"(?i)((?:passw(?:or)?d|passphrase|token|secret|(?:private[_-]?)?key)"
             r"[^\r\n]{0,256}\r?\n" + _BEFORE_OUTPUT + ")"
             r"(?![^\r\n]{257}|[$/~{\[<]|https?:)(?=[^\s]{0,255}[0-9])(?=[^\s]{0,255}[A-Za-z])"
             r"[^\s]{8,256}(?=[ \t]{0,4}(?:\r?\n|$))",
             ("passw", "passphrase", "token", "secret", "private", "key"), keep_prefix=True,
             anchored=True),
    # A secret a command made or read, printed on the next lines: openssl rand, pwgen,
    # /dev/urandom, Python's secrets.token_*, Node's randomBytes, PHP's random_bytes, Ruby's
    # SecureRandom, mix phx.gen.secret, bw generate (lone words of a key's characters,
    # letters and digits, base64's "=" at its end only: not "KEY=…", a file or code); pass
    # show's and secret-tool lookup's first line.
    _Said("secret", r"(?i)((?:openssl[ \t]{1,4}rand|pwgen|/dev/u?random|(?<=secrets\.)"
          r"(?:token_(?:hex|urlsafe|bytes)|choice)|randombytes\(|random_bytes\(|securerandom"
          r"|phx\.gen\.secret|bw[ \t]{1,4}generate|(?P<read>(?<![\w-])pass[ \t]{1,4}show"
          r"|secret-tool[ \t]{1,4}lookup))[^\r\n]{0,256}\r?\n" + _BEFORE_OUTPUT
          + r")(?=[^\s]{0,255}[0-9])(?=[^\s]{0,255}[A-Za-z])(?(read)[^\s]{6,256}"
          r"|(?![^\s]{0,256}(?:=[^\s=]|:|\.[a-z]{1,5}(?![^\s]))|[./~])"
          r"[A-Za-z0-9+/=_.~!@#%^&*-]{8,256}"
          r"(?:\r?\n[A-Za-z0-9+/_-]{8,256}={0,2}){0,15}(?![^\s]))(?=[ \t]{0,4}(?:\r?\n|$))",
          ("openssl", "pwgen", "/dev/", "token", "choice", "random", "securerandom", "phx.gen",
           "bw ", "pass", "secret"), keep_prefix=True,
          anchored=True,
          starts=("openssl rand", "pwgen", "/dev/random", "/dev/urandom", "token_hex",
                  "token_urlsafe", "token_bytes", "choice(", "randombytes(", "random_bytes(",
                  "securerandom", "phx.gen.secret", "bw generate", "pass show",
                  "secret-tool lookup")),
    # Vault's unseal and recovery keys and its root token, as vault operator init prints
    # them.
    _Said("secret", r"(?i)((?:unseal|recovery)[ \t]{1,4}key[ \t]{1,4}[0-9]{1,2}[ \t]{0,4}:"
          r"[ \t]{1,4})(?!\[REDACTED:)[A-Za-z0-9+/=]{16,256}(?![A-Za-z0-9+/=])",
          ("unseal", "recovery"), keep_prefix=True, anchored=True,
          starts=("unseal key", "recovery key")),
    _Said("token", r"(?i)(root[ \t]{1,4}token[ \t]{0,4}:[ \t]{1,4})(?!\[REDACTED:)"
          r"[A-Za-z0-9._-]{16,256}(?![A-Za-z0-9+/=._-])", ("root",), keep_prefix=True,
          anchored=True, starts=("root token",)),
)
"""The case-insensitive rules of secrets told in words: each is tried where one of its
needles starts."""
