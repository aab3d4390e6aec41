"""AutoGen AgentChat runs that know nothing of otel-diary, against the OpenAI-compatible
server in ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY``).

``team``: a planner and a fixer taking turns, inside the README's span around the team's
run. ``agent``: one agent whose ``build`` tool fails the first time it is called.
"""

from __future__ import annotations

import asyncio
import sys

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_ext.models.openai import OpenAIChatCompletionClient
from opentelemetry import trace

TASK = "Fix the types in the orders api"
built: list[str] = []


def build(target: str) -> str:
    """Build a target."""
    built.append(target)
    if len(built) == 1:
        raise RuntimeError("TS2345: Argument of type 'string' is not assignable")
    return "built"


async def main(mode: str) -> None:
    client = OpenAIChatCompletionClient(model="gpt-4o", max_retries=0)
    if mode == "agent":
        agent = AssistantAgent("builder", model_client=client, tools=[build],
                               reflect_on_tool_use=True)
        print((await agent.run(task=TASK)).stop_reason)
        return
    team = RoundRobinGroupChat([AssistantAgent("planner", model_client=client),
                                AssistantAgent("fixer", model_client=client)],
                               termination_condition=MaxMessageTermination(3))
    task = TASK
    with trace.get_tracer("my-app").start_as_current_span(
            "invoke_workflow fix", attributes={"gen_ai.operation.name": "invoke_workflow"}):
        result = await team.run(task=task)
    print(result.stop_reason)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
