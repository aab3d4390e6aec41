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
    assert settings.pending_timeout_s == 600  # longer than an agent's run lasts


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
    ("OTEL_DIARY_TRACE_TTL_S", "inf", "trace_ttl_s", 3600.0),
    ("OTEL_DIARY_QUEUE_SIZE", "12.5", "queue_size", 8192),
    ("OTEL_DIARY_QUEUE_SIZE", "", "queue_size", 8192),
    ("OTEL_DIARY_INDEX", "maybe", "index", True),
    ("OTEL_DIARY_REDACT_PATTERNS", '{"ticket": "("}', "redact_patterns", {}),
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
        Settings(no_such_setting=1)


def test_only_kb_diaries_enabled_turns_diaries_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unrelated ``ENABLED`` variable turns nothing on; the keyword ``enabled`` does."""
    monkeypatch.delenv("KB_DIARIES_ENABLED", raising=False)
    monkeypatch.setenv("ENABLED", "1")
    assert not Settings().enabled
    assert Settings(enabled=True).enabled


@pytest.mark.parametrize(("variable", "value", "field", "expected"), [
    ("OTEL_DIARY_QUEUE_SIZE", " 12 ", "queue_size", 12),
    ("OTEL_DIARY_QUEUE_SIZE", "12.0", "queue_size", 12),
    ("otel_diary_queue_size", "7", "queue_size", 7),
    ("OTEL_DIARY_HUB_TIMEOUT_S", "2.5", "hub_timeout_s", 2.5),
    ("OTEL_DIARY_INDEX", "off", "index", False),
    ("OTEL_DIARY_INDEX", "Yes", "index", True),
    ("OTEL_DIARY_DIR", "/srv/kb", "dir", Path("/srv/kb")),
    ("OTEL_DIARY_REFLECTION_MODEL", "  ", "reflection_model", None),
    ("OTEL_DIARY_REDACT_PATTERNS", '{"ticket": "TCK-[0-9]{8}"}', "redact_patterns",
     {"ticket": "TCK-[0-9]{8}"}),
])
def test_environment_values_are_read_as_text_comes(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str,
        expected: object) -> None:
    """Numbers, flags, paths and JSON arrive as strings; names in any case."""
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(), field) == expected


def test_a_bad_argument_names_the_setting_and_never_a_secret() -> None:
    """The message says which setting, what was wrong and what was given, except a
    secret's value."""
    with pytest.raises(ValueError, match=r"^queue_size: must be greater than 0 \(got 0\)$"):
        Settings(queue_size=0)
    with pytest.raises(ValueError, match=r"^hub_timeout_s: expected a number"):
        Settings(hub_timeout_s="soon")
    with pytest.raises(ValueError) as caught:
        Settings(hub_api_key="sk-live-part\nsecret-part")
    assert str(caught.value).startswith("hub_api_key: ")
    assert "secret-part" not in str(caught.value) and "sk-live" not in str(caught.value)
    with pytest.raises(ValueError) as caught:
        Settings(store_url="mysql://user:hunter2@db/kb")
    assert "hunter2" not in str(caught.value)


def test_replace_applies_and_checks_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    """replace() keeps every other value (the environment is not read again) and checks
    what it is given."""
    base = Settings(queue_size=5, hub_api_key="key-123456")
    monkeypatch.setenv("OTEL_DIARY_QUEUE_SIZE", "9")
    changed = base.replace(max_traces=10)
    assert (changed.queue_size, changed.max_traces) == (5, 10)
    assert changed.hub_api_key == base.hub_api_key
    assert changed == Settings(queue_size=5, hub_api_key="key-123456", max_traces=10)
    with pytest.raises(ValueError, match="max_traces"):
        base.replace(max_traces=0)


def test_a_folder_given_from_home_is_under_home(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """``~/kb`` in the environment or an argument is the home folder's ``kb``, not a
    folder named ``~`` in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OTEL_DIARY_DIR", "~/kb")
    monkeypatch.setenv("OTEL_DIARY_SPOOL_DIR", "~/spool")
    settings = Settings()
    assert settings.root == tmp_path / "kb"
    assert settings.spool_dir == tmp_path / "spool"
    assert Settings(dir="~/other").root == tmp_path / "other"


def test_an_empty_folder_setting_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """``OTEL_DIARY_DIR=`` left empty (by a template, say) is the default folder, not the
    working directory."""
    monkeypatch.setenv("OTEL_DIARY_DIR", " ")
    monkeypatch.setenv("OTEL_DIARY_SPOOL_DIR", "")
    settings = Settings()
    assert settings.dir is None and settings.spool_dir is None
    assert settings.root == Settings(dir=None).root != Path(".")
