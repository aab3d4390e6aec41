"""Secrets a document's or a call's own structure says are secrets, whatever they look
like: a Kubernetes container's or an ECS task's environment (``name: DB_PASSWORD`` then
its ``value``), an SSM parameter, ASP.NET's ``"Jwt": {"Key": …}``, an XML element named as
a secret (Maven's ``settings.xml``), NuGet's ``<add key=… value=…>``, a sensitive Terraform
output, and Azure's keys as its CLI lists them; what a browser agent types into a password
field, a database's password given as a call's argument or in a URL with no scheme, and a
secret given to a setter or a builder.

Each rule keeps what names the secret (group 1, or all but group ``secret``) and replaces
the value after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from otel_diary.pipeline.keys import MARK, maybe_quoted, quoted
from otel_diary.pipeline.rule import Rule

_NAMED = (r"[\w./-]{0,80}(?i:password|passwd|passphrase|secret|token|api[_-]?key"
          r"|access[_-]?key|private[_-]?key|credentials?|(?<=[_.-])(?:pass|pwd))"
          r"(?:[_.-](?i:key))?")
"""A variable's or a parameter's name that ends as a secret's (``DB_PASSWORD``,
``/app/db/password``, ``JWT_SECRET_KEY``; not ``PASSWORD_MIN_LENGTH``)."""

_FIELDS = (r"[ \t]{0,4},(?:\s{0,16}\"[A-Za-z]{1,20}\"[ \t]{0,4}:[ \t]{0,4}"
           r"(?:\"[^\"\r\n]{0,64}\"|[0-9a-z]{1,10})[ \t]{0,4},){0,3}\s{0,16}"
           r"\"(?:value|Value)\"[ \t]{0,4}:[ \t]{0,4}\"")
"""Up to three fields of a JSON object, then its ``"value"``."""
_JSON_VALUE = r"(?!\[REDACTED:|\$)(?:[^\"\\\r\n]|\\[^\r\n]){1,4096}(?=\")"
"""A JSON string's text, up to its closing quote."""

_PAIRS = (r"(?:\s{0,16}[\"'][\w-]{1,40}[\"'][ \t]{0,4}:[ \t]{0,4}(?:\"(?:[^\"\\\r\n]|\\.){0,200}\""
          r"|'(?:[^'\\\r\n]|\\.){0,200}'|[0-9a-z.-]{1,20}|\[[^\[\]]{0,400}\])\s{0,16},){0,8}")
"""Up to eight of a JSON object's (or a Python dict's) members, each on its line or not,
before another."""
_Q = r"\\{0,7}[\"']"
"""A quote, also escaped (JSON inside a string, at any depth)."""
_NOT_THE_FIELD = (r"(?![^\"'\\\r\n]{0,80}(?i:forgot|reset|hint|show|hide|toggle|strength|link"
                  r"|button))")
"""What names a control near a password field, not the field (``Forgot password link``)."""

_PASSWORD = r"(?i:passw(?:or)?d|passphrase|pwd|(?<![\w\s-])pass(?![\w-]))"
_NOT_NEAR = (r"(?![-_ ]?(?i:hint|help|toggle|strength|reset|forgot|link|label|error|visibility"
             r"|show|hide|rules|meter))")
"""After a password's name, what makes it a field near one (``#password-hint``)."""
_ARGUMENT = r"(?:\"[^\"\r\n]{0,512}\"|'[^'\r\n]{0,512}'|\$?[\w.>-]{1,128}(?:\(\))?)"
"""A call's argument: quoted, or a variable (``$dsn``, ``url``, ``$this->user``)."""

_OBJECT = r"\{[^{}\r\n]{0,200}\}"
"""An object literal given as an argument (``{ id: user.id }``)."""


_BY_PLACE: tuple[tuple[str, str, int], ...] = (
    # kind, the call (a regular expression starting with a letter), the arguments before
    # the secret
    ("secret", r"(?:jwt|JWT)(?:\.|::)(?:sign|encode|decode|verify)\(", 1),
    ("secret", r"hmac\.new\(", 0), ("secret", r"hmac\.New\(", 1), ("secret", r"Fernet\(", 0),
    ("secret", r"SymmetricSecurityKey\(", 0), ("secret", r"hmacShaKeyFor\(", 0),
    ("secret", r"createHmac\(", 1),
    ("password", r"ConvertTo-SecureString(?:[ \t]{1,4}-(?:AsPlainText|Force)){0,2}[ \t]{1,4}"
     r"(?:-String[ \t]{1,4})?", 0),
    ("password", r"basic_auth\(", 1), ("password", r"(?:simple_bind|bind_s)\(", 1),
    ("password", r"UsernamePassword(?:AuthenticationToken|Credentials)\(", 1),
    ("password", r"PasswordAuthentication\(", 1),
    ("password", r"PlainAuth\(", 2), ("password", r"Sequelize\(", 2),
    ("secret", r"ClientSecretCredential\(", 2),
    ("api_key", r"cohere\.(?:Async)?Client(?:V2)?\(", 0),
    ("api_key", r"wandb\.login\((?:\s{0,16}key\s{0,4}=)?", 0),
    ("token", r"(?:Client|twilio)\(\s{0,16}(?:(?P<sid>[\"'])AC[0-9a-f]{32}(?P=sid)"
     r"|[\w.]{0,40}(?i:sid))\s{0,16},", 0),
    ("secret", r"SecretKeySpec\(", 0), ("secret", r"(?:Encoding|Decoding)Key::from_secret\(", 0),
    ("secret", r"new_from_slice\(", 0), ("secret", r"SignedString\(", 0),
    ("secret", r"OpenSSL::HMAC\.(?:hex|base64)?digest\(", 1),
    ("password", r"(?:pymysql|MySQLdb)\.connect\(", 2), ("password", r"FTP(?:_TLS)?\(", 2),
    ("password", r"PlainCredentials\(", 1), ("password", r"ldap3\.Connection\(", 2),
    ("password", r"keyring\.set_password\(", 2), ("password", r"changeUserPassword\(", 1),
    ("password", r"(?:ftp_login|ssh2_auth_password|ldap_bind)\(", 2),
    ("password", r"Net::SMTP\.start\(", 4),
    ("secret", r"StorageSharedKeyCredential\(", 1),
    ("secret", r"NewStatic(?:V4|Credentials(?:Provider)?)\(", 1),
    ("password", r"(?:Strict)?Redis\(", 3), ("password", r"\.auth\(", 1),
    ("password", r"\.pass_\(", 0),
    ("password", r"\.Bind\((?=\s{0,16}[\"'](?i:cn|uid|dc|ou)=)", 1),
    ("password", r"(?:cx_Oracle|oracledb)\.connect\(", 1),
    ("secret", r"URLSafe(?:Timed)?Serializer\(", 0), ("secret", r"pyotp\.TOTP\(", 0),
    ("secret", r"Wallet\.from(?:Phrase|Mnemonic)\(", 0),
)
"""Each call that takes a secret by its place: :class:`_ByPlace`'s alternatives."""
_BY_PLACE_NEEDLES = ("jwt.", "JWT", "hmac", "Hmac", "Fernet(", "SymmetricSecurityKey(",
                     "ConvertTo-SecureString", "basic_auth(", "bind", "UsernamePassword",
                     "PasswordAuthentication(", "PlainAuth(", "Sequelize(",
                     "ClientSecretCredential(", "cohere.", "wandb.login(", "Client(",
                     "twilio(", "SecretKeySpec(", "::from_secret(", "new_from_slice(",
                     "SignedString(", "HMAC", "connect(", "FTP", "PlainCredentials(",
                     "Connection(", "set_password(", "changeUserPassword(", "ftp_login(",
                     "ssh2_auth_password(", "SMTP", "SharedKeyCredential(", "NewStatic",
                     "Redis(", ".auth(", ".pass_(", ".Bind(", "Serializer(", "pyotp.",
                     "Wallet.")
"""What every one of those calls holds."""


def _by_place() -> str:
    """The literal a call of :data:`_BY_PLACE` takes after the arguments before it (each
    alternative ends with an empty group, ``c<index>``, naming it), also by its keyword
    in that place (``jwt.encode(payload, key="…")``): quoted, also as bytes
    (``b'…'``) or made bytes or an option (``Some("…")``, ``[]byte("…")``,
    ``Encoding.UTF8.GetBytes("…")``, ``Buffer.from('…')``); not one redacted already, nor
    a variable's name."""
    calls = "|".join(head + r"\s{0,16}" + rf"(?:(?:{_ARGUMENT}|{_OBJECT})\s{{0,16}},\s{{0,16}})"
                     f"{{{before}}}(?P<c{index}>)"
                     for index, (_, head, before) in enumerate(_BY_PLACE))
    return (f"((?:{calls})" r"(?:(?:key|secret|secret_key|signing_key|password)\s{0,4}=\s{0,4})?"
            r"(?:b|(?:Some|\[\]byte|bytes|Buffer\.from|(?:[\w.]{0,40}\.)?GetBytes)"
            r"\(\s{0,16})?(?P<q>[\"'`]))(?!\[REDACTED:|\$)" + quoted("q"))


@dataclass(frozen=True)
class _ByPlace(Rule):
    """Every call of :data:`_BY_PLACE` in one pattern, scanned once (each alternative
    starts with a letter, which the engine skips to); the kind is the matched call's."""

    def replace(self, match: re.Match[str]) -> str:
        index = next(index for index in range(len(_BY_PLACE)) if match.start(f"c{index}") >= 0)
        return match.group(1) + MARK.format(kind=_BY_PLACE[index][0])


_UNSEAL_KEY = re.compile(r"(?P<q>\")[A-Za-z0-9+/]{16,512}={0,2}\"")
_ACCOUNT_KEY = re.compile(r"(?P<q>[\"'`])0x[0-9a-fA-F]{64}(?P=q)")


@dataclass(frozen=True)
class _EachKey(Rule):
    """A list of keys under its name (group ``keys``): every string in it that is a key goes.
    Vault's unseal keys are base64 or hex; a Hardhat account's private key is ``0x`` and 64
    hex digits (an address, 40, is public)."""

    def replace(self, match: re.Match[str]) -> str:
        mark = MARK.format(kind=self.kind)
        key = _UNSEAL_KEY if match.group("vault") else _ACCOUNT_KEY
        return match.group(1) + key.sub(r"\g<q>" + mark + r"\g<q>", match.group("keys")) + "]"


FORMAT_RULES: tuple[Rule, ...] = (
    # A container's environment: Kubernetes' "- name: DB_PASSWORD" then "value: …" (not a
    # valueFrom, nor a variable), ECS's {"name": "DB_PASSWORD", "value": "…"}, an SSM
    # parameter ({"Name": "/app/db/password", "Type": "SecureString", "Value": "…"}), and a
    # password or a secret named by its field's id, label or type (1Password's {"id":
    # "password", …, "value": …}, Keycloak's {"type" : "secret", "value" : …}), when the
    # value looks generated (not a lexer's {"type": "token", …}, a Kubernetes secret's
    # {"type": "secret", "value": "Opaque"}, a form's {"label": "Password", …}); az acr's
    # {"name": "password2", …}.
    Rule("secret", r"(name:[ \t]{1,4}(?P<nq>[\"']?)" + _NAMED + r"(?P=nq)[ \t]{0,4}\r?\n"
         r"[ \t]{1,16}value:[ \t]{1,4}(?P<q>[\"'])?)(?![$>|]|\[REDACTED:)" + maybe_quoted(),
         ("name:",), keep_prefix=True),
    Rule("secret", r"(\"(?:name|Name)\"[ \t]{0,4}:[ \t]{0,4}\"" + _NAMED + r"[0-9]{0,2}\""
         + _FIELDS + r")" + _JSON_VALUE, ('"name"', '"Name"'), keep_prefix=True),
    # A session's cookie as code sets it (Playwright's add_cookies([{"name": "sessionid",
    # "value": …}]), Selenium's add_cookie), when the value looks generated.
    Rule("cookie", r"(\"(?:name|Name)\"[ \t]{0,4}:[ \t]{0,4}\"(?i:(?:[\w.-]{0,40}[_.-])?"
         r"(?:session(?:_?id)?|sess_?id|sid)|phpsessid|jsessionid)\"" + _FIELDS
         + r")(?=[^\"\s\\]{16,4096}\")(?=[^\"]{0,4095}[0-9])(?=[^\"]{0,4095}[A-Za-z])"
         + _JSON_VALUE, ('"name"', '"Name"'), keep_prefix=True),
    Rule("secret", r"(\"(?:id|label|type)\"[ \t]{0,4}:[ \t]{0,4}\"(?i:password|passwd|secret)"
         r"[0-9]{0,2}\"" + _FIELDS + r")(?=[^\"\s\\]{8,4096}\")(?=[^\"]{0,4095}[0-9])"
         r"(?=[^\"]{0,4095}[A-Za-z])" + _JSON_VALUE, ('"id"', '"label"', '"type"'),
         keep_prefix=True),
    # ASP.NET's appsettings.json: "Jwt": {"Issuer": …, "Key": "…"}, the signing key.
    Rule("secret", r"([\"'](?i:jwt)[A-Za-z]{0,20}[\"'][ \t]{0,4}:[ \t]{0,4}\{" + _PAIRS
         + r"\s{0,16}[\"'](?i:key)[\"'][ \t]{0,4}:[ \t]{0,4}(?P<q>[\"']))(?!\[REDACTED:|\$)"
         + quoted("q"), ("Jwt", "JWT", "jwt"), keep_prefix=True),
    # What a browser agent types into a password field: Playwright MCP's browser_type
    # ({"element": "Password textbox", "ref": "e12", "text": "…"}).
    Rule("password", "(" + _Q + r"element" + _Q + r"[ \t]{0,4}:[ \t]{0,4}" + _Q + _NOT_THE_FIELD
         + r"[^\"'\\\r\n]{0,80}" + _PASSWORD + r"[^\"'\\\r\n]{0,80}" + _Q
         + r"[ \t]{0,4},(?:\s{0,16}"
         + _Q + r"(?:ref|submit|slowly)" + _Q + r"[ \t]{0,4}:[ \t]{0,4}(?:" + _Q
         + r"[^\"'\\\r\n]{0,64}" + _Q + r"|true|false|True|False)[ \t]{0,4},){0,3}\s{0,16}" + _Q
         + r"text" + _Q + r"[ \t]{0,4}:[ \t]{0,4}(?P<q>" + _Q + r"))(?!\[REDACTED:)" + quoted("q"),
         ("element",), keep_prefix=True),
    # Puppeteer MCP's puppeteer_fill ({"selector": "#password", "value": "…"}).
    Rule("password", "(" + _Q + r"selector" + _Q + r"[ \t]{0,4}:[ \t]{0,4}" + _Q
         + r"[^\"'\\\r\n]{0,80}?" + _PASSWORD + _NOT_NEAR + r"[^\"'\\\r\n]{0,80}" + _Q
         + r"[ \t]{0,4},\s{0,16}" + _Q + r"value" + _Q + r"[ \t]{0,4}:[ \t]{0,4}(?P<q>" + _Q
         + r"))(?!\[REDACTED:)" + quoted("q"), ("selector",), keep_prefix=True),
    # Code typing into one: page.fill("#password", "…"), page.type(…) (Playwright, Puppeteer),
    # t.typeText(…) (TestCafe).
    Rule("password", r"(\.(?:fill|type|typeText)\([ \t]{0,4}(?:Selector\([ \t]{0,4})?(?P<s>[\"'`])"
         r"(?:(?!(?P=s))[^\r\n]){0,80}?" + _PASSWORD + _NOT_NEAR
         + r"(?:(?!(?P=s))[^\r\n]){0,80}(?P=s)(?:[ \t]{0,4}\))?[ \t]{0,4},[ \t]{0,4}(?P<q>[\"'`]))"
         r"(?!\[REDACTED:|\$\{)" + quoted("q"), (".fill(", ".type(", ".typeText("),
         keep_prefix=True),
    # A database's user and password given in a call's arguments: JDBC's
    # getConnection(url, "root", "…"), PHP's new PDO(dsn, 'root', '…') and
    # mysqli_connect("host", "root", "…").
    Rule("password", r"((?:(?P<getconnection>getConnection)\(\s{0,16}(?:" + _ARGUMENT
         + r"\s{0,16},\s{0,16})?"
         r"|(?:PDO|mysqli_connect|mysqli|mysql_p?connect)\(\s{0,16}" + _ARGUMENT
         + r"\s{0,16},\s{0,16})" + _ARGUMENT + r"\s{0,16},\s{0,16}(?P<q>[\"']))(?!\[REDACTED:|\$)"
         + quoted("q") + r"(?(getconnection)(?=(?P=q)\s{0,16}\)))",
         ("getConnection(", "PDO(", "mysql"), keep_prefix=True),
    # Go's MySQL DSN (user:password@tcp(host)/db) and Oracle's thin JDBC URL
    # (jdbc:oracle:thin:user/password@host), which name no scheme with "://".
    Rule("password", r"(?<=[\s\"'`=])[\w.-]{1,64}:(?!\$|%s|\[REDACTED:)"
         r"(?P<secret>[^\s\"'`=]{1,256}?)@(?:tcp6?|unix)\(", ("@tcp", "@unix(")),
    Rule("password", r"(jdbc:oracle:thin:[^/\s\"'@:]{1,128}/)(?!\[REDACTED:)[^\s\"'@]{1,256}"
         r"(?=@)", ("jdbc:oracle:thin:",), keep_prefix=True),
    # A secret a library's call takes by its place: signing keys (jwt.sign(payload, '…'),
    # hmac.new(b'…'), Fernet(b'…'), SymmetricSecurityKey(Encoding.UTF8.GetBytes("…"))),
    # a user's password (reqwest's basic_auth(user, Some("…")), Spring's
    # UsernamePasswordAuthenticationToken, LDAP's simple_bind_s, Go's smtp.PlainAuth, new
    # Sequelize(db, user, '…'), pymysql.connect(host, user, '…'), redis.Redis(host, port,
    # db, '…'), MongoDB's db.auth(user, '…')) and a service's key or secret (Azure's
    # ClientSecretCredential, cohere.Client, wandb.login, Twilio's Client(sid, token)).
    _ByPlace("secret", _by_place(), _BY_PLACE_NEEDLES),
    # An output Terraform keeps sensitive, as `terraform output -json` shows it.
    Rule("secret", r"(\"sensitive\":[ \t]{0,4}true,[^{}]{0,96}?\"value\":[ \t]{0,4}\")"
         + _JSON_VALUE, ('"sensitive"',), keep_prefix=True),
    # Azure's keys as its CLI lists them (JSON): a storage account's ("keyName": …,
    # "value": …), Cosmos DB's, Service Bus's and Event Hubs' ("primaryMasterKey": …).
    Rule("azure_storage_key", r"(\"keyName\":[ \t]{0,4}\"(?:key|kerb)[12]\",[^{}]{0,96}?"
         r"\"value\":[ \t]{0,4}\")[A-Za-z0-9+/]{86}==(?=\")", ('"keyName"',), keep_prefix=True),
    Rule("azure_key", r"(\"(?:primary|secondary)(?:Readonly)?(?:Master)?Key\":[ \t]{0,4}\")"
         r"[A-Za-z0-9+/]{40,86}={1,2}(?=\")", ('"primary', '"secondary'), keep_prefix=True),
    # A JSON Web Key's private parts (its "d", and an RSA key's primes and exponents), and a
    # PuTTY key file's private lines.
    Rule("private_key", r"(\"(?:d|p|q|dp|dq|qi)\"[ \t]{0,4}:[ \t]{0,4}\")[A-Za-z0-9_-]{16,4096}"
         r"(?=\")", ('"kty"',), keep_prefix=True),
    Rule("private_key", r"(Private-Lines:[ \t]{0,4}[0-9]{1,3}\r?\n)[A-Za-z0-9+/=]{1,128}"
         r"(?=\r?\n|$)(?:\r?\n[A-Za-z0-9+/=]{1,128}(?=\r?\n|$)){0,63}", ("Private-Lines:",),
         keep_prefix=True),
    # Lists of keys: vault operator init -format=json's unseal and recovery keys, and the
    # private keys of a Hardhat network's accounts: ["0x…"].
    _EachKey("secret", r"((?:(?P<vault>\"(?:unseal|recovery)_keys_(?:b64|hex)\")"
             r"|(?<![\w-])accounts[\"']?)"
             r"[ \t]{0,4}:[ \t]{0,4}\[)(?P<keys>[^\[\]]{1,8192})\]",
             ('"unseal_keys_', '"recovery_keys_', "accounts")),
)
"""The case-sensitive rules: each is tried on a text holding one of its needles."""


@dataclass(frozen=True)
class _Typed(Rule):
    """What code types into a password field it found (``locator("#password").fill(…)``):
    tried only where the call that types follows the field's name."""

    def fits(self, text: str, position: int) -> bool:
        return text.find(").", position, position + 200) >= 0


@dataclass(frozen=True)
class _Given(Rule):
    """A secret given to a setter or a builder; the kind follows the method's name. Tried
    only where a ``(`` follows the needle closely (prose compiles no rule)."""

    def fits(self, text: str, position: int) -> bool:
        return text.find("(", position, position + 12) >= 0

    def replace(self, match: re.Match[str]) -> str:
        name = match.group("name").lower()
        kind = ("password" if "pass" in name else "api_key" if "key" in name
                else "secret" if "secret" in name else "token")
        return match.group(1) + MARK.format(kind=kind)


_SETTERS = ("pass", "secret", "api", "key", "token", "auth")
"""Where a setter's or a builder's name ends (``setPassword(``, ``.clientSecret(``,
``withApiKey(``): needles the other rules search for already, but ``auth``."""

FORMAT_ANCHORED: tuple[Rule, ...] = (
    # In XML: <password>…</password> (Maven's settings.xml), <apiKey>, <clientSecret>;
    # <add key="ClearTextPassword" value="…"/> (NuGet.config, .NET's appSettings) and
    # <property name="password" value="…"/> (Spring, Ant).
    Rule("secret", r"(?i)((?P<name>passw(?:or)?d|passphrase|secret|token|(?:(?<=api)"
         r"|(?<=api[_-])|(?<=access)|(?<=private))key)>)(?!\$\{|\[REDACTED:)[^<>\r\n]{1,512}"
         r"(?=</[\w.:-]{0,60}(?P=name)>)",
         ("password>", "passwd>", "passphrase>", "secret>", "token>", "key>"),
         keep_prefix=True, anchored=True),
    Rule("secret", r"(?i)((?:key|name)=(?P<a>[\"'])[\w.:-]{0,60}(?:passw(?:or)?d|secret|token"
         r"|api[-_]?key|access[-_]?key)(?P=a)[ \t]{1,4}value=(?P<b>[\"']))(?![$%]|\[REDACTED:)"
         r"(?:(?!(?P=b))[^\r\n]){1,512}(?=(?P=b))", ('key="', 'name="', "key='", "name='"),
         keep_prefix=True, anchored=True),
    # Android's signing config in Gradle: storePassword 'x', keyPassword "x".
    Rule("password", r"(?i)((?:(?<=store)|(?<=key))password[ \t]{1,4}(?P<q>[\"']))"
         r"(?!\[REDACTED:|\$)" + quoted("q"), ("passw",), keep_prefix=True, anchored=True),
    # Code typing into a password field it found: locator("#password").fill("…"),
    # getByLabel("Password").fill(…), getByLabel(/password/i).fill(…) (Playwright),
    # find_element(By.ID, "password").send_keys(…) (Selenium), querySelector("#password")
    # .value = "…" (the DOM); a field named pass (locator("#pass")).
    _Typed("password", r"(?i)((?:passw(?:or)?d|passphrase|pwd|(?<=[#=\"'])pass(?![\w-]))"
           + _NOT_NEAR +
           r"[^\r\n()]{0,40}?(?:[\"'`]|/[a-z]{0,3})(?:[ \t]{0,4},[ \t]{0,4}\{[^{}\r\n]{0,80}\})?"
           r"(?:[ \t]{0,4}\})?"
           r"[ \t]{0,4}\){1,2}(?:\.(?:first|last|nth)\([0-9]{0,3}\))?(?:\.(?:fill|type"
           r"|press_?sequentially|send_?keys|set_?value)\([ \t]{0,4}|\.value[ \t]{0,4}="
           r"[ \t]{0,4})(?P<q>[\"'`]))"
           r"(?!\[REDACTED:|\$\{)" + quoted("q"),
           ("passw", "passphrase", "pwd", "pass"), keep_prefix=True, anchored=True),
    # A setter or a builder given a secret, one word: dataSource.setPassword("…"),
    # .password("…") (sqlx, Spring), jedis.auth("…"), .bearer_auth("…"), withToken("…").
    _Given("secret", r"(?i)((?:(?<=[.\s]set)|(?<=[.\s]with)|(?<=[.\s]set_)|(?<=[.\s]with_)"
           r"|(?<=\.)|(?<=->)|(?<=\.client)|(?<=\.client_)|(?<=\.bearer_)|(?<=[.\s]setclient)"
           r"|(?<=[.\s]withclient)|(?<=[.\s]setapi)|(?<=[.\s]withapi))"
           r"(?P<name>passw(?:or)?d|passphrase|secret|api_?key|key|token|auth)"
           r"\([ \t]{0,4}(?P<q>[\"']))(?!\[REDACTED:|\$)(?=[^\s\"']{1,512}(?P=q)[ \t]{0,4}\))"
         + quoted("q"), _SETTERS, keep_prefix=True, anchored=True),
)
"""The case-insensitive rules: each is tried where one of its needles starts."""
