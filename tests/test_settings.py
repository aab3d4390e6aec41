"""Settings: argument over environment over default; bad input handled as promised."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from otel_diary import Settings


def test_defaults(tmp_path: Path) -> None:
    """Disabled by default; the root is under XDG_DATA_HOME."""
    settings = Settings()
    assert settings.enabled is False
    assert settings.root == tmp_path / "xdg-data" / "otel-diary"


@pytest.mark.parametrize(("value", "enabled"), [
    ("1", True), ("true", True), ("YES", True), ("on", True),
    ("0", False), ("false", False), ("", False), ("off", False),
])
def test_enabled_flag_values(monkeypatch: pytest.MonkeyPatch, value: str,
                             enabled: bool) -> None:
    """KB_DIARIES_ENABLED accepts the usual truthy and falsy spellings."""
    monkeypatch.setenv("KB_DIARIES_ENABLED", value)
    assert Settings().enabled is enabled


def test_environment_then_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment overrides defaults and a constructor argument overrides both."""
    monkeypatch.setenv("OTEL_DIARY_QUEUE_SIZE", "12")
    monkeypatch.setenv("OTEL_DIARY_DIR", "/srv/kb")
    assert Settings().queue_size == 12
    assert Settings().root == Path("/srv/kb")
    assert Settings(queue_size=5).queue_size == 5


@pytest.mark.parametrize(("variable", "value", "field", "default"), [
    ("OTEL_DIARY_QUEUE_SIZE", "lots", "queue_size", 8192),
    ("OTEL_DIARY_QUEUE_SIZE", "-3", "queue_size", 8192),
    ("KB_DIARIES_ENABLED", "perhaps", "enabled", False),
    ("OTEL_DIARY_TRACE_TTL_S", "nan-ish", "trace_ttl_s", 3600.0),
])
def test_bad_environment_value_warns_and_falls_back(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        variable: str, value: str, field: str, default: object) -> None:
    """A bad environment value logs a warning naming the variable and uses the default."""
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="otel_diary"):
        settings = Settings()
    assert getattr(settings, field) == default
    assert any(variable in r.getMessage() for r in caplog.records)


def test_bad_argument_raises_value_error() -> None:
    """A bad value in code raises ValueError."""
    with pytest.raises(ValueError):
        Settings(max_traces=0)
    with pytest.raises(ValueError):
        Settings(no_such_setting=1)  # type: ignore[call-arg]


def test_only_kb_diaries_enabled_turns_diaries_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unrelated ``ENABLED`` variable turns nothing on; the keyword ``enabled`` does."""
    monkeypatch.delenv("KB_DIARIES_ENABLED", raising=False)
    monkeypatch.setenv("ENABLED", "1")
    assert not Settings().enabled
    assert Settings(enabled=True).enabled
