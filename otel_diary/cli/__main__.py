"""``python -m otel_diary.cli``: the ``otel-diary`` command."""

import sys

from otel_diary.cli import main

sys.exit(main())
