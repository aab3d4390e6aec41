"""Trace links: a URL template (``OTEL_DIARY_TRACE_URL``) -> the URL of one task span's trace.

A template names its trace backend's view of a trace with the placeholders
``{trace_id}`` (32 hex digits) and ``{span_id}`` (16 hex digits); literal braces are
written ``{{`` and ``}}``. Anything else in braces is rejected when the template is set.
"""

from __future__ import annotations

import string

PLACEHOLDERS = frozenset({"trace_id", "span_id"})


def check_trace_url_template(template: str) -> str:
    """``template`` unchanged when it only uses the known placeholders, else ``ValueError``."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:  # a lone "{" or "}"
        raise ValueError(f"trace URL template {template!r}: {exc} "
                         "(write literal braces as '{{' and '}}')") from None
    for _literal, name, spec, conversion in fields:
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            raise ValueError(f"trace URL template {template!r} has an unknown placeholder "
                             f"{{{name}}}; use {{trace_id}} and {{span_id}}")
        if spec or conversion:
            raise ValueError(f"trace URL template {template!r}: write {{{name}}} without "
                             "a conversion or format spec")
    return template


def trace_url(template: str, trace_id_hex: str, span_id_hex: str) -> str:
    """The URL ``template`` gives for one span."""
    return template.format(trace_id=trace_id_hex, span_id=span_id_hex)
