"""Reflection by a language model: ``TaskRun`` -> "What was learned", via chat completions.

One short call per diary to any OpenAI-compatible server (vLLM, Ollama, llama.cpp, a
hosted gateway), marked ``event_role: diary.reflection``. The prompt holds the run's
facts and its redacted stderr tail. Cost is bounded (output tokens, calls in flight,
calls per minute); an empty answer, an error, a timeout or an exhausted budget returns
``""`` and the pipeline writes the deterministic stub instead. Logged URLs carry no
credentials and logged answers are redacted. A forked child gets its own HTTP client.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx

from otel_diary.counters import Counters, LogOnce
from otel_diary.pipeline.classify import TaskRun
from otel_diary.pipeline.redact import SecretRedactor, display_url
from otel_diary.pipeline.reflect import MAX_LEARNED
from otel_diary.pipeline.render import given_to, got_past, stderr_heading, tail
from otel_diary.runner import renew_after_fork, suppressed
from otel_diary.sinks import outbound
from otel_diary.text import check_header_value, cut

logger = logging.getLogger("otel_diary")

EVENT_ROLE = "diary.reflection"
CHAT_COMPLETIONS = "/chat/completions"
MAX_PROMPT_TAIL_LINES = 30
MAX_PROMPT_TAIL_CHARS = 3000
MAX_ANSWER_BYTES = 256 * 1024
WINDOW_S = 60.0

SYSTEM_PROMPT = (
    "You write the 'What was learned' section of an engineering diary that AI coding "
    "agents read before a similar task. From the facts of one finished task run, write 3 "
    "to 5 sentences of insight that is non-obvious and reusable: a pitfall and its early "
    "signal, what to try first, what to avoid, how to budget. Do not summarize what was "
    "done and do not repeat the numbers. Plain prose, no lists, no headings, no code "
    f"blocks, at most {MAX_LEARNED} characters."
)


class ReflectionStats(Counters):
    """Counters of the model calls; read them, never reset them."""

    calls: int
    answers: int
    empty: int
    errors: int
    timeouts: int
    over_budget: int
    busy: int


def facts(run: TaskRun) -> list[str]:
    """The run's known facts, one ``name: value`` line each (unknown facts left out)."""
    known: list[tuple[str, object]] = [
        ("task", run.task_id), ("title", run.title), ("agent", run.agent),
        ("outcome", run.outcome), ("trigger", run.trigger), ("workflow", run.workflow),
        ("route", run.route), ("model", run.model),
        ("other models", ", ".join(m for m in run.models if m != run.model) or None),
        ("tokens", run.tokens), ("latency_ms", run.latency_ms),
        ("file operations", run.file_operations), ("tool calls", run.tool_calls or None),
        ("build verify attempts", run.build_attempts),
        ("escalations", run.escalations or None),
        ("a repair changed no files", True if run.repair_no_files else None),
        ("failed calls", run.failed_children or None),
        ("failed call errors", ", ".join(run.child_error_types) or None),
        ("first error", run.child_error),
        ("tools called", ", ".join(f"{tool} ({count})" for tool, count in run.tools) or None),
        ("how the run got past them", " ".join(map(got_past, run.recoveries)) or None),
        ("what the calls were given", " ".join(given_to(recovery) for recovery
                                               in run.recoveries if recovery.failed_with)
         or None),
        ("final answer begins", run.answer),
    ]
    return [f"- {name}: {' '.join(str(value).split())[:300]}"
            for name, value in known if value is not None]


def prompt(run: TaskRun) -> str:
    """The user message for ``run``: its facts, then its stderr tail (already redacted)."""
    text = "Facts of the run:\n" + "\n".join(facts(run))
    if run.stderr_tail:
        text += (f"\n\n{stderr_heading(run)}:\n```text\n"
                 + tail(run.stderr_tail, MAX_PROMPT_TAIL_LINES, MAX_PROMPT_TAIL_CHARS)
                 + "\n```")
    return text + "\n\nWhat should the next agent on a similar task know?"


class LLMReflector:
    """A :class:`~otel_diary.Reflector` that asks an OpenAI-compatible chat endpoint.

    Usage::

        reflector = LLMReflector("http://localhost:11434/v1", model="qwen3:8b")
        pipeline = Pipeline(conventions, sinks, reflector=reflector)

    ``base_url`` is the API root (``.../v1``); ``/chat/completions`` is appended unless
    present. At most ``concurrency`` calls run at once (a caller waits up to
    ``timeout_s`` for a slot) and at most ``calls_per_minute`` start in any 60 seconds;
    beyond either, :meth:`reflect` returns ``""`` at once and counts it. Every request
    passes through ``redactor`` and runs with instrumentation suppressed.
    """

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 20.0,
        max_tokens: int = 300,
        concurrency: int = 2,
        calls_per_minute: int = 30,
        redactor: Callable[[str], str] | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if timeout_s <= 0 or max_tokens <= 0 or concurrency <= 0 or calls_per_minute < 0:
            raise ValueError("timeout, max_tokens and concurrency must be positive")
        if api_key:
            check_header_value(api_key, "the reflection API key")
        self.endpoint = outbound.endpoint(base_url, CHAT_COMPLETIONS)
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.calls_per_minute = calls_per_minute
        self.stats = ReflectionStats()
        self._api_key = api_key
        self._redact = redactor or SecretRedactor()
        self._concurrency = concurrency
        self._transport = transport
        self._starts: deque[float] = deque()
        self._clock = clock
        self._renew()
        self._log_once = LogOnce()
        renew_after_fork(self)

    def _renew(self) -> None:
        """New slots, budget lock and HTTP client (at start, and in a forked child, where
        the parent's may be held by calls that do not exist there)."""
        self._slots = threading.BoundedSemaphore(self._concurrency)
        self._budget_lock = threading.Lock()
        self._cut = threading.Event()
        self._client = outbound.client(self.timeout_s, self._transport)

    def _after_fork_in_child(self) -> None:
        self._renew()  # the parent's pooled connections are left to it, unclosed

    def request_body(self, run: TaskRun) -> dict[str, Any]:
        """The chat-completions request for ``run`` (redacted)."""
        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": self._redact(prompt(run))},
            ],
            "max_tokens": self.max_tokens,
            "temperature": 0.3,
            "stream": False,
            "metadata": {"event_role": EVENT_ROLE},
        }
        if self.model:
            body["model"] = self.model
        return body

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "x-event-role": EVENT_ROLE,
                   **outbound.IDENTITY}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def reflect(self, run: TaskRun) -> str:
        """3 to 5 sentences from the model, cut to 800 characters; ``""`` on any failure."""
        return cut(self._ask(self.request_body(run)), MAX_LEARNED)

    def complete(self, system: str, user: str, max_tokens: int | None = None) -> str:
        """One more short call on the same budget, slots and client: the model's answer
        to ``user`` (redacted) under ``system``, on one line; ``""`` on any failure."""
        body: dict[str, Any] = {
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": self._redact(user)}],
            "max_tokens": min(max_tokens or self.max_tokens, self.max_tokens),
            "temperature": 0.2,
            "stream": False,
            "metadata": {"event_role": EVENT_ROLE},
        }
        if self.model:
            body["model"] = self.model
        return self._ask(body)

    def cut_short(self) -> None:
        """Calls under way end within a fraction of a second and none is made from now
        on: the runs left are written with the stub (a shutdown that cannot wait)."""
        self._cut.set()

    def _ask(self, body: dict[str, Any]) -> str:
        if self._cut.is_set():
            return ""
        if not self._take_budget():
            self.stats.add("over_budget")
            return ""
        if not self._slots.acquire(timeout=self.timeout_s):
            self.stats.add("busy")
            return ""
        try:
            self.stats.add("calls")
            with suppressed():
                text = self._call(body)
        finally:
            self._slots.release()
        if not text:
            return ""
        self.stats.add("answers")
        return self._redact(text)

    def close(self) -> None:
        self._client.close()

    def _take_budget(self) -> bool:
        if self.calls_per_minute <= 0:
            return False
        with self._budget_lock:
            now = self._clock()
            while self._starts and now - self._starts[0] >= WINDOW_S:
                self._starts.popleft()
            if len(self._starts) >= self.calls_per_minute:
                return False
            self._starts.append(now)
            return True

    def _call(self, body: dict[str, Any]) -> str:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        try:
            with outbound.deadline(2 * self.timeout_s, self._cut), self._client.stream(
                    "POST", self.endpoint, content=data, headers=self.headers()) as response:
                raw, whole = outbound.read_capped(response, MAX_ANSWER_BYTES)
        except httpx.TimeoutException:
            self.stats.add("timeouts")
            if self._cut.is_set():
                self._log_failure("was cut short by the shutdown")
            else:
                self._log_failure("timed out after %.1fs", self.timeout_s)
            return ""
        except Exception as exc:  # any failure of the call writes the stub
            self.stats.add("errors")
            self._log_failure("failed: %s", self._redact(f"{type(exc).__name__}: {exc}"))
            return ""
        if response.status_code != 200:
            self.stats.add("errors")
            answer = " ".join(raw.decode("utf-8", "replace").split())[:300]
            self._log_failure("answered HTTP %d: %s", response.status_code,
                              self._redact(answer))
            return ""
        text = answer_text(raw) if whole else ""  # not a short answer: unusable
        if not text:
            self.stats.add("empty")
        return text

    def _log_failure(self, message: str, *args: object) -> None:
        self._log_once.warning("failure", "otel-diary reflection model at %s " + message +
                               "; writing the stub", display_url(self.endpoint), *args)


def answer_text(raw: bytes) -> str:
    """The assistant's text in a chat-completions answer, without reasoning blocks."""
    try:
        document = json.loads(raw)
        content = document["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    if not isinstance(content, str):
        return ""
    while "<think>" in content:  # reasoning models may prepend their thinking
        start = content.find("<think>")
        end = content.find("</think>", start)
        content = content[:start] + ("" if end < 0 else content[end + len("</think>"):])
    return " ".join(content.split())



