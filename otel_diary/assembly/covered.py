"""What the spans under each span of a run contributed, as ``serve`` finds it.

In-process, a span's children's bucket holds what the spans under it contributed when it
ends (see :mod:`otel_diary.assembly.inprocess`). ``serve`` holds a trace's contributions
unordered, with its parent links: :func:`covered` follows the links up from each
contribution to the nearest one above it, and adds up what is under each, for what
:meth:`ChildSummary.add` reads of ``below``.
"""

from __future__ import annotations

from otel_diary.assembly.batch import Contribution
from otel_diary.assembly.summary import ChildSummary, result_failure
from otel_diary.assembly.table import Ancestry
from otel_diary.conventions import Conventions
from otel_diary.counters import LogOnce

_log_once = LogOnce()


def _failing(owned: list[tuple[bytes, Contribution]], conventions: Conventions) -> set[bytes]:
    """The span ids of ``owned`` that failed: by their status, or by their captured result
    (as :meth:`ChildSummary.add` reads them)."""
    results = bool(conventions.tool_result)
    return {span_id for span_id, contribution in owned if contribution.is_error or (
        results and result_failure(contribution.attributes, conventions) is not None)}


def _watched(owned: list[tuple[bytes, Contribution]], failing: set[bytes], ancestry: Ancestry,
             task_id: int, conventions: Conventions) -> tuple[int, set[int]] | None:
    """When an agent's run failed among ``owned``, or a failed one has a failed one or an
    agent's run above it (below ``task_id``): when the first failed one ended, and the
    span ids of the failed ones and the agents' runs. Whether a span went on past a
    failure is then read from the spans under it (after a failed agent's run, a span that
    ended OK over a failure of its own is no run going on). Each span is walked once."""
    failed: list[tuple[int, int]] = []  # (span id, end)
    watched: set[int] = set()
    run_failed = False
    for span_id, contribution in owned:
        run = conventions.is_agent_run(contribution.attributes)
        is_error = span_id in failing
        if is_error or run:
            span = int.from_bytes(span_id, "big")
            watched.add(span)
            if is_error:
                failed.append((span, contribution.end_ns))
                run_failed = run_failed or run
    if not failed:
        return None
    since = min(end for _, end in failed)
    if run_failed:
        return since, watched
    if len(watched) < 2:
        return None
    parents = ancestry.parents()
    walked: set[int] = set()  # found with nothing watched above (a cycle ends there too)
    steps = ancestry.steps
    for span, _ in failed:
        up = parents.get(span)
        while up is not None and up != task_id and up not in walked:
            if up in watched:
                ancestry.steps = steps
                return since, watched
            steps -= 1
            if steps < 0:
                _too_deep(ancestry)
                return None
            walked.add(up)
            up = parents.get(up)
    ancestry.steps = steps
    return None


def _too_deep(ancestry: Ancestry) -> None:
    """The walks of ``ancestry`` have taken every step they may (see
    :data:`~otel_diary.assembly.table.WALK_STEPS_PER_LINK`): the later ones take none."""
    ancestry.steps = 0
    _log_once.warning("deep", "otel-diary: a trace's spans are nested too deep for every "
                      "task's failures to be traced up; the rest of its tasks are read as "
                      "if each failure stood alone")


def covered(owned: list[tuple[bytes, Contribution]], ancestry: Ancestry, task_id: int,
            conventions: Conventions) -> dict[bytes, ChildSummary]:
    """What the contributions under each of ``owned`` (span id, contribution) add up to,
    for those above others that report token usage or failed, or name a tool when one
    failed (or that ended at or after the first failure, when an agent's run failed or a
    failed one has a failed one or an agent's run above it: whether that one got past the
    failure is read from the spans under it): the ``below`` of
    :meth:`ChildSummary.add`, as the in-process assembler finds it in the bucket of the
    span's children. Parent links are followed up to ``task_id`` through the spans between;
    each span is walked once."""
    keys = conventions.usage_keys
    failing = _failing(owned, conventions)
    failed_at = [contribution.end_ns for span_id, contribution in owned
                 if span_id in failing] if conventions.recover_on_child_errors else []
    # Whether a span got past a failure under it is read, when it matters (a failure
    # under a failed span or an agent's run, a failed agent's run, which a later span
    # went on past or not), from the failed spans, the agents' runs and
    # the spans that went on at or after the first failure (one that ended before every
    # failure went on before each: it tells nothing). Without a failure, nothing is.
    watch = _watched(owned, failing, ancestry, task_id, conventions) if failed_at else None
    since, watched = watch if watch is not None else (None, set())
    # With a failure among them, a tool call that ended OK may have failed under it (Claude
    # Code's tool over its failed execution): that is read from a failed span under it and
    # the spans under it that went on after the first failure.
    tools = conventions.tool_name
    calls = {int.from_bytes(span_id, "big") for span_id, contribution in owned
             if span_id not in failing
             and not contribution.attributes.keys().isdisjoint(tools)} if failed_at else set()
    if calls and since is None:
        since = min(failed_at)
    marked: dict[int, tuple[bytes, Contribution]] = {}
    for span_id, contribution in owned:
        span = int.from_bytes(span_id, "big")
        if (span_id in failing or not keys.isdisjoint(contribution.attributes)
                or (since is not None and (contribution.end_ns >= since or span in watched
                                           or span in calls))):
            marked[span] = (span_id, contribution)
    if len(marked) < 2 or not ancestry.any_parent(span_id for span_id, _ in marked.values()):
        return {}  # the usual case: no span above another (calls are leaves)
    parents = ancestry.parents()
    above: dict[int, int | None] = {}
    """A plain span -> the nearest marked span above it (None: none, or a cycle)."""
    children: dict[int, list[int]] = {}
    steps = ancestry.steps
    for span in marked:
        walked: list[int] = []
        found: int | None = None
        up = parents.get(span)
        while up is not None and up != task_id:
            if up in marked:
                found = up
                break
            if up in above:
                found = above[up]
                break
            steps -= 1
            if steps < 0:
                _too_deep(ancestry)
                return {}
            above[up] = None  # while walked: a cycle back to it ends the walk
            walked.append(up)
            up = parents.get(up)
        for plain in walked:
            above[plain] = found
        if found is not None:
            children.setdefault(found, []).append(span)
    ancestry.steps = steps
    if not children:
        return {}
    below: dict[bytes, ChildSummary] = {}
    totals: dict[int, ChildSummary] = {}
    placed = {child for kids in children.values() for child in kids}
    stack = [(span, False) for span in children if span not in placed]
    while stack:  # children before their parent (a cycle of marked spans is never reached)
        span, ready = stack.pop()
        kids = children.get(span, ())
        if not ready:
            stack.append((span, True))
            stack.extend((kid, False) for kid in kids)
            continue
        under: ChildSummary | None = None
        if kids:
            under = below[marked[span][0]] = ChildSummary()
            for kid in kids:
                total = totals.pop(kid)
                under.add_counts(total)
        contribution = marked[span][1]
        total = ChildSummary()
        total.add(contribution.attributes, contribution.is_error, conventions,
                  contribution.end_ns, under)
        if under is not None:
            total.add_counts(under)
        totals[span] = total
    return below
