"""The optional C extension; everything else is declared in pyproject.toml.

``otel_diary.receiver._otlpscan`` speeds up the OTLP receiver's decoding. Without a C compiler the
install goes on without it and the receiver uses its pure-Python decoder. Its sources are in
``otel_diary/receiver/_otlpscan_c/`` (a folder named ``_otlpscan`` would be imported in place of
a missing extension, as a namespace package); the Makefile builds the same sources with sanitizers.
"""

from setuptools import Extension, setup

SOURCES = "otel_diary/receiver/_otlpscan_c/"

setup(ext_modules=[Extension(
    "otel_diary.receiver._otlpscan",
    [SOURCES + name for name in ("module.c", "scan.c", "values.c", "schema.c", "wire.c")],
    depends=[SOURCES + "otlpscan.h"],
    optional=True,
)])
