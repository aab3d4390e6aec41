"""A Google ADK agent that knows nothing of otel-diary: a builder with a ``build`` tool that
fails on its first target, whose failed calls go back to the model
(``ReflectAndRetryToolPlugin``). Its model is ``gemini-2.5-flash`` on the Gemini API the
``google-genai`` client finds in ``GOOGLE_GEMINI_BASE_URL`` (with ``GOOGLE_API_KEY``)."""

from __future__ import annotations

import asyncio

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.plugins import ReflectAndRetryToolPlugin
from google.adk.runners import InMemoryRunner
from google.genai import types


def build(target: str) -> str:
    """Build a target."""
    if target == "orders":
        raise RuntimeError("TS2345: Argument of type 'string' is not assignable")
    return "built"


async def main() -> None:
    agent = LlmAgent(name="builder", model="gemini-2.5-flash", instruction="You build.",
                     tools=[build])
    runner = InMemoryRunner(app=App(name="orders", root_agent=agent,
                                    plugins=[ReflectAndRetryToolPlugin()]))
    session = await runner.session_service.create_session(app_name="orders", user_id="me")
    asked = types.Content(role="user", parts=[types.Part(text="What changed?")])
    async for event in runner.run_async(user_id="me", session_id=session.id,
                                        new_message=asked):
        if event.is_final_response() and event.content and event.content.parts:
            print(event.content.parts[0].text)


if __name__ == "__main__":
    asyncio.run(main())
