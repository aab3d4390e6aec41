"""The optional C extension; everything else is declared in pyproject.toml.

``otel_diary.receiver._otlpscan`` speeds up the OTLP receiver's decoding. Without a C compiler the
install goes on without it and the receiver uses its pure-Python decoder.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("otel_diary.receiver._otlpscan", ["otel_diary/receiver/_otlpscan.c"],
                             optional=True)])
