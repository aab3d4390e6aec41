"""Settings: constructor argument, then environment, then default.

``KB_DIARIES_ENABLED`` switches diaries on; everything else is ``OTEL_DIARY_*``. A bad
environment value logs a warning naming the variable and falls back to the default; a
bad argument in code raises ``ValueError`` (pydantic's ``ValidationError`` is one).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Annotated, Any, get_args
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from otel_diary.conventions import load_conventions
from otel_diary.pipeline.redact import compile_extra, display_url, redact
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


class _LenientEnvSource(EnvSettingsSource):
    """The environment, with each bad value dropped (and warned about) instead of fatal."""

    def __call__(self) -> dict[str, Any]:
        data = super().__call__()
        fields = _fields_by_key(self.settings_cls)
        blank = self.settings_cls.model_construct()
        validator = self.settings_cls.__pydantic_validator__
        for key, value in list(data.items()):
            if key not in fields:
                continue
            name, info = fields[key]
            try:
                validator.validate_assignment(blank, name, value)
            except (ValidationError, ValueError) as exc:
                variable = _env_name(name, info)
                # Every mechanism that builds settings reads the environment again: say it
                # once per process, not once per reader.
                log = logger.debug if (variable, str(value)) in _warned else logger.warning
                _warned.add((variable, str(value)))
                log("ignoring %s=%s: %s; using the default", variable,
                    _shown(name, info, value), _redacted(_first_error(exc)))
                del data[key]
        return data


_warned: set[tuple[str, str]] = set()
"""Bad environment values already warned about, as (variable, value)."""


def _redacted(text: str) -> str:
    return redact(text)


def _shown(name: str, info: FieldInfo, value: object) -> str:
    """A rejected environment value as a log line may show it: secrets not at all."""
    if info.annotation is SecretStr or SecretStr in get_args(info.annotation):
        return "<hidden>"
    if name in ("hub_url", "reflection_url") and isinstance(value, str):
        return repr(display_url(value))
    return _redacted(repr(value))


def _fields_by_key(settings_cls: type[BaseSettings]) -> dict[str, tuple[str, FieldInfo]]:
    fields: dict[str, tuple[str, FieldInfo]] = {}
    for name, info in settings_cls.model_fields.items():
        fields[name] = (name, info)
        if isinstance(info.validation_alias, AliasChoices):
            for choice in info.validation_alias.choices:
                fields[str(choice)] = (name, info)
    return fields


def _env_name(name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"{ENV_PREFIX}{name.upper()}"


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return str(exc.errors()[0].get("msg", exc))
    return str(exc)


class Settings(BaseSettings):
    """Every knob of otel-diary. Build with keyword arguments or from the environment."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid",
                                      populate_by_name=True, validate_default=True)

    enabled: bool = Field(False, validation_alias=AliasChoices(KB_DIARIES_ENABLED))
    """``KB_DIARIES_ENABLED``: diaries are written only when truthy."""
    dir: Path | None = None
    """``OTEL_DIARY_DIR``: knowledge-base root; diaries land in ``<dir>/diaries/agents/``.
    Defaults to ``$XDG_DATA_HOME/otel-diary`` (``~/.local/share/otel-diary``)."""
    queue_size: int = Field(8192, gt=0, le=1_000_000)
    """``OTEL_DIARY_QUEUE_SIZE``: ended spans waiting for the worker; over it spans drop."""
    queue_max_bytes: int = Field(64 * 1024 * 1024, gt=0)
    """``OTEL_DIARY_QUEUE_MAX_BYTES``: estimated bytes (attributes) of the ended spans and
    decided task runs waiting in process; over it spans and task runs drop (counted and
    logged). 64 MiB by default."""
    max_traces: int = Field(4096, gt=0, le=1_000_000)
    """``OTEL_DIARY_MAX_TRACES``: open traces whose child spans are being summarized."""
    trace_ttl_s: float = Field(3600.0, gt=0)
    """``OTEL_DIARY_TRACE_TTL_S``: an idle trace is forgotten after this many seconds."""
    pending_timeout_s: float = Field(30.0, gt=0)
    """``OTEL_DIARY_PENDING_TIMEOUT_S``: how long a task span waits for its parent to end."""
    schedule_delay_ms: int = Field(1000, gt=0, le=60_000)
    """``OTEL_DIARY_SCHEDULE_DELAY_MS``: the longest a span waits for the worker (it also
    wakes as soon as 512 spans are queued)."""
    shutdown_timeout_ms: int = Field(10_000, ge=0, le=600_000)
    """``OTEL_DIARY_SHUTDOWN_TIMEOUT_MS``: how long shutdown waits for diaries to land."""
    conventions: str = "orchestrator"
    """``OTEL_DIARY_CONVENTIONS``: which attributes carry which fact, ``orchestrator`` by
    default; ``genai`` for OpenTelemetry GenAI spans, ``openinference`` for OpenInference's,
    ``claude-code`` for Claude Code's traces, or the path of a TOML/YAML mapping."""
    trace_url: str | None = None
    """``OTEL_DIARY_TRACE_URL``: link from a diary to its trace, a template with
    ``{trace_id}`` and ``{span_id}`` (e.g. ``http://localhost:16686/trace/{trace_id}``).
    Unset by default: diaries carry the ids but no link."""
    index: bool = True
    """``OTEL_DIARY_INDEX``: keep the search index ``<dir>/index.sqlite3`` up to date as
    diaries are written to the folder and fill "Related" from it. On by default."""
    hub_url: str | None = Field(None, validation_alias=AliasChoices(MOTHER_AI_URL, "hub_url"))
    """``MOTHER_AI_URL``: knowledge hub; each diary is POSTed to ``<url>/v1/kb/edit``.
    Unset by default: no hub. With ``OTEL_DIARY_DIR`` also set, both receive each diary."""
    hub_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices(MOTHER_AI_API_KEY, "hub_api_key"))
    """``MOTHER_AI_API_KEY``: sent as ``x-api-key`` to the hub. Unset by default."""
    hub_timeout_s: float = Field(10.0, gt=0, le=600)
    """``OTEL_DIARY_HUB_TIMEOUT_S``: connect, read and write timeout of each hub request; 10."""
    retry_initial_backoff_s: float = Field(1.0, gt=0, le=3600)
    """``OTEL_DIARY_RETRY_INITIAL_BACKOFF_S``: wait after a first failed delivery, doubled
    (with jitter) after each further one; 1 by default."""
    retry_max_backoff_s: float = Field(60.0, gt=0, le=3600)
    """``OTEL_DIARY_RETRY_MAX_BACKOFF_S``: longest wait between deliveries (a longer
    ``Retry-After`` from the hub is still honoured, up to an hour); 60 by default."""
    spool_dir: Path | None = None
    """``OTEL_DIARY_SPOOL_DIR``: diaries wait here, one file each, until the hub
    acknowledges them. Defaults to ``<dir>/spool``."""
    spool_max_entries: int = Field(10_000, gt=0, le=10_000_000)
    """``OTEL_DIARY_SPOOL_MAX_ENTRIES``: most diaries waiting; over it new ones are not
    spooled (counted and logged). 10000 by default."""
    spool_max_bytes: int = Field(256 * 1024 * 1024, gt=0)
    """``OTEL_DIARY_SPOOL_MAX_BYTES``: most bytes waiting in the spool; 256 MiB by default."""
    store_url: SecretStr | None = None
    """``OTEL_DIARY_STORE_URL``: a shared store, ``postgresql://user:password@host/db``, for
    many replicas: diaries, "Related", lessons and the readers use it instead of the
    folder's index (``OTEL_DIARY_DIR`` set as well: diary files are written too). Writes
    go through the spool ``<spool dir>/store``. Unset by default."""
    store_timeout_s: float = Field(5.0, gt=0, le=600)
    """``OTEL_DIARY_STORE_TIMEOUT_S``: connect and statement timeout of the store; 5."""
    reflection_url: str | None = None
    """``OTEL_DIARY_REFLECTION_URL``: an OpenAI-compatible base URL (e.g.
    ``http://localhost:11434/v1``) that writes "What was learned". Unset by default: the
    deterministic stub writes it."""
    reflection_model: str | None = None
    """``OTEL_DIARY_REFLECTION_MODEL``: the model asked; unset by default (the server's own)."""
    reflection_api_key: SecretStr | None = None
    """``OTEL_DIARY_REFLECTION_API_KEY``: sent as ``Authorization: Bearer``; unset by default."""
    reflection_timeout_s: float = Field(20.0, gt=0, le=600)
    """``OTEL_DIARY_REFLECTION_TIMEOUT_S``: timeout of each model call; 20 by default."""
    reflection_max_tokens: int = Field(300, gt=0, le=8192)
    """``OTEL_DIARY_REFLECTION_MAX_TOKENS``: most output tokens per call; 300 by default."""
    reflection_concurrency: int = Field(2, gt=0, le=64)
    """``OTEL_DIARY_REFLECTION_CONCURRENCY``: most model calls in flight at once; 2."""
    reflection_calls_per_minute: int = Field(30, ge=0, le=100_000)
    """``OTEL_DIARY_REFLECTION_CALLS_PER_MINUTE``: model calls allowed in any 60 seconds;
    beyond it the stub is used (and counted). 30 by default; 0 never calls."""
    redact_patterns: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    """``OTEL_DIARY_REDACT_PATTERNS``: extra secrets to redact, a JSON object from kind to
    regular expression (e.g. ``{"ticket": "TCK-[0-9]{8}"}``), replaced by
    ``[REDACTED:<kind>]``. The built-in families are always redacted. Empty by default."""

    serve_host: str = "127.0.0.1"
    """``OTEL_DIARY_SERVE_HOST``: the address ``otel-diary serve`` listens on; 127.0.0.1
    by default (``0.0.0.0`` to take traffic from other machines)."""
    serve_http_port: int = Field(4318, ge=0, le=65535)
    """``OTEL_DIARY_SERVE_HTTP_PORT``: OTLP/HTTP port; 4318 by default, 0 turns it off."""
    serve_grpc_port: int = Field(4317, ge=0, le=65535)
    """``OTEL_DIARY_SERVE_GRPC_PORT``: OTLP/gRPC port; 4317 by default, 0 turns it off."""
    serve_token: SecretStr | None = None
    """``OTEL_DIARY_SERVE_TOKEN``: when set, requests must carry it as
    ``Authorization: Bearer <token>`` or ``x-api-key: <token>`` (else 401). Unset by default."""
    serve_max_body_bytes: int = Field(20 * 1024 * 1024, gt=0, le=1024 * 1024 * 1024)
    """``OTEL_DIARY_SERVE_MAX_BODY_BYTES``: largest OTLP/HTTP body after decompression
    (else 413); 20 MiB by default."""
    serve_header_timeout_s: float = Field(10.0, gt=0, le=3600)
    """``OTEL_DIARY_SERVE_HEADER_TIMEOUT_S``: an OTLP/HTTP request head not complete this
    many seconds after it began closes the connection; 10 by default."""
    serve_body_timeout_s: float = Field(30.0, gt=0, le=3600)
    """``OTEL_DIARY_SERVE_BODY_TIMEOUT_S``: an OTLP/HTTP request body that stops arriving
    for this many seconds closes the connection, and an OTLP/gRPC call whose request has
    not arrived this many seconds after it began is cancelled; 30 by default."""
    serve_max_header_bytes: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    """``OTEL_DIARY_SERVE_MAX_HEADER_BYTES``: a larger OTLP/HTTP request head is answered
    431; 64 KiB by default."""
    serve_max_connections: int = Field(1000, gt=0, le=1_000_000)
    """``OTEL_DIARY_SERVE_MAX_CONNECTIONS``: OTLP/HTTP connections open at once; past it a
    new connection closes the one that has waited longest without a request in progress
    (or is refused when every one is busy). 1000 by default."""
    serve_idle_timeout_s: float = Field(15.0, gt=0, le=3600)
    """``OTEL_DIARY_SERVE_IDLE_TIMEOUT_S``: an OTLP/HTTP connection idle between requests
    this many seconds is closed; 15 by default."""
    serve_grpc_max_message_bytes: int = Field(16 * 1024 * 1024, ge=1024,
                                              le=1024 * 1024 * 1024)
    """``OTEL_DIARY_SERVE_GRPC_MAX_MESSAGE_BYTES``: largest OTLP/gRPC request message after
    decompression (else RESOURCE_EXHAUSTED); 16 MiB by default."""
    serve_grpc_max_concurrent_rpcs: int = Field(4, gt=0, le=1024)
    """``OTEL_DIARY_SERVE_GRPC_MAX_CONCURRENT_RPCS``: OTLP/gRPC calls served at once; more
    are refused at once with RESOURCE_EXHAUSTED (retried), unread. 4 by default."""
    serve_grace_s: float = Field(10.0, ge=0, le=3600)
    """``OTEL_DIARY_SERVE_GRACE_S``: how long after a task span arrives its late child
    spans are still waited for before the diary is written; 10 by default."""
    serve_trace_timeout_s: float = Field(300.0, gt=0, le=86_400)
    """``OTEL_DIARY_SERVE_TRACE_TIMEOUT_S``: a trace idle this long without a root task
    span is forgotten (and counted); 300 by default."""
    serve_max_traces: int = Field(50_000, gt=0, le=10_000_000)
    """``OTEL_DIARY_SERVE_MAX_TRACES``: most traces assembled at once; 50000 by default."""
    serve_max_spans: int = Field(500_000, gt=0, le=100_000_000)
    """``OTEL_DIARY_SERVE_MAX_SPANS``: most spans held for assembly; 500000 by default."""
    serve_max_bytes: int = Field(256 * 1024 * 1024, gt=0)
    """``OTEL_DIARY_SERVE_MAX_BYTES``: most (estimated) bytes held for assembly; 256 MiB by
    default. At any of these bounds the receiver answers 503 with ``Retry-After``."""
    serve_max_pending: int = Field(2000, gt=0, le=10_000_000)
    """``OTEL_DIARY_SERVE_MAX_PENDING``: decided tasks allowed to wait for their diaries;
    past it requests are answered 503 with ``Retry-After``, so that the pipeline catches
    up. 2000 by default."""
    journal: str = ""
    """``OTEL_DIARY_JOURNAL``: the write-ahead journal of ``otel-diary serve``, a SQLite
    file holding every span a request was acknowledged for until its diary is written;
    a restart takes back what is left. ``<dir>/journal.sqlite3`` by default; ``off``
    turns it off (a crash then loses the tasks waiting for their diaries)."""
    journal_max_bytes: int = Field(256 * 1024 * 1024, gt=0)
    """``OTEL_DIARY_JOURNAL_MAX_BYTES``: most bytes the journal holds; past it requests
    are answered 503 with ``Retry-After`` (and counted). 256 MiB by default."""

    @field_validator("enabled", mode="before")
    @classmethod
    def _flag(cls, value: object) -> bool:
        return parse_flag(value)

    @field_validator("conventions")
    @classmethod
    def _conventions(cls, value: str) -> str:
        load_conventions(value)
        return value

    @field_validator("trace_url")
    @classmethod
    def _trace_url(cls, value: str | None) -> str | None:
        return check_trace_url_template(value) if value else None

    @field_validator("hub_url", "reflection_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        return check_base_url(value) if value and value.strip() else None

    @field_validator("store_url")
    @classmethod
    def _store_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        if value.get_secret_value().partition("://")[0] not in ("postgresql", "postgres"):
            raise ValueError("expected a postgresql:// URL")
        return value

    @field_validator("hub_api_key", "reflection_api_key")
    @classmethod
    def _header_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        check_header_value(value.get_secret_value(), "an API key")
        return value

    @field_validator("serve_token")
    @classmethod
    def _serve_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_serve_token(value.get_secret_value(), "the serve token")
        return value

    @field_validator("reflection_model")
    @classmethod
    def _model(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("redact_patterns", mode="before")
    @classmethod
    def _redact_patterns(cls, value: object) -> object:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ValueError("expected a JSON object from kind to regular expression")
        for kind, pattern in value.items():
            compile_extra(kind, pattern)
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _LenientEnvSource(settings_cls)

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
        raise ValueError(f"expected an http:// or https:// URL, got {display_url(value)!r}")
    return url


