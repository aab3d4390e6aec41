"""Sources: spans in, :class:`~otel_diary.record.SpanRecord` out.

The in-process ``DiarySpanProcessor`` (``processor``; attached by ``attach``, the
``diary`` exporter and the auto-instrumentation hooks), and offline replay of OTLP files.
Only sources (and the receiver) know OpenTelemetry or OTLP types."""
