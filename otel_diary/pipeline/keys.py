"""Keys told by their shape: the keys of services agents call (code hosts, model APIs,
search, vector stores, observability, deployment), by the prefix each service gives them,
and PEM private-key blocks.

Redaction finds a service's key wherever a word starts with its prefix, so it is taken out
of an error message (``Invalid API Key gsk_…``), a header or a URL as well as out of an
assignment; and glued to a longer word (``kh-gsk_…``) when what follows the prefix looks
generated.

It also holds the shapes of an assignment's values: those that are no secret but name one
kept elsewhere (a variable, code reading one, a type, a placeholder), which are left as
they are, a call, which is redacted whole, and a value that may be quoted; and where a
token starts.
"""

from __future__ import annotations

import re
from functools import cache

MARK = "[REDACTED:{kind}]"
"""What a secret becomes; ``kind`` names its family."""

SERVICE_KEYS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # kind, the prefixes its keys start with, and what follows one (as the vendor issues it)
    ("github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), "[A-Za-z0-9]{36,255}"),
    ("github_token", ("github_pat_",), "[A-Za-z0-9_]{22,255}"),
    ("google_api_key", ("AIza",), "[A-Za-z0-9_-]{35}"),
    ("huggingface_token", ("hf_",), "[A-Za-z0-9]{30,255}"),
    ("npm_token", ("npm_",), "[A-Za-z0-9]{36,255}"),
    ("pypi_token", ("pypi-",), "(?:AgE[A-Za-z0-9_-]{20,4096}|[A-Za-z0-9_-]{50,4096})"),
    ("xai_api_key", ("xai-",), "[A-Za-z0-9]{32,255}"),
    ("groq_api_key", ("gsk_",), "[A-Za-z0-9]{40,255}"),
    ("langsmith_api_key", ("lsv2_pt_", "lsv2_sk_"), "[A-Za-z0-9_]{30,255}"),
    ("tavily_api_key", ("tvly-",), "[A-Za-z0-9_-]{24,255}"),
    ("replicate_token", ("r8_",), "[A-Za-z0-9]{30,255}"),
    ("perplexity_api_key", ("pplx-",), "[A-Za-z0-9]{40,255}"),
    ("pinecone_api_key", ("pcsk_",), "[A-Za-z0-9_]{40,255}"),
    ("e2b_api_key", ("e2b_",), "[0-9a-f]{40}"),
    ("sendgrid_api_key", ("SG.",), r"[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}"),
    ("stripe_webhook_secret", ("whsec_",), "[A-Za-z0-9+/=]{24,255}"),
    ("shopify_token", ("shpat_", "shpca_", "shppa_", "shpss_"), "[A-Fa-f0-9]{32}"),
    ("digitalocean_token", ("dop_v1_", "doo_v1_", "dor_v1_"), "[a-f0-9]{64}"),
    ("vault_token", ("hvs.", "hvb.", "hvr."), "[A-Za-z0-9_-]{24,512}"),
    ("sentry_token", ("sntrys_", "sntryu_"), "[A-Za-z0-9+/=_]{32,1024}"),
    ("postman_api_key", ("PMAK-",), "[0-9a-f]{24}-[0-9a-f]{34}"),
    ("supabase_token", ("sbp_",), "[0-9a-f]{40}"),
    ("supabase_token", ("sb_secret_",), "[A-Za-z0-9_-]{20,255}"),
    ("grafana_token", ("glsa_", "glc_"), "[A-Za-z0-9_+/=]{32,1024}"),
    ("honeycomb_key", ("hcaik_", "hcxik_", "hcxmk_"), "[A-Za-z0-9]{24,255}"),
    ("databricks_token", ("dapi",), "[0-9a-f]{32}(?:-[0-9]{1,2})?"),
    ("linear_api_key", ("lin_api_",), "[A-Za-z0-9]{40,255}"),
    ("notion_token", ("ntn_",), "[A-Za-z0-9]{40,255}"),
    ("notion_token", ("secret_",), "[A-Za-z0-9]{43}(?![A-Za-z0-9_])"),
    ("figma_token", ("figd_",), "[A-Za-z0-9_-]{32,255}"),
    ("doppler_token", ("dp.pt.", "dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."),
     "[A-Za-z0-9_.-]{40,255}"),
    ("pulumi_token", ("pul-",), "[0-9a-f]{40}"),
    ("heroku_token", ("HRKU-",), "[A-Za-z0-9_-]{30,255}"),
    ("atlassian_token", ("ATATT",), "[A-Za-z0-9_=-]{100,1024}"),
    ("newrelic_api_key", ("NRAK-",), "[A-Z0-9]{27}"),
    ("dynatrace_token", ("dt0c01.",), r"[A-Z0-9]{24}\.[A-Z0-9]{64}"),
    ("google_oauth_secret", ("GOCSPX-",), "[A-Za-z0-9_-]{28}"),
    ("age_secret_key", ("AGE-SECRET-KEY-1",), "[0-9A-Z]{58}"),
    ("elevenlabs_api_key", ("sk_",), "[a-f0-9]{48}(?![A-Za-z0-9_])"),
    ("together_api_key", ("tgp_v1_",), "[A-Za-z0-9_-]{30,255}"),
    ("firecrawl_api_key", ("fc-",), "[a-f0-9]{32}(?![A-Za-z0-9_])"),
    ("huggingface_token", ("api_org_",), "[A-Za-z0-9]{30,255}"),
    ("docker_hub_token", ("dckr_pat_", "dckr_oat_"), "[A-Za-z0-9_-]{27,255}"),
    ("onepassword_token", ("ops_",), "eyJ[A-Za-z0-9+/]{200,8192}={0,3}"),
    ("flyio_token", ("fo1_",), "[A-Za-z0-9_-]{43,255}"),
    ("flyio_token", ("fm1a_", "fm1r_", "fm2_"), "[A-Za-z0-9+/]{100,8192}={0,3}"),
    ("planetscale_token", ("pscale_tkn_", "pscale_oauth_", "pscale_pw_"),
     "[A-Za-z0-9_=.-]{32,255}"),
    ("prefect_api_key", ("pnu_",), "[A-Za-z0-9]{36,255}"),
    ("buildkite_token", ("bkua_",), "[a-f0-9]{40}(?![A-Za-z0-9_])"),
    ("sourcegraph_token", ("sgp_",), "(?:[a-f0-9]{16}_|local_)?[a-f0-9]{40}(?![A-Za-z0-9_])"),
    ("rubygems_api_key", ("rubygems_",), "[a-f0-9]{48}(?![A-Za-z0-9_])"),
    ("artifactory_token", ("AKCp",), "[A-Za-z0-9]{64,255}"),
    ("readme_api_key", ("rdme_",), "[A-Za-z0-9]{64,255}"),
    ("brevo_api_key", ("xkeysib-",), "[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    ("shippo_token", ("shippo_live_", "shippo_test_"), "[a-f0-9]{40}(?![A-Za-z0-9_])"),
    ("square_token", ("sq0atp-", "sq0csp-"), "[A-Za-z0-9_-]{22,255}"),
    ("square_token", ("EAAA",), "[A-Za-z0-9_-]{56,255}"),
    ("tailscale_key", ("tskey-",), "(?:auth|api|client|scim|webhook)-[A-Za-z0-9]{4,64}"
     "-[A-Za-z0-9]{16,128}"),
    ("netlify_token", ("nfp_",), "[A-Za-z0-9]{36,255}"),
    ("mailgun_api_key", ("key-",), "[0-9a-z]{32}(?![A-Za-z0-9_])"),
    ("vercel_token", ("vercel_blob_rw_",), "[A-Za-z0-9]{8,64}_[A-Za-z0-9]{20,255}"),
    ("render_api_key", ("rnd_",), "[A-Za-z0-9]{24,255}"),
    ("browserbase_api_key", ("bb_live_",), "[A-Za-z0-9_-]{20,255}"),
    ("resend_api_key", ("re_",), "[A-Za-z0-9]{8}_[A-Za-z0-9]{20,40}(?![A-Za-z0-9_])"),
    ("airtable_token", ("pat",), r"[A-Za-z0-9]{14}\.[a-f0-9]{64}(?![A-Za-z0-9_])"),
    ("mapbox_token", ("sk.eyJ",), r"[A-Za-z0-9_-]{20,1024}\.[A-Za-z0-9_-]{16,255}"),
    ("nvidia_api_key", ("nvapi-",), "[A-Za-z0-9_-]{40,255}"),
    ("google_refresh_token", ("1//0",), "[A-Za-z0-9_-]{40,512}"),
    # Elasticsearch's enrollment token: base64 of {"ver":…,"adr":…,"fgr":…,"key":…}.
    ("elastic_enrollment_token", ("eyJ2ZXIiOi",), "[A-Za-z0-9+/]{40,4096}={0,2}"),
    ("docker_swarm_token", ("SWMTKN-1-",), "[a-z0-9]{50}-[a-z0-9]{25}"),
    # A Cloudflare tunnel's token: base64 of {"a":…,"t":…,"s":…}.
    ("cloudflare_tunnel_token", ("eyJhIjoi",), "[A-Za-z0-9+/]{40,4096}={0,2}"),
    ("posthog_api_key", ("phx_",), "[A-Za-z0-9]{30,255}"),
    # Laravel's encrypted cookie (its session's, its XSRF token's): base64 of {"iv":….
    ("laravel_cookie", ("eyJpdiI6",), "[A-Za-z0-9+/]{40,8192}={0,2}"),
    ("sonarqube_token", ("squ_", "sqp_", "sqa_"), "[a-f0-9]{40}(?![A-Za-z0-9_])"),
    ("jina_api_key", ("jina_",), "[A-Za-z0-9]{30,255}[A-Za-z0-9_-]{0,255}"),
    ("cerebras_api_key", ("csk-",), "[a-z0-9]{40,255}"),
    # A Discord bot's token: its id (digits) in base64, a timestamp, an HMAC.
    ("discord_token", ("MT", "Mj", "Mz", "ND", "NT", "Nj", "Nz", "OD", "OT"),
     r"[A-Za-z0-9_-]{22,26}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_-])"),
    # A PEM private key in base64 ("-----BEGIN [RSA ]PRIVATE KEY", as a Kubernetes secret's
    # tls.key or a kubeconfig's client-key-data holds it), and a Docker config (a
    # registry's .dockerconfigjson: {"auths": …}).
    ("private_key", ("LS0tLS1CRUdJTi",),
     "(?:BQUklWQVRFIEtF|BSU0EgUFJJVkFURSBL|BFQyBQUklWQVRFIEtF|BEU0EgUFJJVkFURSBL"
     "|BPUEVOU1NIIFBSSVZBVEUgS0VZ|BFTkNSWVBURUQgUFJJVkFURSBL|BQR1AgUFJJVkFURSBLRVkgQkxP)"
     "[A-Za-z0-9+/]{16,16384}={0,2}"),
    ("docker_auth", ("eyJhdXRocyI6", "ewoJImF1dGhz", "ewogICJhdXRocyI6"),
     "[A-Za-z0-9+/]{16,16384}={0,2}"),
)
"""Each kind of key, the prefixes its keys start with, and the rest of one after it."""


def generated(body: str) -> bool:
    """True when ``body`` looks generated: an upper-case letter, a lower-case one, a digit."""
    return body.lower() != body and body.upper() != body and any(map(str.isdigit, body))


WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
"""What a key glued to a longer word follows."""

KEY_MIN = 28
KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.+/=-"
_AS_RUNS = bytes(ord("x") if chr(byte) in KEY_CHARS else ord(" ") for byte in range(256))
_RUN = b"x" * KEY_MIN


def key_runs(text: str) -> str:
    """The runs of :data:`KEY_MIN` or more of :data:`KEY_CHARS` in ``text``, joined by
    spaces: found by byte search, a byte a character, with no regular expression."""
    runs = text.encode("latin-1", "replace").translate(_AS_RUNS)
    found: list[str] = []
    start = runs.find(_RUN)
    while start >= 0:
        end = runs.find(b" ", start + KEY_MIN)
        end = len(runs) if end < 0 else end
        found.append(text[start:end])
        start = runs.find(_RUN, end)
    return " ".join(found)


_IN_QUERY = re.compile(r"[?&][A-Za-z0-9_.-]{0,64}\Z")
"""What a URL's query parameter's name follows, up to the key."""
_QUERY_REST = re.compile("[&#]")
_SETTINGS = ("--set", "--set-string", "--set-env-vars", "--update-env-vars")
"""Flags taking a list of settings: ``helm --set a=1,b=2``, ``gcloud --set-env-vars``."""
_SETTINGS_GLUED = tuple(flag + "=" for flag in _SETTINGS)
_SETTING_REST = re.compile(r"(?<!\\),")


def value_end(text: str, start: int) -> re.Pattern[str] | None:
    """What ends the value of the key at ``start``, before white space does: the next
    parameter of a URL's query (``?api_key=…&page=2``: ``&`` or ``#``), or the next setting
    of a list (``helm --set a=1,db.password=…,b=2``: an unescaped ``,``)."""
    if _IN_QUERY.search(text, max(0, start - 65), start):
        return _QUERY_REST
    low = max(0, start - 2048)
    space = max(text.rfind(" ", low, start), text.rfind("\t", low, start))
    if space < 0 and low:
        return None  # the word is longer than a list of settings is
    if text.endswith(_SETTINGS, max(0, space - 19), max(0, space)) \
            or text.startswith(_SETTINGS_GLUED, space + 1):
        return _SETTING_REST
    return None


def token_start(prefix_length: int) -> str:
    """Asserts that the ``prefix_length`` characters just matched start a token.

    A secret glued to a token character is part of a longer word; refusing those starts
    also keeps every scan linear (a run of token characters is entered once). Placed after
    a literal prefix so the regex engine can still search for that literal quickly.
    """
    return rf"(?<![A-Za-z0-9_.-].{{{prefix_length}}})"


def quoted(group: str) -> str:
    """A value after the opening quote captured as ``group``: up to its closing quote,
    backslash escapes and the other kind of quote included (``"pa\\"ss"``, ``"it's"``, as
    a shell or a JSON string writes them; a value ending in a backslash runs on to the next
    such quote), else (none on the line) up to its first quote of that kind, or the line's
    end."""
    quote = f"(?P={group})"
    return (rf"(?:(?:(?!{quote})(?:[^\\\r\n]|\\[^\r\n])){{1,512}}(?={quote})"
            rf"|(?:(?!{quote})[^\r\n]){{1,512}})")


def maybe_quoted(ends: str = "") -> str:
    """A value after an opening quote that may be there (group ``q``, also escaped:
    ``\\"``): quoted as :func:`quoted` says, else up to white space, a quote or one of
    ``ends`` (not an escaped quote: the opening one the group passed over); never a GitHub
    Actions expression (``${{ secrets.X }}``), which names one kept elsewhere."""
    return (r"(?!\$\{\{)(?(q)" + quoted("q") + r"|(?!\\{1,7}[\"'])(?:[^\s\"'\\" + ends
            + r"]|\\(?![\\\"'])){1,512})")


COMPOSER_AUTH = r"(?:bearer|github-oauth|gitlab-token|gitlab-oauth|bitbucket-oauth|http-basic)\."
"""What names the credentials composer's ``config --auth`` sets, before the host
(``github-oauth.github.com TOKEN``, ``http-basic.repo.example.com USER PASSWORD``)."""

EMPHASIS = r"(?:\*{1,2}|_{1,2}|</(?:b|strong)>)"
"""Markdown's or HTML's emphasis closing a label (``**Password:**``, ``<b>Token:</b>``)."""

SECRET_NAME = r"[\w.-]{0,60}(?i:pass|pwd|secret|token|key|credential)[\w.-]{0,60}"
"""A variable's name that says it holds a secret (``DB_PASSWORD``, ``api_token``)."""

_END = r"(?=[\s\"'`,;)\]}]|$)"
_NAMED = r"[\"'][A-Za-z_][\w.-]{0,100}[\"']"
_ACCESS = (rf"(?:\.\w{{1,60}}|\[{_NAMED}\]|\(\)"
           rf"|\({_NAMED}(?:[ \t]{{0,4}},[ \t]{{0,4}}[\"'](?:\[REDACTED:\w{{1,40}}\])?[\"'])?\))")
"""How code reads a value: an attribute, a subscript or a call by name, also with a
default that is empty or was redacted (by the rule for a secret's default)."""
REFERENCE = (
    r"(?:\\{0,7}[\"'`])?(?:(?:\$\{\{[ \t]{0,4}[A-Za-z_][\w.]{0,100}[ \t]{0,4}\}\}"
    r"|\{\{[ \t]{0,4}[.$]?[A-Za-z_][\w.]{0,100}(?:[ \t]{0,4}\|[ \t]{0,4}[\w.]{1,40}"
    r"(?:[ \t]{1,4}[\w.\"'-]{1,40}){0,3}){0,4}[ \t]{0,4}\}\}"
    r"|\$\{[A-Za-z_]\w{0,100}(?::?\?[^}\r\n]{0,100})?\}|\$[A-Z_][A-Z0-9_]{0,100}"
    rf"|<%=?[ \t]{{0,4}}[A-Za-z_]\w{{0,60}}{_ACCESS}{{0,6}}[ \t]{{0,4}}%>"
    r"|(?:os\.environ|os\.getenv|process\.env|import\.meta\.env|System\.getenv|ENV|getpass"
    rf"|settings|config|self|this|request|req|secrets|credentials|env|vars){_ACCESS}{{0,6}}"
    rf"|[A-Za-z_][\w.]{{0,100}}(?:\[{_NAMED}\]|\({_NAMED}\))"
    r"|<[A-Za-z0-9][\w .-]{0,60}>|\*{3,64}|x{3,64}|X{3,64})" + _END +
    r"|(?:str|string|bytes|bool|int|SecretStr|None|null|NULL|nil|undefined|true|false|True"
    r"|False)(?=[;,)\]}|=]{0,4}(?:[\s\"'`]|$))"
    r"|(?:Optional|Union|Annotated|list|dict|set|tuple|type|List|Dict|Set|Tuple|Sequence"
    r"|Mapping)\[|\$\("
    r"|(?:required|missing|invalid|expired|revoked|empty|incorrect|wrong|must|should|cannot"
    r"|not|too|field|Field)(?=[.,;:)`]{0,2}(?:\s|$)))")
"""Values that name a secret kept elsewhere, not the secret: a variable (``$DB_PASSWORD``,
``${DB_PASSWORD}``, ``${DB_PASSWORD:?set it}``, ``${{ secrets.DB_PASSWORD }}``,
``{{ .Values.db.password | b64enc }}``,
``<%= ENV['X'] %>``), code reading one (``os.environ["X"]``, ``process.env.X``,
``self._token``, ``config['api_key']``) or a command's output (``$(gh auth token)``), a
type (``password: str``, ``token: string;``) or a placeholder (``<your-api-key>``,
``<32-byte hex>``, ``****``, ``xxx``); or a verdict on one (``token: invalid``,
``password: must be at least 8 characters``). A traceback's source line, a type error, a
config template and a validation error keep what the next reader needs."""


_ARG = r"(?:\"[^\"\r\n]{0,200}\"|'[^'\r\n]{0,200}'|[\w.]{1,100})"
CALL = (rf"(?:\[\])?[A-Za-z_][\w.]{{0,100}}(?:\([ \t]{{0,4}}(?:{_ARG}"
         rf"(?:[ \t]{{0,4}},[ \t]{{0,4}}{_ARG}){{0,5}}[ \t]{{0,4}})?\)|\[{_ARG}\])(?!\w)")
"""An assignment's value that is a call with simple arguments, a comma between each
(``password = decrypt('aHVudGVyMg==')``, Go's ``[]byte("…")``), or a subscript
(``config["db"]``): one value, redacted whole unless it names a secret kept elsewhere;
none when a word follows it (``Aaaa()0`` is one word)."""


@cache
def reference() -> re.Pattern[str]:
    """:data:`REFERENCE`, compiled on first use: one pattern for every assignment's value."""
    return re.compile(REFERENCE)


_WHAT_OF_IT = (r"(?i:type|url|uri|endpoint|name|file|path|dir|count|counter|length|limit|size"
               r"|ttl|age|expires|expires_in|expires_at|expiry|env|var|header|field|prefix|ids"
               r"|details|provider|selector|refs|policy|enabled|required|mode|used|arn)")
NAMES_NO_SECRET = (rf"(?![_.-]{_WHAT_OF_IT}(?![A-Za-z0-9])|[A-Za-z0-9]{{0,20}}"
                   rf"(?:[_.-][A-Za-z0-9]{{1,20}}){{0,3}}?[_.-]{_WHAT_OF_IT}(?![A-Za-z0-9_.-])"
                   r"|(?-i:[A-Za-z0-9]{0,20}(?:Name|Ref|File|Path|Dir|Selector)s?)"
                   r"(?![A-Za-z0-9_.-])"
                   r"|(?<=token)s(?![A-Za-z0-9_.-]))")
"""What after a secret's name makes a name that holds none: a word that says what of it
the name is, next (``token_type``, ``token_endpoint_auth_method``) or last
(``PASSWORD_MIN_LENGTH``, ``SECRETS_DIR``, ``DB_SECRET_ARN``), a name, a reference or a
file in camel case (a Kubernetes ``secretName``, ``secretKeyRef``, ``passwordFile``); or
``TOKENS``, a count (``MAX_TOKENS``)."""


_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_KEY_LINE = re.compile(r"[A-Za-z0-9+/=]{16,4096}|(?:Proc-Type|DEK-Info|Comment): [^\n]{0,200}")
"""A line of a key's body: base64, or a header."""
_LAST_KEY_LINE = re.compile(r"[A-Za-z0-9+/=]{1,4096}")
"""The line right above the END marker: base64 of any length (a key's last line is short)."""


def redact_private_keys(text: str) -> str:
    """PEM private-key blocks replaced by ``[REDACTED:private_key]``.

    A block without its END line (a log tail cut it off) is redacted to the end of the
    text; an END line without its BEGIN takes the key-looking lines right above it.
    Each marker is searched for once, so the work is linear in ``text``.
    """
    if "PRIVATE KEY" not in text:
        return text
    mark = MARK.format(kind="private_key")
    out: list[str] = []
    position = 0
    begin = _PEM_BEGIN.search(text)
    end = _PEM_END.search(text)
    while begin is not None or end is not None:
        if end is not None and (begin is None or end.start() < begin.start()):
            start = _orphan_start(text, position, end.start())
            out.append(text[position:start])
        else:
            assert begin is not None
            out.append(text[position:begin.start()])
            if end is None:
                out.append(mark)
                return "".join(out)
        out.append(mark)
        position = end.end()
        if begin is not None and begin.start() < position:
            begin = _PEM_BEGIN.search(text, position)
        end = _PEM_END.search(text, position)
    out.append(text[position:])
    return "".join(out)


def _orphan_start(text: str, floor: int, end_marker: int) -> int:
    """Where the key lines directly above ``end_marker`` begin (not before ``floor``)."""
    start = end_marker
    pattern = _LAST_KEY_LINE
    while start > floor:
        line_start = text.rfind("\n", floor, start - 1) + 1
        line_start = max(line_start, floor)
        line = text[line_start:start].strip()
        if not line or not pattern.fullmatch(line):
            break
        start = line_start
        pattern = _KEY_LINE
    return start
