"""The run the agent-framework tests share, against the local model server: asked to fix
the types, an agent calls its ``build`` tool, which fails on the first target and builds
the next, then answers. Each framework runs it its own way; :func:`assert_recovered`
checks the diary it must give."""

from __future__ import annotations

from otel_diary import Diary
from otel_diary.pipeline.render import parse_front_matter
from tests.support.loopback import ChatServer, ToolCall

MODEL = "gpt-test"
CALL_TOKENS = ChatServer.input_tokens + ChatServer.output_tokens
"""The tokens the local server reports for each call."""
QUESTION = "Fix the types in the orders api"
ANSWER = "Fixed the types; the build passes."
SCRIPT: list[str | int | ToolCall] = [ToolCall("build", '{"target": "orders"}'),
                                      ToolCall("build", '{"target": "orders-fixed"}'),
                                      ANSWER]
"""The model's answers: the two calls to ``build``, then the answer."""


def build(target: str) -> str:
    """Build a target."""
    if target == "orders":
        raise RuntimeError("TS2345: Argument of type 'string' is not assignable")
    return "built"


def assert_recovered(diary: Diary, agent: str = "builder",
                     error: str = "RuntimeError: TS2345") -> None:
    """``diary`` is the run's, recovered: titled by the question, with each call's tokens
    once (an agent span carrying their sum too), the tool's error (as the spans name it),
    what the failed call and the one after it were given, and the answer."""
    front = parse_front_matter(diary.content)
    assert (diary.agent, diary.outcome, diary.title) == (agent, "recovered", QUESTION)
    assert (front["model"], front["tokens"]) == (MODEL, 3 * CALL_TOKENS)
    assert "Made 2 tool call(s): build (2)." in diary.content
    assert f"First error: {error}" in diary.content
    assert "A call to the build tool failed; a later one succeeded." in diary.content
    assert ('The call to the build tool that failed was given `{"target": "orders"}`; the '
            'one that succeeded, `{"target": "orders-fixed"}`.') in diary.content
    assert ('a later call to the build tool given `{"target": "orders-fixed"}` instead of '
            '`{"target": "orders"}` succeeded') in diary.content  # what was learned
    assert f'The final answer began: "{ANSWER}"' in diary.content
