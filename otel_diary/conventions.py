"""Which span attributes carry which fact of a diary, and the profiles that name them.

A :class:`Conventions` maps every fact of the design's attribute table to the attribute
names that may carry it (first present wins) and says what marks a task span.
``OTEL_DIARY_CONVENTIONS`` names one: a built-in profile (``orchestrator``, ``genai``,
``openinference``, ``claude-code``, or ``auto``, which tells the first three apart per run) or
the path of a TOML or YAML file that starts from a profile, renames any fact and says
what marks a task span. Every key of a file is checked: an unknown key or a wrong type is
an error naming it.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_diary.errors import ConventionsError

FLAT_MESSAGES = 4
"""How many of a model call's flattened messages are read: in a run's first call, the first
user message follows a system prompt at most."""


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
    tool_name: tuple[str, ...] = ()
    """Of a tool call's span: the tool's name (listed with its count under "What was done")."""
    child_agent: tuple[str, ...] = ()
    """Of a span under the task (a nested agent): the agent's name, when the task has none."""
    input_messages: tuple[str, ...] = ()
    """The messages a span was given, when the instrumentation captured content: the first
    user message titles a run whose task span has no title."""
    output_messages: tuple[str, ...] = ()
    """What a span answered, when captured: the first sentence of the run's final answer."""
    tool_arguments: tuple[str, ...] = ()
    """Of a tool call's span, when captured: what the tool was given. A run that got past a
    failed call says what the failed call and the one that succeeded after it were given."""
    response_id: tuple[str, ...] = ()
    """Of a model call's span: the id of the model's response. An agent's span reporting
    the usage of a response beside the model call's span (OpenLIT's LangGraph node) does
    not count it again; a task span whose own usage is that of one response under it is
    not a run's total."""
    tool_result: tuple[str, ...] = ()
    """Of a tool call's span, when captured: what the tool returned. A result that hands
    the call's error back to the model (Google ADK's ``ReflectAndRetryToolPlugin``) makes
    it a failed call, though its span says it succeeded."""
    flat_input_messages: tuple[str, ...] = ()
    """Where an instrumentation flattens a model call's messages into attributes, one per
    field (OpenInference's ``llm.input_messages.<i>.message.role`` and ``.content``): their
    prefixes. Of the first :data:`FLAT_MESSAGES` messages, the first user message of the
    call that ended first titles a run that nothing above names (LlamaIndex records an
    agent's run and its steps with no message in their input)."""
    flat_output_messages: tuple[str, ...] = ()
    """The same of what a model call answered: the last assistant message with text of the
    call that ended last is the final answer when nothing above says one."""

    task_marker: str = "orchestrator.task.id"
    """The attribute whose presence marks a task span."""
    task_marker_values: frozenset[str] | None = None
    """When set, the marker attribute must also hold one of these values."""
    tool_operation: str = "execute_tool"
    recover_on_child_errors: bool = False
    """When true, a successful task whose child spans failed counts as recovered."""
    agent_run_values: frozenset[str] = frozenset()
    """Values of the marker that make a child span an agent's own run (not a workflow or
    chain around it): when the last such run under a task failed, so did the task,
    whatever its own status (some instrumentations end the span around a failed agent
    OK). With ``recover_on_child_errors`` only."""
    agent_from_span_name: bool = False
    """When true, a task span's name names its agent when no attribute does and the
    resource's ``service.name`` is the SDK's stand-in ``unknown_service…`` (OpenInference
    names the root span after the graph or agent: ``LangGraph``, ``qa``, smolagents'
    ``builder.run`` and a CrewAI crew's ``research.kickoff``, whose ``.run`` and
    ``.kickoff`` are left out, as is the UUID of an unnamed crew's ``Crew_<uuid>``)."""
    profiles: tuple[Conventions, ...] = ()
    """Of ``auto`` only: the profiles it tells apart. A span is a task span when one of
    them marks it so, and is read with the first that does; child spans are read under
    any of their names."""

    child_keys: frozenset[str] = field(init=False)
    """Attributes that make a non-task span worth summarizing for its task."""
    task_markers: frozenset[str] = field(init=False)
    """Every attribute that can mark a task span (one, but for ``auto``)."""
    tool_operations: frozenset[str] = field(init=False)
    """Every operation value that makes a span a tool call."""
    usage_keys: frozenset[str] = field(init=False)
    """The token usage attributes (input and output) a child span may report."""
    content_keys: frozenset[str] = field(init=False)
    """The captured content (messages, tool arguments) and response ids a contributing
    span may carry (they alone contribute nothing)."""
    flat_inputs: tuple[tuple[str, str], ...] = field(init=False)
    """The role and content attributes of each of the first :data:`FLAT_MESSAGES` messages
    under each ``flat_input_messages`` prefix."""
    flat_outputs: tuple[tuple[str, str], ...] = field(init=False)
    """The same of ``flat_output_messages``."""

    def __post_init__(self) -> None:
        keys = {
            *self.input_tokens,
            *self.output_tokens,
            *self.model,
            *self.operation,
            *self.error_type,
            *self.tool_name,
            *self.child_agent,
        }
        object.__setattr__(self, "child_keys", frozenset(keys))
        object.__setattr__(self, "usage_keys",
                           frozenset((*self.input_tokens, *self.output_tokens)))
        flat = {"flat_inputs": self.flat_input_messages,
                "flat_outputs": self.flat_output_messages}
        for name, prefixes in flat.items():
            object.__setattr__(self, name, tuple(
                (f"{prefix}.{at}.message.role", f"{prefix}.{at}.message.content")
                for prefix in prefixes for at in range(FLAT_MESSAGES)))
        object.__setattr__(self, "content_keys", frozenset(
            (*self.input_messages, *self.output_messages, *self.tool_arguments,
             *self.tool_result, *self.response_id,
             *(key for pair in (*self.flat_inputs, *self.flat_outputs) for key in pair)))
            - keys)
        object.__setattr__(self, "task_markers", frozenset(
            {self.task_marker, *(profile.task_marker for profile in self.profiles)}))
        object.__setattr__(self, "tool_operations", frozenset(
            {self.tool_operation, *(profile.tool_operation for profile in self.profiles)}))

    def is_task(self, attributes: object) -> bool:
        """True when ``attributes`` (a mapping) marks a task span."""
        if self.profiles:
            return any(profile.is_task(attributes) for profile in self.profiles)
        try:
            value = attributes.get(self.task_marker)  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            return False
        if self.task_marker_values is None:
            return value is not None and value != ""
        return isinstance(value, str) and value in self.task_marker_values

    def contributes(self, keys: Iterable[str], is_error: bool) -> bool:
        """Whether a span that is no task span, with attributes of ``keys``, adds to its
        task's diary: it failed, or has a key of what spans contribute (captured messages
        alone, or a task marker that marks no task, do not)."""
        return is_error or not self.child_keys.isdisjoint(keys)

    def is_agent_run(self, attributes: object) -> bool:
        """True when ``attributes`` (a mapping) mark an agent's own run (see
        ``agent_run_values``)."""
        if self.profiles:
            return any(profile.is_agent_run(attributes) for profile in self.profiles)
        if not self.agent_run_values:
            return False
        try:
            return attributes.get(self.task_marker) in self.agent_run_values  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # not a mapping, or an unhashable value
            return False

    def profile_for(self, attributes: object) -> Conventions:
        """The conventions a task span with ``attributes`` is read with: these, or for
        ``auto`` the first of its profiles that marks the span a task span."""
        for profile in self.profiles:
            if profile.is_task(attributes):
                return profile
        return self


ORCHESTRATOR = Conventions()


GENAI = Conventions(
    task_id=("gen_ai.conversation.id",),
    workflow=("gen_ai.workflow.name",),
    agent=("gen_ai.agent.name", "gen_ai.agent.id"),
    route=("gen_ai.provider.name", "gen_ai.system"),
    model=("gen_ai.request.model", "gen_ai.response.model"),
    tokens=(),
    task_marker="gen_ai.operation.name",
    task_marker_values=frozenset({"invoke_agent", "invoke_workflow",
                                  "invoke_swarm", "invoke_graph"}),
    recover_on_child_errors=True,
    agent_run_values=frozenset({"invoke_agent"}),
    tool_name=("gen_ai.tool.name",),
    child_agent=("gen_ai.agent.name",),
    input_messages=("gen_ai.input.messages",),
    output_messages=("gen_ai.output.messages",),
    tool_arguments=("gen_ai.tool.call.arguments",),
    tool_result=("gen_ai.tool.call.result",),
    response_id=("gen_ai.response.id",),
)
"""OpenTelemetry GenAI conventions: an ``invoke_agent``/``invoke_workflow`` span (or a Strands
Agents swarm or graph: ``invoke_swarm``, ``invoke_graph``) whose parent is not one is the
task; tokens and models come from its child spans; a run that succeeded after failed child
spans is recovered. The task id is ``gen_ai.conversation.id``, else the span id. Current
and older attribute names are read (``gen_ai.provider.name`` or ``gen_ai.system``;
``gen_ai.usage.input_tokens`` or ``gen_ai.usage.prompt_tokens``).
Tools are named by ``gen_ai.tool.name``; captured messages (``gen_ai.input.messages``,
``gen_ai.output.messages``) give the title and the final answer, captured tool
arguments (``gen_ai.tool.call.arguments``) what a failed call and a later successful one
were given, and a captured result (``gen_ai.tool.call.result``) that hands a call's error
back to the model makes that call a failed one."""

OPENINFERENCE = Conventions(
    task_id=("session.id",),
    workflow=(),
    agent=("agent.name",),
    route=("llm.provider", "llm.system"),
    model=("llm.model_name",),
    tokens=("llm.token_count.total",),
    input_tokens=("llm.token_count.prompt",),
    output_tokens=("llm.token_count.completion",),
    operation=("openinference.span.kind",),
    task_marker="openinference.span.kind",
    task_marker_values=frozenset({"AGENT", "CHAIN"}),
    tool_operation="TOOL",
    recover_on_child_errors=True,
    agent_run_values=frozenset({"AGENT"}),
    agent_from_span_name=True,
    tool_name=("tool.name",),
    child_agent=("agent.name",),
    input_messages=("input.value",),
    output_messages=("output.value",),
    tool_arguments=("input.value",),
    flat_input_messages=("llm.input_messages",),
    flat_output_messages=("llm.output_messages",),
)
"""OpenInference conventions (Arize's instrumentations for OpenAI, OpenAI Agents, LangChain
and others): the outermost ``AGENT`` or ``CHAIN`` span (``openinference.span.kind``) is the
task, so an OpenAI Agents run (an ``AGENT`` trace root) and a LangGraph run (a ``CHAIN``
root) are one diary each; ``TOOL`` children are tool calls; model and tokens come from the
``LLM`` children (``llm.model_name``, ``llm.token_count.prompt`` + ``.completion``; a task
span's own ``llm.token_count.total`` wins). The task id is ``session.id``, else the span id;
a run that succeeded after failed child spans is recovered. Tools are named by
``tool.name``, a nested ``AGENT``'s ``agent.name`` names the agent, and captured content
(``input.value``, ``output.value``) gives the title and the final answer (and, of a
``TOOL`` span, what the tool was given), else a model call's messages do
(``llm.input_messages.<i>.message.*``, ``llm.output_messages.<i>.message.*``)."""

CLAUDE_CODE = Conventions(
    task_id=("session.id",),
    title=("user_prompt",),
    workflow=(),
    agent=(),
    route=(),
    model=("model", "gen_ai.request.model"),
    tokens=(),
    input_tokens=("input_tokens",),
    output_tokens=("output_tokens",),
    latency_ms=("interaction.duration_ms",),
    operation=(),
    error_type=("error_class", "error.type"),
    tool_name=("tool_name",),
    tool_arguments=("full_command",),
    task_marker="user_prompt_length",
    recover_on_child_errors=True,
)
"""Claude Code's traces (beta), written from its documented span attributes: each user
prompt is a ``claude_code.interaction`` span (marked by ``user_prompt_length``; the prompt
itself, ``user_prompt``, only with ``OTEL_LOG_USER_PROMPTS=1``) over
``claude_code.llm_request`` spans (``model``, bare ``input_tokens`` / ``output_tokens``)
and ``claude_code.tool`` spans (``tool_name``: with no operation attribute, a span naming a
tool is a tool call), which failed when their ``claude_code.tool.execution`` did (its
``error_class``, such as ``ShellError``, names the error). A Bash call's command
(``full_command``, with ``OTEL_LOG_TOOL_DETAILS=1``) is what it was given. The task id is
``session.id``; the agent is the resource's ``service.name``."""

FACTS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(Conventions)
    if f.init and f.name not in ("task_marker", "task_marker_values", "tool_operation",
                                 "recover_on_child_errors", "agent_run_values",
                                 "agent_from_span_name", "profiles")
)
"""The facts a mapping file may rename under ``[attributes]``."""


def _detecting(*profiles: Conventions) -> Conventions:
    """Conventions that tell ``profiles`` apart per task span (see ``profiles``)."""
    names = {fact: tuple(dict.fromkeys(name for profile in profiles
                                       for name in getattr(profile, fact)))
             for fact in FACTS}
    return Conventions(**names, task_marker=profiles[0].task_marker,
                       task_marker_values=profiles[0].task_marker_values,
                       tool_operation=profiles[0].tool_operation,
                       recover_on_child_errors=True, agent_run_values=frozenset(),
                       agent_from_span_name=False, profiles=profiles)


TRACELOOP_RUNS = dataclasses.replace(GENAI, task_marker="traceloop.span.kind",
                                     task_marker_values=frozenset({"workflow", "agent"}),
                                     agent_run_values=frozenset({"agent"}))
"""Of ``auto`` only: ``genai`` read from traceloop's own marks (``traceloop.span.kind``),
whose OpenAI Agents SDK instrumentation puts a run's agents under a ``workflow`` span with
no GenAI operation: that span is the run, so a handoff is one diary. Alone it would miss
the ``invoke_agent`` spans an app opens itself."""

WORKFLOW_RUNS = dataclasses.replace(GENAI, task_marker="workflow.name", task_marker_values=None,
                                    agent_run_values=frozenset(),
                                    workflow=(*GENAI.workflow, "workflow.name"))
"""Of ``auto`` only: ``genai`` read from Microsoft Agent Framework's workflow runs (the
``workflow.run`` span, marked by its ``workflow.name``, with no GenAI operation): that span
is the run, so a workflow of agents is one diary, whose workflow is that name. Any span
with a ``workflow.name`` is a run under ``auto``. Alone it would miss the agents run
outside a workflow."""

AUTO = _detecting(ORCHESTRATOR, GENAI, OPENINFERENCE, TRACELOOP_RUNS, WORKFLOW_RUNS)
"""Detect the profile per run: a span marked a task by ``orchestrator``, ``genai`` or
``openinference`` (tried in that order), a traceloop workflow or agent span, or a Microsoft
Agent Framework workflow run, is a task span, read with the profile that marks it,
so an ``orchestrator`` run's own facts and outcome read as under ``orchestrator``. Child spans
are read under every profile's names, so an orchestrator run that also holds OpenInference
spans counts their tokens too: for that reason ``auto`` is not the default. Claude Code is
left out (its bare attribute names, such as ``model``, are too common to read everywhere)."""

PROFILES: dict[str, Conventions] = {"orchestrator": ORCHESTRATOR, "genai": GENAI,
                                    "openinference": OPENINFERENCE,
                                    "claude-code": CLAUDE_CODE, "auto": AUTO}
"""Built-in profiles by the name ``OTEL_DIARY_CONVENTIONS`` gives them."""

EVERY_TASK_MARKER = frozenset(marker for profile in PROFILES.values()
                              for marker in profile.task_markers)
"""The attributes that mark a task span under some built-in profile."""


def marking_profile(attributes: Mapping[str, object], current: Conventions) -> str | None:
    """The name of a built-in profile that marks ``attributes`` a task span when
    ``current`` does not (what a run's spans need, a trace's root span telling), else
    ``None``."""
    if current.is_task(attributes):
        return None
    return next((name for name, profile in PROFILES.items()
                 if profile is not current and profile.is_task(attributes)), None)


_TOP_KEYS = ("extends", "attributes", "task")
_TASK_KEYS = ("marker", "marker_values", "tool_operation", "recover_on_child_errors")



def load_conventions(spec: str | Path) -> Conventions:
    """The conventions ``spec`` names: a built-in profile or a TOML/YAML mapping file."""
    text = str(spec).strip()
    profile = PROFILES.get(text.lower())
    if profile is not None:
        return profile
    path = Path(text).expanduser()
    if not text or not path.is_file():
        raise ConventionsError(
            f"conventions {text!r}: no built-in profile ({', '.join(PROFILES)}) "
            "and no such file")
    return conventions_from_mapping(_read(path), source=str(path))


def conventions_for(conventions: Conventions | str | Path | None, default: str) -> Conventions:
    """``conventions`` itself, the profile or file it names, or else the one ``default`` names."""
    if isinstance(conventions, Conventions):
        return conventions
    return load_conventions(default if conventions is None else conventions)


def _read(path: Path) -> object:
    import yaml  # only for a mapping file: loading the profiles needs none

    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
            with path.open("rb") as handle:
                return toml.load(handle)
        if suffix in (".yaml", ".yml", ".json"):
            with path.open("rb") as handle:
                return yaml.safe_load(handle)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise ConventionsError(f"{path}: cannot be read: {exc}") from exc
    raise ConventionsError(f"{path}: a conventions file ends in .toml, .yaml, .yml or .json")


def conventions_from_mapping(data: object, source: str = "conventions") -> Conventions:
    """Validate a parsed mapping file and build its :class:`Conventions`.

    ``extends`` names the profile to start from (default ``orchestrator``); ``attributes``
    maps facts to an attribute name or a list of names (first present wins); ``task`` holds
    ``marker``, ``marker_values``, ``tool_operation`` and ``recover_on_child_errors``.
    """
    top = _table(data, source)
    _no_unknown(top, _TOP_KEYS, source)
    base_name = top.get("extends", "orchestrator")
    bases = [name for name, profile in PROFILES.items() if not profile.profiles]
    if not isinstance(base_name, str) or base_name.lower() not in bases:
        raise ConventionsError(f"{source}: extends must be one of {', '.join(bases)}, "
                               f"got {base_name!r}")
    base = PROFILES[base_name.lower()]
    changes: dict[str, Any] = {}

    attributes = _table(top.get("attributes", {}), f"{source}: attributes")
    _no_unknown(attributes, FACTS, f"{source}: attributes")
    for fact, names in attributes.items():
        changes[fact] = _names(names, f"{source}: attributes.{fact}")

    task = _table(top.get("task", {}), f"{source}: task")
    _no_unknown(task, _TASK_KEYS, f"{source}: task")
    if "marker" in task:
        changes["task_marker"] = _name(task["marker"], f"{source}: task.marker")
    elif "task_id" in changes and base.task_marker == base.task_id[0]:
        # The base marks tasks by their id: a renamed id marks them now.
        changes["task_marker"] = changes["task_id"][0] if changes["task_id"] else ""
    if changes.get("task_marker", base.task_marker) != base.task_marker:
        # The base's marker values belong to the base's marker: a new marker starts without.
        changes["task_marker_values"] = None
    if "marker_values" in task:
        values = task["marker_values"]
        changes["task_marker_values"] = (
            None if values is None
            else frozenset(_names(values, f"{source}: task.marker_values")))
        if changes["task_marker_values"] == frozenset():
            raise ConventionsError(
                f"{source}: task.marker_values is empty: no span would be a task span (leave "
                "it out to take any value of the marker)")
    if "tool_operation" in task:
        changes["tool_operation"] = _name(task["tool_operation"], f"{source}: task.tool_operation")
    if "recover_on_child_errors" in task:
        flag = task["recover_on_child_errors"]
        if not isinstance(flag, bool):
            raise ConventionsError(
                f"{source}: task.recover_on_child_errors must be true or false, got {flag!r}")
        changes["recover_on_child_errors"] = flag
    conventions = dataclasses.replace(base, **changes)
    if not conventions.task_marker:
        raise ConventionsError(f"{source}: task.marker is empty: nothing would mark a task span")
    return conventions


def _table(value: object, where: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ConventionsError(f"{where}: expected a table of names, got {type(value).__name__}")
    return value


def _no_unknown(table: Mapping[str, object], known: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in known:
            raise ConventionsError(f"{where}: unknown key {key!r} (known: {', '.join(known)})")


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConventionsError(f"{where}: expected an attribute name, got {value!r}")
    return value.strip()


def _names(value: object, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise ConventionsError(f"{where}: expected a name or a list of names, got {value!r}")
    return tuple(dict.fromkeys(_name(item, where) for item in items))
