"""An app instrumented with OpenLIT that knows nothing of otel-diary: ``openlit.init()``,
then, one after the other, an OpenAI Agents SDK agent, an Agents SDK triage agent that
hands the question over to a specialist, and a LangGraph agent. The first and the last
have a ``lookup`` tool that fails on its first call; the first's first model call also
meets a server error, which the runner retries. Their model is ``gpt-test`` on the
OpenAI-compatible server in ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY``). OpenLIT's prices
come from an empty file here: it would fetch them from GitHub."""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import openlit

MODEL = "gpt-test"


def agents_sdk_run() -> str:
    import agents
    import openai

    calls: list[str] = []

    @agents.function_tool
    def lookup(term: str) -> str:
        """Look a term up."""
        calls.append(term)
        if len(calls) == 1:
            raise TimeoutError("lookup timed out")
        return f"notes about {term}"

    retry = agents.ModelRetrySettings(max_retries=1, backoff={"initial_delay": 0},
                                      policy=agents.retry_policies.http_status([500]))
    agent = agents.Agent(
        name="researcher", instructions="Be brief.", tools=[lookup],
        model=agents.OpenAIChatCompletionsModel(
            model=MODEL, openai_client=openai.AsyncOpenAI(max_retries=0)),
        model_settings=agents.ModelSettings(retry=retry))
    return str(agents.Runner.run_sync(agent, "What changed in the release?").final_output)


def handoff_run() -> str:
    import agents
    import openai

    model = agents.OpenAIChatCompletionsModel(model=MODEL,
                                              openai_client=openai.AsyncOpenAI(max_retries=0))
    specialist = agents.Agent(name="specialist", instructions="Answer.", model=model)
    triage = agents.Agent(name="triage", instructions="Hand over.", model=model,
                          handoffs=[specialist])
    return str(agents.Runner.run_sync(triage, "Who owns the orders api?").final_output)


def langgraph_run() -> str:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    calls: list[str] = []

    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        calls.append(term)
        if len(calls) == 1:
            raise TimeoutError("lookup timed out")
        return f"notes about {term}"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        graph = create_react_agent(ChatOpenAI(model=MODEL, max_retries=0),
                                   ToolNode([lookup], handle_tool_errors=True),
                                   name="orders-graph")
    result = graph.invoke({"messages": [("user", "Fix the types in the orders api")]})
    return str(result["messages"][-1].content)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        prices = Path(folder, "pricing.json")
        prices.write_text("{}", encoding="utf-8")
        openlit.init(pricing_json=str(prices), disable_metrics=True, disable_events=True)
        print(agents_sdk_run())
        print(handoff_run())
        print(langgraph_run())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
