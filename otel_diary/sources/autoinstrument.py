"""Zero-code attach: the ``opentelemetry-instrument`` hook and the ``diary`` instrumentor.

``post_instrument`` (entry point group ``opentelemetry_post_instrument``) runs after the
SDK is configured and adds the diary processor to the global ``TracerProvider`` when
``KB_DIARIES_ENABLED`` is truthy. :class:`DiaryInstrumentor` (group
``opentelemetry_instrumentor``, name ``diary``) does the same for declarative
configuration's ``instrumentation/development.python.diary``. Neither ever raises.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from otel_diary.switch import enabled_in_environment

if TYPE_CHECKING:
    from otel_diary.sources.processor import DiarySpanProcessor

logger = logging.getLogger("otel_diary")


def post_instrument(*_: Any, **__: Any) -> None:
    """Add the diary processor to the global provider when diaries are enabled.

    An exception here would make ``opentelemetry-instrument`` abandon the rest of its
    set-up, so every failure is logged instead.
    """
    try:
        if enabled_in_environment():  # off, nothing more is loaded
            from otel_diary.sources.attach import attach

            attach(trace.get_tracer_provider())
    except Exception:
        logger.exception("otel-diary could not attach to the global TracerProvider")


class DiaryInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Attaches the diary processor to a provider (default: the global one).

    ``instrument(**options)`` takes :class:`otel_diary.Settings` fields (and
    ``tracer_provider``); ``KB_DIARIES_ENABLED`` must be truthy. Instrumenting again, or
    alongside another mechanism, attaches nothing more.
    """

    _attached: tuple[Any, DiarySpanProcessor] | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def instrument(self, **kwargs: Any) -> Any:
        if self.is_instrumented_by_opentelemetry:
            return None  # several mechanisms may ask; one attach is enough
        return super().instrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        try:
            provider = kwargs.pop("tracer_provider", None) or trace.get_tracer_provider()
            if not kwargs and not enabled_in_environment():
                return  # off: nothing more is loaded
            from otel_diary.sources.attach import attach_once
            from otel_diary.wiring import settings_from

            settings = settings_from(None, kwargs)
            if not settings.enabled:
                return
            engine, created = attach_once(provider, settings=settings)
            if created and engine is not None:
                self._attached = (provider, engine)
        except Exception:
            logger.exception("otel-diary instrumentor could not attach")

    def _uninstrument(self, **kwargs: Any) -> None:
        attached, self._attached = self._attached, None
        if attached is not None:
            from otel_diary.sources.attach import detach

            detach(*attached)
