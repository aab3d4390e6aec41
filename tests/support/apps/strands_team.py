"""A Strands Agents swarm that knows nothing of otel-diary: a triage agent that may hand
the task over to a specialist. Its models are ``gpt-test`` on the OpenAI-compatible server
the ``openai`` client finds in ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY``)."""

from __future__ import annotations

from strands import Agent
from strands.models.openai import OpenAIModel
from strands.multiagent import Swarm


def agent(name: str) -> Agent:
    return Agent(model=OpenAIModel(model_id="gpt-test", client_args={"max_retries": 0}),
                 name=name, callback_handler=None)


def main() -> None:
    result = Swarm([agent("triage"), agent("specialist")])("Fix the types in the orders api")
    print(result.status.value)


if __name__ == "__main__":
    main()
