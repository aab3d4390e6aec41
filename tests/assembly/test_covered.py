"""What ``serve`` finds under each span of a run: ``covered()``."""

from __future__ import annotations

import logging
import struct

import pytest

from otel_diary.assembly.batch import Contribution
from otel_diary.assembly.covered import covered
from otel_diary.assembly.table import Ancestry
from otel_diary.conventions import OPENINFERENCE

TASK = 1


def run(*spans: tuple[int, int, str, bool, int]) -> tuple[list[tuple[bytes, Contribution]],
                                                          Ancestry]:
    """Contributions of task span ``TASK`` (span id, parent id, OpenInference kind, failed,
    end in ms) and the parent links between them."""
    owned = [(span.to_bytes(8, "big"),
              Contribution({"openinference.span.kind": kind}, failed, end * 1_000_000))
             for span, _, kind, failed, end in spans]
    links = b"".join(struct.pack(">QQ", span, parent) for span, parent, *_ in spans)
    return owned, Ancestry(lambda span_id: span_id == TASK, [links])


def test_an_agent_run_that_got_past_nothing_reads_so() -> None:
    """An agent run whose turn failed after the last span under it that went on (an
    OpenAI Agents run an input guardrail stopped) has that under it; one with a call
    after the failure got past it."""
    stopped = ((2, TASK, "AGENT", False, 30), (3, 2, "CHAIN", True, 20),
               (4, 3, "GUARDRAIL", False, 10))
    agent = (2).to_bytes(8, "big")
    below = covered(*run(*stopped), TASK, OPENINFERENCE)[agent]
    assert below.last_step_failure_ns > below.last_ok_ns
    below = covered(*run(*stopped, (5, 2, "LLM", False, 25)), TASK, OPENINFERENCE)[agent]
    assert below.last_ok_ns > below.last_step_failure_ns


def test_an_agent_run_that_ended_before_its_failure_is_read_too() -> None:
    """An agent run whose recorded end is before the failure under it (clocks of two
    hosts, an end time of 0) is read whatever its end: spans ending before the first
    failure are skipped, not the agents' runs."""
    skewed = ((2, TASK, "AGENT", False, 15), (3, 2, "CHAIN", True, 20),
              (4, 3, "GUARDRAIL", False, 10))
    below = covered(*run(*skewed), TASK, OPENINFERENCE)[(2).to_bytes(8, "big")]
    assert below.last_step_failure_ns > below.last_ok_ns


def test_a_failure_nothing_watches_from_above_reads_no_more_spans() -> None:
    """A failed span with neither a failed span nor an agent's run above it needs no
    span's ``below``: none is made (under an agent's run, every span's would be)."""
    steps = [(10 + n, TASK, "LLM", False, n) for n in range(1000)]
    owned, ancestry = run(*steps, (5, TASK, "CHAIN", False, 2000),
                          (6, 5, "TOOL", True, 1500))
    assert covered(owned, ancestry, TASK, OPENINFERENCE) == {}
    owned, ancestry = run(*steps, (5, TASK, "AGENT", False, 2000),
                          (6, 5, "TOOL", True, 1500))
    assert list(covered(owned, ancestry, TASK, OPENINFERENCE)) == [(5).to_bytes(8, "big")]


def test_walks_past_their_budget_stop_and_say_so(caplog: pytest.LogCaptureFixture) -> None:
    """The walks of one ancestry share a budget of steps (16 a link, at least 100,000):
    many root tasks under one very deep chain each walked it to the root, tasks times
    depth. Past the budget a task's failures are read as if each stood alone, with one
    warning; within it, the same spans read as before."""
    chain = [(100 + n, 100 + n + 1, "CHAIN", False, 0) for n in range(2000)]
    # A failed call and the agent run above it, both under the chain's top and not under
    # TASK: the walk from the call meets the run on its first step; the one from the
    # other failure goes up the whole chain.
    spans = (*chain, (7, 100, "AGENT", False, 30), (8, 7, "TOOL", True, 10),
             (9, 100, "TOOL", True, 5), (10, 7, "LLM", False, 20))
    owned, ancestry = run(*spans)
    agent = (7).to_bytes(8, "big")
    assert agent in covered(owned, ancestry, TASK, OPENINFERENCE)
    assert 0 < ancestry.steps < 100_000  # the budget, less the steps the walks took

    owned, ancestry = run(*spans)
    ancestry.parents()
    ancestry.steps = 50  # less than one walk up the chain
    with caplog.at_level(logging.DEBUG, logger="otel_diary"):  # a warning once a process
        assert covered(owned, ancestry, TASK, OPENINFERENCE) == {}
        assert ancestry.steps == 0
        assert covered(owned, ancestry, TASK, OPENINFERENCE) == {}  # after one step
    assert [r.message for r in caplog.records].count(
        "otel-diary: a trace's spans are nested too deep for every task's failures to be "
        "traced up; the rest of its tasks are read as if each failure stood alone") == 2
