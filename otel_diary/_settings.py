"""Settings: constructor argument, then environment, then default.

``KB_DIARIES_ENABLED`` switches diaries on; everything else is ``OTEL_DIARY_*``. A bad
environment value logs a warning naming the variable and falls back to the default; a
bad argument in code raises ``ValueError`` (pydantic's ``ValidationError`` is one).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

logger = logging.getLogger("otel_diary")

ENV_PREFIX = "OTEL_DIARY_"
KB_DIARIES_ENABLED = "KB_DIARIES_ENABLED"
"""Unset or falsy (``0``, ``false``, ``no``, ``off``, empty): no processing at all."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def default_dir() -> Path:
    """``$XDG_DATA_HOME/otel-diary``, i.e. ``~/.local/share/otel-diary`` by default."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "otel-diary"


def parse_flag(value: object) -> bool:
    """``KB_DIARIES_ENABLED``-style truthiness; anything unrecognized raises ``ValueError``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"expected one of {sorted(_TRUE | _FALSE)}, got {value!r}")


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
                logger.warning("ignoring %s=%r: %s; using the default", variable, value,
                               _first_error(exc))
                del data[key]
        return data


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

    enabled: bool = Field(False, validation_alias=AliasChoices(KB_DIARIES_ENABLED, "enabled"))
    """``KB_DIARIES_ENABLED``: diaries are written only when truthy."""
    dir: Path | None = None
    """``OTEL_DIARY_DIR``: knowledge-base root; diaries land in ``<dir>/diaries/agents/``.
    Defaults to ``$XDG_DATA_HOME/otel-diary`` (``~/.local/share/otel-diary``)."""
    queue_size: int = Field(8192, gt=0, le=1_000_000)
    """``OTEL_DIARY_QUEUE_SIZE``: ended spans waiting for the worker; over it spans drop."""
    max_traces: int = Field(4096, gt=0, le=1_000_000)
    """``OTEL_DIARY_MAX_TRACES``: open traces whose child spans are being summarized."""
    trace_ttl_s: float = Field(3600.0, gt=0)
    """``OTEL_DIARY_TRACE_TTL_S``: an idle trace is forgotten after this many seconds."""
    pending_timeout_s: float = Field(30.0, gt=0)
    """``OTEL_DIARY_PENDING_TIMEOUT_S``: how long a task span waits for its parent to end."""
    schedule_delay_ms: int = Field(200, gt=0, le=60_000)
    """``OTEL_DIARY_SCHEDULE_DELAY_MS``: how often the worker wakes to process spans."""
    shutdown_timeout_ms: int = Field(10_000, ge=0, le=600_000)
    """``OTEL_DIARY_SHUTDOWN_TIMEOUT_MS``: how long shutdown waits for diaries to land."""

    @field_validator("enabled", mode="before")
    @classmethod
    def _flag(cls, value: object) -> bool:
        return parse_flag(value)

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
