"""The pipeline: ``Ready`` in, a rendered :class:`~otel_diary.Diary` to every sink out.

classify (``TaskRun | None``) -> redact -> reflect (``llm`` or the stub) -> render; ``core``
runs the stages in that order for every source. The knowledge base's folders are named
here, where sinks and readers find them without loading the renderer."""

KB_FOLDER = "diaries"
"""The folder of the knowledge base's documents (diaries and lessons) under its root."""
DIARY_ROOT = f"{KB_FOLDER}/agents"
LESSON_ROOT = f"{KB_FOLDER}/lessons"
"""Where lessons live: one per error signature, ``<root>/diaries/lessons/<signature>.md``."""
