"""Which span attributes carry which fact of a diary.

A :class:`Conventions` maps every fact of the design's attribute table to the attribute
names that may carry it (first present wins) and says what marks a task span.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Conventions:
    """Attribute names per fact; each fact lists candidates, the first one present wins."""

    task_id: tuple[str, ...] = ("orchestrator.task.id",)
    title: tuple[str, ...] = ("orchestrator.task.title",)
    trigger: tuple[str, ...] = ("orchestrator.task.trigger",)
    workflow: tuple[str, ...] = ("orchestrator.workflow.id",)
    agent: tuple[str, ...] = ("orchestrator.agent.name", "gen_ai.agent.name")
    route: tuple[str, ...] = ("orchestrator.route",)
    model: tuple[str, ...] = ("gen_ai.request.model", "gen_ai.response.model")
    tokens: tuple[str, ...] = ("orchestrator.tokens",)
    input_tokens: tuple[str, ...] = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    output_tokens: tuple[str, ...] = (
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
    )
    latency_ms: tuple[str, ...] = ("orchestrator.latency_ms",)
    file_operations: tuple[str, ...] = ("orchestrator.file_operations",)
    build_attempts: tuple[str, ...] = ("orchestrator.build_verify.attempts",)
    build_passed: tuple[str, ...] = ("orchestrator.build_verify.passed",)
    stderr_tail: tuple[str, ...] = ("orchestrator.build_verify.stderr_tail",)
    escalations: tuple[str, ...] = ("orchestrator.escalation_count",)
    repair_no_files: tuple[str, ...] = ("orchestrator.repair_no_files",)
    related: tuple[str, ...] = ("orchestrator.related",)
    operation: tuple[str, ...] = ("gen_ai.operation.name",)
    error_type: tuple[str, ...] = ("error.type",)
    agent_resource: tuple[str, ...] = ("service.name",)

    task_marker: str = "orchestrator.task.id"
    """The attribute whose presence marks a task span."""
    task_marker_values: frozenset[str] | None = None
    """When set, the marker attribute must also hold one of these values."""
    tool_operation: str = "execute_tool"
    recover_on_child_errors: bool = False
    """When true, a successful task whose child spans failed counts as recovered."""

    child_keys: frozenset[str] = field(init=False)
    """Attributes that make a non-task span worth summarizing for its task."""

    def __post_init__(self) -> None:
        keys = {
            *self.input_tokens,
            *self.output_tokens,
            *self.model,
            *self.operation,
            *self.error_type,
        }
        object.__setattr__(self, "child_keys", frozenset(keys))

    def is_task(self, attributes: object) -> bool:
        """True when ``attributes`` (a mapping) marks a task span."""
        try:
            value = attributes[self.task_marker]  # type: ignore[index]
        except (KeyError, TypeError):
            return False
        if self.task_marker_values is None:
            return value is not None and value != ""
        return isinstance(value, str) and value in self.task_marker_values


ORCHESTRATOR = Conventions()
