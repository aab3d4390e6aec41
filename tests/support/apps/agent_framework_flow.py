"""A Microsoft Agent Framework workflow that knows nothing of otel-diary: a planner agent,
then a fixer agent. Their model is ``gpt-test`` on the OpenAI-compatible server in
``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY``)."""

from __future__ import annotations

import asyncio

from agent_framework import Agent, WorkflowBuilder
from agent_framework.openai import OpenAIChatCompletionClient


async def main() -> None:
    planner = Agent(client=OpenAIChatCompletionClient(model="gpt-test"), name="planner",
                    instructions="Plan the change.")
    fixer = Agent(client=OpenAIChatCompletionClient(model="gpt-test"), name="fixer",
                  instructions="Make the change.")
    flow = WorkflowBuilder(start_executor=planner).add_edge(planner, fixer).build()
    result = await flow.run("Fix the types in the orders api")
    print(result.get_final_state())


if __name__ == "__main__":
    asyncio.run(main())
