"""The pipeline: ``Ready`` in, a rendered :class:`~otel_diary.Diary` to every sink out.

classify (``TaskRun | None``) -> redact -> reflect (``llm`` or the stub) -> render; ``core``
runs the stages in that order for every source."""
