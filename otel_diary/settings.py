"""Settings: constructor argument, then environment, then default.

``KB_DIARIES_ENABLED`` switches diaries on, ``MOTHER_AI_URL`` and ``MOTHER_AI_API_KEY``
name the hub; every other setting is read from ``OTEL_DIARY_<NAME>`` (in any case). Values
are read leniently, as strings from the environment come: ``"12"`` is a number, ``"yes"``
and ``"off"`` are booleans. A bad environment value logs a warning naming the variable and
falls back to the default; a bad argument in code raises ``ValueError`` naming the setting.
Neither repeats a secret.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from otel_diary.conventions import load_conventions
from otel_diary.switch import KB_DIARIES_ENABLED, parse_flag
from otel_diary.text import check_header_value, check_trace_url_template

logger = logging.getLogger("otel_diary")

ENV_PREFIX = "OTEL_DIARY_"
MOTHER_AI_URL = "MOTHER_AI_URL"
"""The knowledge hub's base URL; diaries are POSTed to ``<url>/v1/kb/edit``. Unset: no hub."""
MOTHER_AI_API_KEY = "MOTHER_AI_API_KEY"
"""Sent to the knowledge hub as ``x-api-key`` when set."""


def default_dir() -> Path:
    """``$XDG_DATA_HOME/otel-diary``, i.e. ``~/.local/share/otel-diary`` by default."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "otel-diary"


class Secret:
    """A string that stays out of reprs and logs; ``get_secret_value()`` gives it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret({str(self)!r})"

    def __str__(self) -> str:
        return "**********" if self._value else ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


_Read = Callable[[Any], Any]
"""Reads one value given for a setting: the value to keep, or ``ValueError`` saying what
was expected (without repeating the value)."""


class _Setting:
    """One knob: its default (a factory when callable), how a value is read, its variable."""

    __slots__ = ("default", "read", "variable")

    def __init__(self, default: object, read: _Read, variable: str) -> None:
        self.default = default
        self.read = read
        self.variable = variable

    def fresh_default(self) -> Any:
        return self.default() if callable(self.default) else self.default


def _setting(default: object, read: _Read, *, variable: str = "") -> Any:
    """A setting of :class:`Settings`, read from ``variable`` (``OTEL_DIARY_<NAME>`` by
    default)."""
    return _Setting(default, read, variable)


def _optional(read: _Read) -> _Read:
    return lambda value: None if value is None else read(value)


def _text(check: Callable[[str], Any] | None = None) -> _Read:
    def read(value: object) -> Any:
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return check(value) if check is not None else value
    return read


def _secret(check: Callable[[str], Secret | None]) -> _Read:
    def read(value: object) -> Secret | None:
        getter = getattr(value, "get_secret_value", None)  # ours, or pydantic's SecretStr
        if callable(getter):
            value = getter()
        if not isinstance(value, str):
            raise ValueError("expected a string")
        return check(value)
    return read


def _path(value: object) -> Path:
    """A path; a leading ``~`` is the home folder, as a shell reads it (a variable set in
    a unit file, a container's environment or a hook's settings is not read by a shell:
    ``~/kb`` made a folder named ``~`` in the working directory)."""
    if not isinstance(value, str | os.PathLike):
        raise ValueError("expected a path")
    return Path(value).expanduser()


def _maybe_path(value: object) -> Path | None:
    """A path, or none when unset or empty (a template that left ``OTEL_DIARY_DIR=``
    empty meant the default, not the working directory)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _path(value)


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    raise ValueError("expected a boolean: 1, true, yes or on; 0, false, no or off")


def _real(value: object) -> float:
    """``value`` as a finite number: a number, or a string of one ("2", " 1.5", "1e3")."""
    if not isinstance(value, int | float | str):
        raise ValueError("expected a number")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise ValueError("expected a number") from None
    if not math.isfinite(number):
        raise ValueError("expected a finite number")
    return number


def _whole(value: object) -> int:
    """``value`` as an integer: an integer, an integral float, or a string of either."""
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        with suppress(ValueError):
            return int(value)
    number = _real(value)
    if not number.is_integer():
        raise ValueError("expected a whole number")
    return int(number)


def _bounded(number: float, gt: float | None, ge: float | None, le: float | None) -> None:
    if gt is not None and not number > gt:
        raise ValueError(f"must be greater than {gt}")
    if ge is not None and not number >= ge:
        raise ValueError(f"must be at least {ge}")
    if le is not None and not number <= le:
        raise ValueError(f"must be at most {le}")


def _int(*, gt: int | None = None, ge: int | None = None, le: int | None = None) -> _Read:
    def read(value: object) -> int:
        number = _whole(value)
        _bounded(number, gt, ge, le)
        return number
    return read


def _float(*, gt: float | None = None, ge: float | None = None,
           le: float | None = None) -> _Read:
    def read(value: object) -> float:
        number = _real(value)
        _bounded(number, gt, ge, le)
        return number
    return read


def _conventions(value: str) -> str:
    load_conventions(value)
    return value


def _trace_url(value: str) -> str | None:
    return check_trace_url_template(value) if value else None


def _base_url(value: str) -> str | None:
    return check_base_url(value) if value.strip() else None


def _model(value: str) -> str | None:
    return value.strip() or None


def _api_key(value: str) -> Secret | None:
    return Secret(check_header_value(value, "an API key")) if value else None


def _store_url(value: str) -> Secret | None:
    if not value.strip():
        return None
    if value.partition("://")[0] not in ("postgresql", "postgres"):
        raise ValueError("expected a postgresql:// URL")
    return Secret(value)


def _serve_token(value: str) -> Secret:
    return Secret(check_serve_token(value, "the serve token"))


def _redact_patterns(value: object) -> dict[str, str]:
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("expected a JSON object from kind to regular expression")
    from otel_diary.pipeline.redact import compile_extra

    for kind, pattern in value.items():
        compile_extra(kind, pattern)
    return dict(value)


class Settings:
    """Every knob of otel-diary. Build with keyword arguments or from the environment."""

    enabled: bool = _setting(False, parse_flag, variable=KB_DIARIES_ENABLED)
    """``KB_DIARIES_ENABLED``: diaries are written only when truthy."""
    dir: Path | None = _setting(None, _maybe_path)
    """``OTEL_DIARY_DIR``: knowledge-base root; diaries land in ``<dir>/diaries/agents/``.
    Defaults to ``$XDG_DATA_HOME/otel-diary`` (``~/.local/share/otel-diary``)."""
    queue_size: int = _setting(8192, _int(gt=0, le=1_000_000))
    """``OTEL_DIARY_QUEUE_SIZE``: ended spans waiting for the worker; over it spans drop."""
    queue_max_bytes: int = _setting(64 * 1024 * 1024, _int(gt=0))
    """``OTEL_DIARY_QUEUE_MAX_BYTES``: estimated bytes (attributes) of the ended spans and
    decided task runs waiting in process; over it spans and task runs drop (counted and
    logged). As much again bounds what open traces keep (task spans waiting for their
    parent, captured messages and error text): over it the oldest trace is evicted, its
    waiting task spans released. 64 MiB by default."""
    max_traces: int = _setting(4096, _int(gt=0, le=1_000_000))
    """``OTEL_DIARY_MAX_TRACES``: open traces whose child spans are being summarized."""
    trace_ttl_s: float = _setting(3600.0, _float(gt=0))
    """``OTEL_DIARY_TRACE_TTL_S``: an idle trace is forgotten after this many seconds."""
    pending_timeout_s: float = _setting(600.0, _float(gt=0))
    """``OTEL_DIARY_PENDING_TIMEOUT_S``: how long a task span waits for its local root to
    end (an agent's run lasts minutes: its sub-tasks wait for it to decide them)."""
    schedule_delay_ms: int = _setting(1000, _int(gt=0, le=60_000))
    """``OTEL_DIARY_SCHEDULE_DELAY_MS``: the longest a span waits for the worker (it also
    wakes as soon as 512 spans are queued)."""
    shutdown_timeout_ms: int = _setting(10_000, _int(ge=0, le=600_000))
    """``OTEL_DIARY_SHUTDOWN_TIMEOUT_MS``: how long shutdown waits for diaries to land."""
    conventions: str = _setting("orchestrator", _text(_conventions))
    """``OTEL_DIARY_CONVENTIONS``: which attributes carry which fact, ``orchestrator`` by
    default; ``genai`` for OpenTelemetry GenAI spans, ``openinference`` for OpenInference's,
    ``claude-code`` for Claude Code's traces, or the path of a TOML/YAML mapping."""
    trace_url: str | None = _setting(None, _optional(_text(_trace_url)))
    """``OTEL_DIARY_TRACE_URL``: link from a diary to its trace, a template with
    ``{trace_id}`` and ``{span_id}`` (e.g. ``http://localhost:16686/trace/{trace_id}``).
    Unset by default: diaries carry the ids but no link."""
    index: bool = _setting(True, _bool)
    """``OTEL_DIARY_INDEX``: keep the search index ``<dir>/index.sqlite3`` up to date as
    diaries are written to the folder and fill "Related" from it. On by default."""
    hub_url: str | None = _setting(None, _optional(_text(_base_url)), variable=MOTHER_AI_URL)
    """``MOTHER_AI_URL``: knowledge hub; each diary is POSTed to ``<url>/v1/kb/edit``.
    Unset by default: no hub. With ``OTEL_DIARY_DIR`` also set, both receive each diary."""
    hub_api_key: Secret | None = _setting(None, _optional(_secret(_api_key)),
                                          variable=MOTHER_AI_API_KEY)
    """``MOTHER_AI_API_KEY``: sent as ``x-api-key`` to the hub. Unset by default."""
    hub_timeout_s: float = _setting(10.0, _float(gt=0, le=600))
    """``OTEL_DIARY_HUB_TIMEOUT_S``: deadline of each hub request, from connecting to the
    end of its answer; 10."""
    retry_initial_backoff_s: float = _setting(1.0, _float(gt=0, le=3600))
    """``OTEL_DIARY_RETRY_INITIAL_BACKOFF_S``: wait after a first failed delivery, doubled
    (with jitter) after each further one; 1 by default."""
    retry_max_backoff_s: float = _setting(60.0, _float(gt=0, le=3600))
    """``OTEL_DIARY_RETRY_MAX_BACKOFF_S``: longest wait between deliveries (a longer
    ``Retry-After`` from the hub is still honoured, up to an hour); 60 by default."""
    spool_dir: Path | None = _setting(None, _maybe_path)
    """``OTEL_DIARY_SPOOL_DIR``: diaries wait here, one file each, until the hub
    acknowledges them. Defaults to ``<dir>/spool``."""
    spool_max_entries: int = _setting(10_000, _int(gt=0, le=10_000_000))
    """``OTEL_DIARY_SPOOL_MAX_ENTRIES``: most diaries waiting; over it new ones are not
    spooled (counted and logged). 10000 by default."""
    spool_max_bytes: int = _setting(256 * 1024 * 1024, _int(gt=0))
    """``OTEL_DIARY_SPOOL_MAX_BYTES``: most bytes waiting in the spool; 256 MiB by default."""
    store_url: Secret | None = _setting(None, _optional(_secret(_store_url)))
    """``OTEL_DIARY_STORE_URL``: a shared store, ``postgresql://user:password@host/db``, for
    many replicas: diaries, "Related", lessons and the readers use it instead of the
    folder's index (``OTEL_DIARY_DIR`` set as well: diary files are written too). Writes
    go through the spool ``<spool dir>/store``. Unset by default."""
    store_timeout_s: float = _setting(5.0, _float(gt=0, le=600))
    """``OTEL_DIARY_STORE_TIMEOUT_S``: connect and statement timeout of the store; 5."""
    reflection_url: str | None = _setting(None, _optional(_text(_base_url)))
    """``OTEL_DIARY_REFLECTION_URL``: an OpenAI-compatible base URL (e.g.
    ``http://localhost:11434/v1``) that writes "What was learned". Unset by default: the
    deterministic stub writes it."""
    reflection_model: str | None = _setting(None, _optional(_text(_model)))
    """``OTEL_DIARY_REFLECTION_MODEL``: the model asked; unset by default (the server's own)."""
    reflection_api_key: Secret | None = _setting(None, _optional(_secret(_api_key)))
    """``OTEL_DIARY_REFLECTION_API_KEY``: sent as ``Authorization: Bearer``; unset by default."""
    reflection_timeout_s: float = _setting(20.0, _float(gt=0, le=600))
    """``OTEL_DIARY_REFLECTION_TIMEOUT_S``: timeout of each model call; 20 by default."""
    reflection_max_tokens: int = _setting(300, _int(gt=0, le=8192))
    """``OTEL_DIARY_REFLECTION_MAX_TOKENS``: most output tokens per call; 300 by default."""
    reflection_concurrency: int = _setting(2, _int(gt=0, le=64))
    """``OTEL_DIARY_REFLECTION_CONCURRENCY``: most model calls in flight at once; 2."""
    reflection_calls_per_minute: int = _setting(30, _int(ge=0, le=100_000))
    """``OTEL_DIARY_REFLECTION_CALLS_PER_MINUTE``: model calls allowed in any 60 seconds;
    beyond it the stub is used (and counted). 30 by default; 0 never calls."""
    redact_patterns: dict[str, str] = _setting(dict, _redact_patterns)
    """``OTEL_DIARY_REDACT_PATTERNS``: extra secrets to redact, a JSON object from kind to
    regular expression (e.g. ``{"ticket": "TCK-[0-9]{8}"}``), replaced by
    ``[REDACTED:<kind>]``. The built-in families are always redacted. Empty by default."""

    serve_host: str = _setting("127.0.0.1", _text())
    """``OTEL_DIARY_SERVE_HOST``: the address ``otel-diary serve`` listens on; 127.0.0.1
    by default (``0.0.0.0`` to take traffic from other machines)."""
    serve_http_port: int = _setting(4318, _int(ge=0, le=65535))
    """``OTEL_DIARY_SERVE_HTTP_PORT``: OTLP/HTTP port; 4318 by default, 0 turns it off."""
    serve_grpc_port: int = _setting(4317, _int(ge=0, le=65535))
    """``OTEL_DIARY_SERVE_GRPC_PORT``: OTLP/gRPC port; 4317 by default, 0 turns it off."""
    serve_token: Secret | None = _setting(None, _optional(_secret(_serve_token)))
    """``OTEL_DIARY_SERVE_TOKEN``: when set, requests must carry it as
    ``Authorization: Bearer <token>`` or ``x-api-key: <token>`` (else 401). Unset by default."""
    serve_tls_cert_file: Path | None = _setting(None, _maybe_path)
    """``OTEL_DIARY_SERVE_TLS_CERT_FILE``: the certificate (PEM, its chain after it) ``serve``
    presents; with it and its key, both listeners take TLS alone (``https://``, gRPC over
    TLS). Unset by default."""
    serve_tls_key_file: Path | None = _setting(None, _maybe_path)
    """``OTEL_DIARY_SERVE_TLS_KEY_FILE``: the certificate's private key (PEM, not
    encrypted). Unset by default."""
    serve_max_body_bytes: int = _setting(20 * 1024 * 1024, _int(gt=0, le=1024 * 1024 * 1024))
    """``OTEL_DIARY_SERVE_MAX_BODY_BYTES``: largest OTLP/HTTP body after decompression
    (else 413), and longest line or document ``replay`` reads (else skipped); 20 MiB by
    default."""
    serve_header_timeout_s: float = _setting(10.0, _float(gt=0, le=3600))
    """``OTEL_DIARY_SERVE_HEADER_TIMEOUT_S``: an OTLP/HTTP request head not complete this
    many seconds after it began closes the connection; 10 by default."""
    serve_body_timeout_s: float = _setting(30.0, _float(gt=0, le=3600))
    """``OTEL_DIARY_SERVE_BODY_TIMEOUT_S``: an OTLP/HTTP request body that stops arriving
    for this many seconds closes the connection, and an OTLP/gRPC call whose request has
    not arrived this many seconds after it began is cancelled; 30 by default."""
    serve_max_header_bytes: int = _setting(64 * 1024, _int(ge=1024, le=16 * 1024 * 1024))
    """``OTEL_DIARY_SERVE_MAX_HEADER_BYTES``: a larger OTLP/HTTP request head is answered
    431; 64 KiB by default."""
    serve_max_connections: int = _setting(1000, _int(gt=0, le=1_000_000))
    """``OTEL_DIARY_SERVE_MAX_CONNECTIONS``: OTLP/HTTP connections open at once; past it a
    new connection closes the one that has waited longest without a request in progress
    (or is refused when every one is busy). 1000 by default."""
    serve_idle_timeout_s: float = _setting(15.0, _float(gt=0, le=3600))
    """``OTEL_DIARY_SERVE_IDLE_TIMEOUT_S``: an OTLP/HTTP connection idle between requests
    this many seconds is closed; 15 by default."""
    serve_grpc_max_message_bytes: int = _setting(16 * 1024 * 1024,
                                                 _int(ge=1024, le=1024 * 1024 * 1024))
    """``OTEL_DIARY_SERVE_GRPC_MAX_MESSAGE_BYTES``: largest OTLP/gRPC request message after
    decompression (else RESOURCE_EXHAUSTED); 16 MiB by default."""
    serve_grpc_max_concurrent_rpcs: int = _setting(4, _int(gt=0, le=1024))
    """``OTEL_DIARY_SERVE_GRPC_MAX_CONCURRENT_RPCS``: OTLP/gRPC calls served at once; past
    it a new call cancels the call waiting longest for its message if it has waited a
    second, else it is refused at once with RESOURCE_EXHAUSTED (retried), unread. 4 by
    default."""
    serve_grace_s: float = _setting(10.0, _float(ge=0, le=3600))
    """``OTEL_DIARY_SERVE_GRACE_S``: how long after a task span arrives its late child
    spans are still waited for before the diary is written; 10 by default."""
    serve_trace_timeout_s: float = _setting(300.0, _float(gt=0, le=86_400))
    """``OTEL_DIARY_SERVE_TRACE_TIMEOUT_S``: a trace idle this long without a root task
    span is forgotten (and counted); 300 by default."""
    serve_max_traces: int = _setting(50_000, _int(gt=0, le=10_000_000))
    """``OTEL_DIARY_SERVE_MAX_TRACES``: most traces assembled at once; 50000 by default."""
    serve_max_spans: int = _setting(500_000, _int(gt=0, le=100_000_000))
    """``OTEL_DIARY_SERVE_MAX_SPANS``: most spans held for assembly; 500000 by default."""
    serve_max_bytes: int = _setting(256 * 1024 * 1024, _int(gt=0))
    """``OTEL_DIARY_SERVE_MAX_BYTES``: most (estimated) bytes held for assembly; 256 MiB by
    default. At any of these bounds the receiver answers 503 with ``Retry-After``."""
    serve_max_pending: int = _setting(2000, _int(gt=0, le=10_000_000))
    """``OTEL_DIARY_SERVE_MAX_PENDING``: decided tasks allowed to wait for their diaries;
    past it requests are answered 503 with ``Retry-After``, so that the pipeline catches
    up. 2000 by default."""
    journal: str = _setting("", _text())
    """``OTEL_DIARY_JOURNAL``: the write-ahead journal of ``otel-diary serve``, a SQLite
    file holding every span a request was acknowledged for until its diary is written;
    a restart takes back what is left. ``<dir>/journal.sqlite3`` by default; ``off``
    turns it off (a crash then loses the tasks waiting for their diaries)."""
    journal_max_bytes: int = _setting(256 * 1024 * 1024, _int(gt=0))
    """``OTEL_DIARY_JOURNAL_MAX_BYTES``: most bytes the journal holds; past it requests
    are answered 503 with ``Retry-After`` (and counted). 256 MiB by default."""


    def __init__(self, **values: Any) -> None:
        for name in values:
            if name not in _SETTINGS:
                raise ValueError(f"{name}: not a setting of otel-diary")
        environment: dict[str, str] | None = None
        for name, setting in _SETTINGS.items():
            if name in values:
                value = _from_argument(name, setting, values[name])
            else:
                if environment is None:  # variable names in any case
                    environment = {key.lower(): value for key, value in os.environ.items()}
                value = _from_environment(name, setting, environment)
            setattr(self, name, value)

    def replace(self, **overrides: Any) -> Settings:
        """These settings with ``overrides`` applied; a bad one raises ``ValueError``."""
        current = {name: getattr(self, name) for name in _SETTINGS}
        return type(self)(**{**current, **overrides})

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={_kept(name, getattr(self, name))!r}" for name in _SETTINGS)
        return f"Settings({shown})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and all(
            getattr(other, name) == getattr(self, name) for name in _SETTINGS)

    __hash__ = None  # type: ignore[assignment]

    @property
    def root(self) -> Path:
        """The knowledge-base root in use."""
        return self.dir if self.dir is not None else default_dir()

    @property
    def journal_path(self) -> Path | None:
        """The serve journal in use; ``None`` when it is off."""
        value = self.journal.strip()
        if value.lower() == "off":
            return None
        return Path(value) if value else self.root / "journal.sqlite3"

    @property
    def store_spool(self) -> Path:
        """Where diaries wait for the store."""
        return self.spool_root / "store"

    @property
    def spool_root(self) -> Path:
        """The hub delivery spool in use."""
        return self.spool_dir if self.spool_dir is not None else self.root / "spool"


_SETTINGS: dict[str, _Setting] = {
    name: value for name, value in vars(Settings).items() if isinstance(value, _Setting)}
"""Every setting by name, in the order declared."""
for _name, _each in _SETTINGS.items():
    _each.variable = _each.variable or f"{ENV_PREFIX}{_name.upper()}"
    delattr(Settings, _name)  # an instance holds every value; the class holds none
_SECRETS = frozenset(name for name, kind in Settings.__annotations__.items()
                     if "Secret" in kind)


def _from_argument(name: str, setting: _Setting, value: object) -> Any:
    try:
        return setting.read(value)
    except ValueError as exc:
        message, shown = _redacted(str(exc)), _shown(name, value)
        given = "" if f"got {shown}" in message else f" (got {shown})"
        raise ValueError(f"{name}: {message}{given}") from None


def _from_environment(name: str, setting: _Setting, environment: dict[str, str]) -> Any:
    value = environment.get(setting.variable.lower())
    if value is None:
        return setting.fresh_default()
    try:
        return setting.read(value)
    except ValueError as exc:
        # Every mechanism that builds settings reads the environment again: say it once
        # per process, not once per reader.
        key = (setting.variable, hash(value))  # not the value: it may be a secret
        log = logger.debug if key in _warned else logger.warning
        _warned.add(key)
        log("ignoring %s=%s: %s; using the default", setting.variable,
            _shown(name, value), _redacted(str(exc)))
        return setting.fresh_default()


_warned: set[tuple[str, int]] = set()
"""Bad environment values already warned about, as (variable, hash of the value)."""


def _redacted(text: str) -> str:
    from otel_diary.pipeline.redact import redact  # only for a message about a bad value

    return redact(text)


def _url(name: str, value: object) -> str | None:
    """A URL setting's value without its user, password, query or fragment (redacted);
    ``None`` for any other setting or value."""
    if name not in ("hub_url", "reflection_url") or not isinstance(value, str):
        return None
    from otel_diary.pipeline.redact import display_url

    return display_url(value)


def _kept(name: str, value: object) -> object:
    """A setting's value as ``repr(settings)`` shows it: URLs without their credentials
    (secrets show themselves as ``Secret('**********')``)."""
    url = _url(name, value)
    return value if url is None else url


def _shown(name: str, value: object) -> str:
    """A rejected value as a message may show it: secrets not at all."""
    if name in _SECRETS:
        return "<hidden>"
    url = _url(name, value)
    return _redacted(repr(value)) if url is None else repr(url)


SERVE_TOKEN = f"{ENV_PREFIX}SERVE_TOKEN"
"""The bearer token ``otel-diary serve`` requires; unset: no authentication."""


def check_serve_token(value: str, what: str) -> str:
    """``value`` as a bearer token ``serve`` can require; ``ValueError`` naming ``what``.

    An empty or blank token is an error, never "no authentication": a variable set to
    nothing is a mistake in the deployment, and starting open would hide it.
    """
    if not value.strip():
        raise ValueError(f"{what} is empty; set a token or leave it unset to run "
                         "without authentication")
    return check_header_value(value, what)


def check_base_url(value: str) -> str:
    """``value`` as an http(s) base URL without a trailing slash; ``ValueError`` otherwise."""
    url = value.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        from otel_diary.pipeline.redact import display_url

        raise ValueError(f"expected an http:// or https:// URL, got {display_url(value)!r}")
    return url


