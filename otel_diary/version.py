"""The version of otel-diary (one place, read by the package and its HTTP clients)."""

__version__ = "0.1.0"
