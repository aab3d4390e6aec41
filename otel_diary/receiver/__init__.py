"""The collector-side source: OTLP/HTTP and OTLP/gRPC requests in, batches to assembly.

``decode`` (the only door to the native C reader), ``admission`` (bounds,
load shedding, the timer and pipeline runners), ``http``, ``grpc``, ``metrics`` and the
``service`` that runs them for ``otel-diary serve``."""
