"""What the spans under a task contributed to its diary: :class:`ChildSummary`, folded in
by assembly as spans arrive, and the :data:`Ready` pair it hands on to classification."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from otel_diary.conventions import Conventions
from otel_diary.record import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
    MAX_ERROR_TEXT,
    MAX_TEXT,
    STATUS_DESCRIPTION,
    UNNAMED_ERROR,
    SpanRecord,
    as_int,
    as_text,
    error_name,
    first,
    handed_back,
    reported,
)

MAX_LIST = 16
"""Most names a summary keeps of each kind (models, error types, tools, agents)."""

MAX_RESPONSES = 256
"""Most response ids a summary keeps (with the usage it counted of each): a response
reported again past them counts again."""

MAX_CONTENT = 64 * 1024
"""Longest captured message content a summary keeps (a longer one is left out whole)."""


def _content(value: object) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= MAX_CONTENT else None


def _flat(attributes: Mapping[str, object], messages: tuple[tuple[str, str], ...],
          role: str, *, last: bool) -> str | None:
    """The content of the first (``last``: the last) of ``messages`` (their role and
    content attributes) whose role is ``role`` and whose content has text."""
    found = None
    for role_key, content_key in messages:
        if attributes.get(role_key) == role:
            content = _content(attributes.get(content_key))
            if content is not None and content.strip():
                if not last:
                    return content
                found = content
    return found


def _whole_words(text: str, from_end: bool = False) -> str:
    """``text`` without the word (the line, ``from_end``) a cut at :data:`MAX_ERROR_TEXT`
    may have split, so no fragment of a secret is left for redaction to miss."""
    if len(text) < MAX_ERROR_TEXT:
        return text
    if from_end:
        return text.partition("\n")[2]
    return text.rpartition(" ")[0]


@dataclass
class ChildSummary:
    """What the spans under a task contributed: token sums, models, failures, tool calls.

    What it keeps first or last, and the order of its names, go by when the spans ended,
    not by the order they were added in: the same spans give the same summary in process
    (where a span's children are folded in after it) and in ``serve`` (in any order)."""

    input_tokens: int = 0
    output_tokens: int = 0
    has_tokens: bool = False
    responses: dict[str, list[int]] = field(default_factory=dict)
    """Of the model responses whose usage spans reported with their id
    (``Conventions.response_id``) and no usage under them (at most
    :data:`MAX_RESPONSES`): the input and output tokens model calls reported with it, summed
    (a server may give two calls one id: Ollama picks one of 999), and the most an agent's
    or a step's span reported with it (OpenLIT's LangGraph node, beside its model call).
    The totals count the larger of the two each way."""
    models: dict[str, int] = field(default_factory=dict)
    """Model names, each with when the first span naming it ended (see :func:`in_order`)."""
    error_types: dict[str, int] = field(default_factory=dict)
    """Error types, the same way."""
    failed_spans: int = 0
    tool_calls: int = 0
    spans: int = 0
    first_error: str | None = None
    """The first failed span's error: its class and message (``Class: message``), else its
    status description; not yet redacted, so classification redacts it before cutting."""
    first_error_ns: int = 0
    stacktrace: str | None = None
    """The end of the first stack trace a failed span recorded, or of the output its
    captured result reported when the span recorded none (not yet redacted)."""
    stacktrace_ns: int = 0
    stacktrace_is_output: bool = False
    """Whether ``stacktrace`` is that output (a failed command's)."""
    tools: dict[str, int] = field(default_factory=dict)
    """Tool calls by tool name (at most ``MAX_LIST`` names)."""
    agents: dict[str, int] = field(default_factory=dict)
    """Names of agents that ran under the task (nested agent spans), as ``models``, but
    for a nested task span (an agent's own run) by when it started: an agent ranks before
    those it ran (an agent used as another's tool ends first)."""
    first_input: str | None = None
    """The captured input messages of the first span that had them (not yet redacted)."""
    first_input_ns: int = 0
    last_output: str | None = None
    """The captured output of the last span that had one (not yet redacted)."""
    last_output_ns: int = 0
    asked: str | None = None
    """The first user message a model call's flattened messages held, of the call that
    ended first (``Conventions.flat_input_messages``; not yet redacted)."""
    asked_ns: int = 0
    answered: str | None = None
    """The last assistant message with text a model call answered, of the call that ended
    last (``Conventions.flat_output_messages``; not yet redacted)."""
    answered_ns: int = 0
    last_run_end_ns: int = -1
    """When the agent run under the task that ended last ended (-1: none): a child span
    the conventions read as an agent's own run (``Conventions.agent_run_values``)."""
    last_run_failed: bool = False
    """Whether that agent run failed: no agent succeeded after it, so the task failed
    whatever its own status says, unless something went on after it (``last_ok_ns``: the
    task's own agent answered past its sub-agent). An agent run under which a step of a
    run failed after the last span under it that ended OK (see ``last_step_failure_ns``,
    ``last_ok_ns``) failed too, whatever its status (OpenInference ends an OpenAI Agents
    run a guardrail stopped OK, and only the agent's turn in error), unless it recorded
    an answer (its captured output: a LangGraph node OpenInference calls an agent, which
    caught the failure)."""
    last_failure_ns: int = -1
    """When the failed span that ended last ended (-1: none)."""
    last_step_failure_ns: int = -1
    """The same of a failed step of a run: a span the conventions mark a task (an agent's
    run, its turn, a chain). An agent can go on without a call, or past a span of the app's
    own (an HTTP request its client retried), not past a step of its own run that failed
    with nothing after it."""
    last_ok_ns: int = -1
    """When the span that ended last without failing ended, of those with no failed span
    under them and of calls to a tool or a model (one whose request failed went on: its
    client retried), agents' runs aside (whether one got past what failed under it is
    what is read of it). OpenInference ends the chains around an exception OK."""
    last_progress_ns: int = -1
    """The same of a span with no failed span under it either: a failed span above a
    failure that such a span went on after failed for a reason of its own. The four kept
    under conventions that read child failures (``recover_on_child_errors``)."""
    tool_outcomes: dict[str, list[int]] = field(default_factory=dict)
    """Of each tool called (at most ``MAX_LIST``): when its first failed call ended and
    when its last successful one did (-1: none). Kept under conventions that read child
    failures (``recover_on_child_errors``), to tell how a run got past them."""
    tool_inputs: dict[str, list[str | None]] = field(default_factory=dict)
    """Of each tool in ``tool_outcomes``, what those two calls were given, when captured
    (``Conventions.tool_arguments``; not yet redacted)."""
    model_outcomes: dict[str, list[int]] = field(default_factory=dict)
    """The same of each model called (calls that are not tool calls)."""
    names: int = 0
    """Characters of the names kept (models, error types, tools, agents, and those of the
    outcomes): with the texts, what the in-process assembler counts a summary holding."""

    def add(self, attributes: Mapping[str, object], is_error: bool,
            conventions: Conventions, end_ns: int = 0,
            below: ChildSummary | None = None, started_ns: int | None = None) -> None:
        """Fold one child span's attributes into the summary (``end_ns``: when it ended,
        if known; ``started_ns``: when it started, of a nested task span).

        ``below`` is what the spans under this one contributed, if any. A span's token
        usage covers theirs (two instrumentations of one model call, an agent's span
        adding up its calls): it adds only what it reports beyond them, so a run counts
        each call once. A failed span above a failed one is the same failure going up (an
        exception through the spans that called it), not another failed call, unless a
        span under it succeeded after the last failure there (under conventions that read
        child failures): that failure was got past, this one is another.
        """
        # Called for every contributing span, so each role's names are looked up in line
        # (a call per role cost more than the lookups), and the common values (int
        # counts, a model already listed, an operation that names no tool call) skip the
        # coercions, which would return them unchanged.
        self.spans += 1
        if not is_error and conventions.tool_result:
            details = result_failure(attributes, conventions)
            if details is not None:  # a call that failed, its error given to the model
                attributes, is_error = {**attributes, **details}, True
        get = attributes.get
        covered_in = covered_out = 0
        failure = is_error
        if below is not None:  # read first: ``below`` may be this summary itself
            covered_in, covered_out = below.input_tokens, below.output_tokens
            # unless a span under it succeeded after the last failure there: then it is
            # another failure (the one below was got past)
            failure = is_error and not (below.failed_spans
                                        and below.last_progress_ns <= below.last_failure_ns)
        used_in = used_out = None
        for name in conventions.input_tokens:
            tokens = get(name)
            if tokens is not None:
                if type(tokens) is not int:
                    tokens = as_int(tokens)
                if tokens is not None and tokens >= 0:
                    used_in = tokens
                break
        for name in conventions.output_tokens:
            tokens = get(name)
            if tokens is not None:
                if type(tokens) is not int:
                    tokens = as_int(tokens)
                if tokens is not None and tokens >= 0:
                    used_out = tokens
                break
        if used_in is not None or used_out is not None:
            self.has_tokens = True
            if conventions.response_id and not (covered_in or covered_out):
                found: object = None
                for name in conventions.response_id:
                    found = get(name)
                    if found is not None:
                        break
                response = None if found is None else response_key(found)
                if response is not None:
                    responses = self.responses
                    counted = responses.get(response)
                    run = conventions.is_task(attributes)  # else a model call
                    if counted is None:  # the first report: counted as it is
                        if len(responses) < MAX_RESPONSES:
                            responses[response] = ([0, 0, used_in or 0, used_out or 0] if run
                                                   else [used_in or 0, used_out or 0, 0, 0])
                            self.names += len(response)
                    else:  # counted as the larger of its calls' sum and its runs' most
                        covered_in, covered_out = _counted(counted)
                        if run:
                            counted[2] = max(counted[2], used_in or 0)
                            counted[3] = max(counted[3], used_out or 0)
                        else:
                            counted[0] += used_in or 0
                            counted[1] += used_out or 0
                        used_in, used_out = _counted(counted)
            if used_in is not None:
                self.input_tokens += max(used_in - covered_in, 0)
            if used_out is not None:
                self.output_tokens += max(used_out - covered_out, 0)
        model: object = None
        for name in conventions.model:
            model = get(name)
            if model is not None:
                models = self.models
                if type(model) is str and (seen := models.get(model)) is not None:
                    if end_ns < seen:  # the common case: a model already listed
                        models[model] = end_ns
                else:
                    kept = as_text(model)
                    if kept:
                        self.names += _name(models, kept, end_ns)
                break
        tool: str | None = None
        for name in conventions.tool_name:
            value = get(name)
            if value is not None:
                tool = as_text(value, 256)
                break
        if conventions.operation:
            operation: object = None
            for name in conventions.operation:
                operation = get(name)
                if operation is not None:
                    break
            operations = conventions.tool_operations
            if type(operation) is str and operation.isalpha():  # as_text leaves it be
                called = len(operation) <= MAX_TEXT and operation in operations
            else:
                called = operation is not None and as_text(operation) in operations
        else:
            called = tool is not None  # without an operation attribute, a named tool is a call
        if called:
            self.tool_calls += 1
            if tool and (tool in self.tools or len(self.tools) < MAX_LIST):
                count = self.tools.get(tool)
                if count is None:
                    self.names += len(tool)
                self.tools[tool] = (count or 0) + 1
        agent_run = False
        if conventions.recover_on_child_errors:  # which call failed, and did a later one succeed
            agent_run = conventions.is_agent_run(attributes)
            model_call = model is not None and not (agent_run or conventions.is_task(attributes))
            if is_error:
                if end_ns > self.last_failure_ns:
                    self.last_failure_ns = end_ns
                if end_ns > self.last_step_failure_ns and conventions.is_task(attributes):
                    self.last_step_failure_ns = end_ns
            else:
                clean = below is None or not below.failed_spans
                if end_ns > self.last_ok_ns and not agent_run and (clean or called
                                                                   or model_call):
                    self.last_ok_ns = end_ns
                if end_ns > self.last_progress_ns and clean:
                    self.last_progress_ns = end_ns
            if called and tool:
                inputs = given = None  # what it was given, where that may be captured
                if conventions.tool_arguments:
                    inputs = self.tool_inputs
                    given = _content(first(attributes, conventions.tool_arguments))
                # a call fails with a span under it that failed, nothing under it going on
                # after (Claude Code's ``claude_code.tool`` over its failed execution)
                failed = is_error or (below is not None and below.failed_spans > 0
                                      and below.last_progress_ns <= below.last_failure_ns)
                self.names += _outcome(self.tool_outcomes, tool, failed, end_ns, inputs,
                                       given)
            elif model_call:
                named = as_text(model, 256)  # a model's call, not an agent's run
                if named:
                    self.names += _outcome(self.model_outcomes, named, is_error, end_ns)
        for name in conventions.child_agent:
            agent = get(name)
            if agent is not None:
                agent = as_text(agent, 256)
                if agent:
                    self.names += _name(self.agents, agent,
                                        end_ns if started_ns is None else started_ns)
                break
        if conventions.input_messages and (self.first_input is None
                                           or end_ns <= self.first_input_ns):
            content = _content(first(attributes, conventions.input_messages))
            if content is not None and _before(content, end_ns, self.first_input,
                                               self.first_input_ns):
                self.first_input, self.first_input_ns = content, end_ns
        if conventions.output_messages and (self.last_output is None
                                            or end_ns >= self.last_output_ns):
            content = _content(first(attributes, conventions.output_messages))
            if content is not None and _after(content, end_ns, self.last_output,
                                              self.last_output_ns):
                self.last_output, self.last_output_ns = content, end_ns
        if conventions.flat_inputs and (self.asked is None or end_ns <= self.asked_ns):
            content = _flat(attributes, conventions.flat_inputs, "user", last=False)
            if content is not None and _before(content, end_ns, self.asked, self.asked_ns):
                self.asked, self.asked_ns = content, end_ns
        if conventions.flat_outputs and (self.answered is None or end_ns >= self.answered_ns):
            content = _flat(attributes, conventions.flat_outputs, "assistant", last=True)
            if content is not None and _after(content, end_ns, self.answered,
                                              self.answered_ns):
                self.answered, self.answered_ns = content, end_ns
        if is_error:
            if failure:
                self.failed_spans += 1
            named = (error_name(first(attributes, conventions.error_type))
                     or error_name(attributes.get(EXCEPTION_TYPE)))
            error_type = named or UNNAMED_ERROR
            self.names += _name(self.error_types, error_type, end_ns)
            message = attributes.get(EXCEPTION_MESSAGE)
            if not (isinstance(message, str) and message.strip()):
                message = attributes.get(STATUS_DESCRIPTION)
            trace = attributes.get(EXCEPTION_STACKTRACE)
            is_output = False
            # whether this span's error, and its stack trace, may come first
            may_tell = self.first_error is None or end_ns <= self.first_error_ns
            may_trace = self.stacktrace is None or end_ns <= self.stacktrace_ns
            if not isinstance(message, str) or error_name(message) in (named, None):
                message = None  # none, or one that only names the class: what the
                # call's captured result says, if anything, and if it may be kept
                if conventions.tool_result and (may_tell or may_trace):
                    message, output = reported(first(attributes, conventions.tool_result))
                    if message is not None:
                        message = message[:MAX_ERROR_TEXT]
                    if output is not None and not (isinstance(trace, str) and trace.strip()):
                        trace, is_output = output[-MAX_ERROR_TEXT:], True
            if may_tell:
                if message is None:
                    told = named
                else:
                    text = _whole_words(message)
                    told = f"{named}: {text}" if named and not text.startswith(named) else text
                # the first failure that says something
                if told is not None and _before(told, end_ns, self.first_error,
                                                self.first_error_ns):
                    self.first_error, self.first_error_ns = told, end_ns
            if may_trace and isinstance(trace, str) and trace.strip():
                self._keep_trace(_whole_words(trace, from_end=True), end_ns, is_output)
        if agent_run and end_ns >= self.last_run_end_ns:
            failed = is_error or (  # or a step of it failed, nothing after, no answer
                below is not None and below.last_step_failure_ns > below.last_ok_ns
                and _content(first(attributes, conventions.output_messages)) is None)
            # of runs ending at the same instant (coarse clocks), a failed one counts
            tied = end_ns == self.last_run_end_ns and self.last_run_failed
            self.last_run_end_ns, self.last_run_failed = end_ns, failed or tied

    def add_counts(self, other: ChildSummary) -> None:
        """Add ``other``'s token and failure counts and when its last failure and last
        progress were, what ``below`` is read for (a response both counted, once)."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        for response, theirs in other.responses.items():
            counted = self.responses.get(response)
            if counted is not None:  # counted on both sides: calls summed, runs the most
                mine_in, mine_out = _counted(counted)
                their_in, their_out = _counted(theirs)
                counted[:] = [counted[0] + theirs[0], counted[1] + theirs[1],
                              max(counted[2], theirs[2]), max(counted[3], theirs[3])]
                merged_in, merged_out = _counted(counted)
                self.input_tokens += merged_in - mine_in - their_in
                self.output_tokens += merged_out - mine_out - their_out
            elif len(self.responses) < MAX_RESPONSES:
                self.responses[response] = list(theirs)
                self.names += len(response)
        self.failed_spans += other.failed_spans
        self.last_failure_ns = max(self.last_failure_ns, other.last_failure_ns)
        self.last_step_failure_ns = max(self.last_step_failure_ns, other.last_step_failure_ns)
        self.last_ok_ns = max(self.last_ok_ns, other.last_ok_ns)
        self.last_progress_ns = max(self.last_progress_ns, other.last_progress_ns)

    def _keep_trace(self, text: str, end_ns: int, is_output: bool) -> None:
        """Keep ``text`` as ``stacktrace`` when it comes first (see :func:`_before`; the
        same text at the same instant: a stack trace before an output)."""
        if _before(text, end_ns, self.stacktrace, self.stacktrace_ns) or (
                not is_output and self.stacktrace_is_output
                and (text, end_ns) == (self.stacktrace, self.stacktrace_ns)):
            self.stacktrace, self.stacktrace_ns = text, end_ns
            self.stacktrace_is_output = is_output

    def merge(self, other: ChildSummary) -> None:
        if other.last_run_end_ns >= 0 and other.last_run_end_ns >= self.last_run_end_ns:
            tied = other.last_run_end_ns == self.last_run_end_ns and self.last_run_failed
            self.last_run_end_ns = other.last_run_end_ns
            self.last_run_failed = other.last_run_failed or tied
        self.add_counts(other)
        self.has_tokens = self.has_tokens or other.has_tokens
        for names, others in ((self.models, other.models), (self.error_types, other.error_types),
                              (self.agents, other.agents)):
            for name, end_ns in others.items():
                self.names += _name(names, name, end_ns)
        for tool, count in other.tools.items():
            if tool in self.tools:
                self.tools[tool] += count
            elif len(self.tools) < MAX_LIST:
                self.tools[tool] = count
                self.names += len(tool)
        if other.first_input is not None and _before(
                other.first_input, other.first_input_ns, self.first_input, self.first_input_ns):
            self.first_input, self.first_input_ns = other.first_input, other.first_input_ns
        if other.last_output is not None and _after(
                other.last_output, other.last_output_ns, self.last_output, self.last_output_ns):
            self.last_output, self.last_output_ns = other.last_output, other.last_output_ns
        if other.asked is not None and _before(other.asked, other.asked_ns, self.asked,
                                               self.asked_ns):
            self.asked, self.asked_ns = other.asked, other.asked_ns
        if other.answered is not None and _after(other.answered, other.answered_ns,
                                                 self.answered, self.answered_ns):
            self.answered, self.answered_ns = other.answered, other.answered_ns
        if other.first_error is not None and _before(
                other.first_error, other.first_error_ns, self.first_error, self.first_error_ns):
            self.first_error, self.first_error_ns = other.first_error, other.first_error_ns
        if other.stacktrace is not None:
            self._keep_trace(other.stacktrace, other.stacktrace_ns, other.stacktrace_is_output)
        self.tool_calls += other.tool_calls
        self.spans += other.spans
        self.names += _merge_outcomes(self.tool_outcomes, other.tool_outcomes,
                                      self.tool_inputs if other.tool_inputs else None,
                                      other.tool_inputs)
        self.names += _merge_outcomes(self.model_outcomes, other.model_outcomes)


def result_failure(attributes: Mapping[str, object],
                   conventions: Conventions) -> dict[str, object] | None:
    """The error details of a call whose span did not fail but whose captured result says
    it did (see :func:`~otel_diary.record.handed_back`), else ``None``: what
    :meth:`ChildSummary.add` reads it as."""
    for name in conventions.tool_result:
        result = attributes.get(name)
        if result is not None:
            return handed_back(result)
    return None


def response_key(value: object) -> str | None:
    """A response id as a summary keeps it: text with something in it, 256 characters at
    most (a longer one is none: a cut id could match another's)."""
    if type(value) is not str:
        value = as_text(value) if isinstance(value, (int, float)) else None
    return value if value and len(value) <= 256 and not value.isspace() else None


def _counted(entry: list[int]) -> tuple[int, int]:
    """What a summary counts of a response (an entry of ``ChildSummary.responses``), each
    way: the larger of its model calls' sum and its runs' most."""
    return max(entry[0], entry[2]), max(entry[1], entry[3])


def _name(names: dict[str, int], name: str, end_ns: int) -> int:
    """Note ``name`` seen in a span that ended at ``end_ns`` (kept with the earliest such
    end, at most ``MAX_LIST`` names); returns its characters if newly kept."""
    seen = names.get(name)
    if seen is None:
        if len(names) >= MAX_LIST:
            return 0
        names[name] = end_ns
        return len(name)
    if end_ns < seen:
        names[name] = end_ns
    return 0


def in_order(names: dict[str, int]) -> list[str]:
    """The names of a :class:`ChildSummary` field in the order their spans ended (spans
    that ended at the same instant, as coarse clocks have it: by name)."""
    return sorted(names, key=lambda name: (names[name], name))


def _before(text: str, end_ns: int, kept: str | None, kept_ns: int) -> bool:
    """Whether ``text`` of a span that ended at ``end_ns`` comes before ``kept`` (of one
    that ended at ``kept_ns``): the same instant goes by the text, so that whatever order
    spans come in, the same one is kept."""
    return kept is None or end_ns < kept_ns or (end_ns == kept_ns and text < kept)


def _after(text: str, end_ns: int, kept: str | None, kept_ns: int) -> bool:
    """Whether ``text`` comes after ``kept``, as :func:`_before` tells."""
    return kept is None or end_ns > kept_ns or (end_ns == kept_ns and text > kept)


def _outcome(outcomes: dict[str, list[int]], name: str, failed: bool, end_ns: int,
             inputs: dict[str, list[str | None]] | None = None, given: str | None = None) -> int:
    """Note a call to ``name`` that ended at ``end_ns`` (see ``ChildSummary.tool_outcomes``)
    and, with ``inputs``, what it was given (calls that ended at once go by that text, as
    :func:`_before` has it); returns the characters newly kept."""
    kept = 0
    ends = outcomes.get(name)
    if ends is None:
        if len(outcomes) >= MAX_LIST:
            return 0
        ends = outcomes[name] = [-1, -1]
        kept = len(name)
    seen = inputs.setdefault(name, [None, None]) if inputs is not None else None
    at = 0 if failed else 1  # the first failed call, and the last that succeeded
    was, text, other = ends[at], given or "", (seen[at] or "") if seen is not None else ""
    if not (_before if failed else _after)(text, end_ns, other if was >= 0 else None, was):
        return kept
    ends[at] = end_ns
    if seen is not None:
        kept += len(text) - len(other)
        seen[at] = given
    return kept


def _merge_outcomes(mine: dict[str, list[int]], theirs: dict[str, list[int]],
                    my_inputs: dict[str, list[str | None]] | None = None,
                    their_inputs: dict[str, list[str | None]] | None = None) -> int:
    """Fold ``theirs`` into ``mine`` (and what those calls were given, with the inputs);
    returns the characters newly kept."""
    kept = 0
    for name, ends in theirs.items():
        given = their_inputs.get(name) if their_inputs else None
        for at, end_ns in enumerate(ends):
            if end_ns >= 0:
                kept += _outcome(mine, name, at == 0, end_ns, my_inputs,
                                 given[at] if given else None)
    return kept


Ready = tuple[SpanRecord, ChildSummary]
"""A root task span with the summary of its children, ready to classify."""
