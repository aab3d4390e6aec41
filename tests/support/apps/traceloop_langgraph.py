"""A LangGraph agent instrumented with traceloop's OpenLLMetry instrumentation of
LangChain (on the global tracer provider), knowing nothing of otel-diary: a ReAct agent
whose ``lookup`` tool fails on its first call; the tool node hands the error to the model,
which calls the tool again. Its model is ``gpt-test`` on the OpenAI-compatible server in
``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY``)."""

from __future__ import annotations

import warnings

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import ToolNode, create_react_agent
from opentelemetry.instrumentation.langchain import (  # type: ignore[import-not-found]
    LangchainInstrumentor,
)

LangchainInstrumentor().instrument()
calls: list[str] = []


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    calls.append(term)
    if len(calls) == 1:
        raise TimeoutError("lookup timed out")
    return f"notes about {term}"


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's move to langchain.agents
        graph = create_react_agent(ChatOpenAI(model="gpt-test", max_retries=0),
                                   ToolNode([lookup], handle_tool_errors=True),
                                   name="researcher")
    result = graph.invoke({"messages": [("user", "What changed in the release?")]})
    print(result["messages"][-1].content)


if __name__ == "__main__":
    main()
