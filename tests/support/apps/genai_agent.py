"""A small agent on the official ``openai`` client that knows nothing of otel-diary.

Each run is an ``invoke_agent`` span (opentelemetry-api only) around an agent loop: ask
the model, run a tool, ask again. A failed model call is retried once by the loop. The
client reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` from the environment.
"""

from __future__ import annotations

import openai
from opentelemetry import trace

tracer = trace.get_tracer("example-agent")
MODEL = "gpt-test"


def ask(client: openai.OpenAI, question: str) -> str:
    for attempt in (1, 2):
        try:
            reply = client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": question}])
            return reply.choices[0].message.content or ""
        except openai.APIError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def lookup(term: str) -> str:
    with tracer.start_as_current_span("execute_tool lookup", attributes={
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
    }):
        return f"notes about {term}"


def run_agent(client: openai.OpenAI, conversation: str, question: str) -> str:
    with tracer.start_as_current_span("invoke_agent researcher", attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "researcher",
        "gen_ai.provider.name": "openai",
        "gen_ai.conversation.id": conversation,
    }):
        draft = ask(client, question)
        notes = lookup(draft)
        return ask(client, f"{question}\n{notes}")


def main() -> None:
    client = openai.OpenAI(max_retries=0)
    run_agent(client, "conv-1", "What changed in the release?")
    run_agent(client, "conv-2", "Summarize the incident.")


if __name__ == "__main__":
    main()
