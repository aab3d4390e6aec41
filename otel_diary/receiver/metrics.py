"""The receiver's counters and gauges in the Prometheus text format (``GET /metrics``)."""

from __future__ import annotations

import sys

from otel_diary.receiver.admission import Collector

_METRICS: tuple[tuple[str, str, str], ...] = (
    ("spans_received_total", "counter", "Spans in decoded OTLP requests, by protocol."),
    ("spans_accepted_total", "counter",
     "Spans taken into assembly (duplicates of held spans excluded)."),
    ("spans_rejected_total", "counter", "Spans refused, by reason."),
    ("requests_rejected_total", "counter", "Requests refused, by reason."),
    ("spans_dropped_total", "counter", "Spans accepted but not used, by reason."),
    ("tasks_total", "counter", "Task spans decided: root tasks go to the pipeline."),
    ("task_runs_failed_total", "counter", "Root task runs that failed (no diary)."),
    ("diaries_written_total", "counter", "Diaries delivered to the sinks."),
    ("traces_expired_total", "counter", "Traces forgotten before a root task span came."),
    ("traces_evicted_total", "counter", "Traces decided early because memory was full."),
    ("taskless_traces_evicted_total", "counter",
     "Traces holding no task span dropped to make room (their spans count as dropped)."),
    ("connections_closed_total", "counter",
     "HTTP connections the receiver closed: slow, oversized or past the cap, by reason."),
    ("errors_total", "counter", "Internal errors, by stage."),
    ("open_traces", "gauge", "Traces being assembled."),
    ("held_spans", "gauge",
     "Task spans and contributions held for assembly or awaiting the pipeline."),
    ("held_bytes", "gauge", "Estimated bytes held for assembly."),
    ("pending_diaries", "gauge", "Root task spans waiting for the pipeline."),
    ("journal_bytes", "gauge", "Bytes held in the write-ahead journal."),
    ("journal_commits_total", "counter", "Group commits of the journal."),
    ("deliveries_total", "counter",
     "Diaries the knowledge hub or the store took, refused, or was retried for, by sink."),
    ("spooled_diaries", "gauge", "Diaries waiting in a sink's spool for delivery, by sink."),
)


def _samples(collector: Collector) -> dict[str, list[tuple[str, int]]]:
    store = collector.store
    stats = collector.pipeline.stats
    samples: dict[str, list[tuple[str, int]]] = {name: [] for name, _, _ in _METRICS}
    for (name, label), value in collector.counters.items():
        metric, _, key = name.partition(":")
        if metric in samples:
            samples[metric].append((f'{key}="{label}"' if key else "", value))
    samples["spans_accepted_total"].append(("", store.accepted))
    samples["spans_dropped_total"] += [('reason="duplicate"', store.duplicates),
                                       ('reason="late"', store.late),
                                       ('reason="taskless_evicted"', store.taskless_dropped),
                                       ('reason="trace_links"', store.links_dropped)]
    samples["tasks_total"] += [('kind="root"', store.root_tasks),
                               ('kind="nested"', store.nested_tasks)]
    samples["task_runs_failed_total"].append(("", stats.failed_runs))
    samples["diaries_written_total"].append(("", stats.diaries))
    samples["traces_expired_total"].append(('reason="rootless"', store.rootless_expired))
    samples["traces_evicted_total"].append(("", store.evicted))
    samples["taskless_traces_evicted_total"].append(("", store.evicted_taskless))
    samples["errors_total"] += [('stage="sink"', stats.sink_errors),
                                ('stage="pipeline"', stats.pipeline_errors),
                                ('stage="reflection"', stats.reflection_fallbacks),
                                ('stage="assembly"', int(collector.counters.get("worker_errors")))]
    samples["open_traces"].append(("", len(store)))
    samples["held_spans"].append(("", store.spans + collector.pending_diaries))
    samples["held_bytes"].append(("", max(store.bytes, 0)))
    samples["pending_diaries"].append(("", collector.pending_diaries))
    hub = sys.modules.get("otel_diary.sinks.hub.sink")  # not loaded: no hub or store sink
    for sink in collector.pipeline.sinks:
        if hub is not None and isinstance(sink, hub.HubSink):
            kind, delivery = f'sink="{sink.kind}"', sink.stats
            samples["deliveries_total"] += [
                (f'{kind},outcome="delivered"', delivery.delivered),
                (f'{kind},outcome="refused"', delivery.rejected),
                (f'{kind},outcome="retried"', delivery.retries)]
            samples["spooled_diaries"].append((kind, sink.spool.waiting))
    journal = collector.journal
    if journal is not None:
        samples["journal_bytes"].append(("", journal.bytes))
        samples["journal_commits_total"].append(("", journal.stats.commits))
        samples["errors_total"].append(('stage="journal"', journal.stats.errors))
    return samples


def metrics_text(collector: Collector, prefix: str = "otel_diary_") -> str:
    """The collector's counters and gauges in the Prometheus text exposition format."""
    samples = _samples(collector)
    lines: list[str] = []
    for name, kind, help_text in _METRICS:
        lines.append(f"# HELP {prefix}{name} {help_text}")
        lines.append(f"# TYPE {prefix}{name} {kind}")
        for labels, value in samples[name]:
            lines.append(f"{prefix}{name}{{{labels}}} {value}" if labels
                         else f"{prefix}{name} {value}")
    return "\n".join(lines) + "\n"


def metric_values(text: str) -> dict[str, float]:
    """``metrics_text`` parsed back: ``name{labels}`` -> value (for tests and tools)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values
