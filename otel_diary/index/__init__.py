"""The index: diary documents in; search hits, lookups and related ids out.

``documents`` (entries and error signatures), ``query`` (what a person types -> FTS5
terms), ``store`` (the SQLite FTS5 database beside the folder) and ``writing`` (its
write transactions), ``stages`` (the pipeline listener and related-diary finder that use
it)."""
