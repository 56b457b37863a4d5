"""The ``tavily_search`` web-search tool, bound only when a Tavily API key is configured.

The client is created on the first search, so building the tool costs nothing and needs
no network. Failures of the service (network, quota, bad key) come back to the model as
a ``WebSearchError`` it can explain, not as a crash.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.tools import BaseTool, tool

from db.errors import InvalidInputError, TravelError
from db.values import MAX_QUESTION_CHARS, plain_text, shown
from tools.common import Question

MAX_RESULTS = 5
SNIPPET_CHARS = 500
SEARCH_TIMEOUT_SECONDS = 20


class WebSearchError(TravelError):
    """The web search service could not answer."""


def make_tavily_tool(api_key: str | None) -> BaseTool | None:
    """Build the ``tavily_search`` tool, or return ``None`` without a key.

    Args:
        api_key: The Tavily API key (``TAVILY_API_KEY``); empty or ``None`` disables the
            tool.

    Returns:
        The tool, or ``None``.
    """
    if not api_key or not api_key.strip():
        return None
    key = api_key.strip()
    lock = threading.Lock()
    clients: list[Any] = []

    def client() -> Any:
        with lock:
            if not clients:
                from tavily import TavilyClient

                clients.append(TavilyClient(api_key=key))
            return clients[0]

    @tool(parse_docstring=True)
    def tavily_search(query: Question) -> dict[str, Any]:
        """Search the web for current travel information (weather, events, entry rules).

        Use it for facts the company's own tools and policy cannot answer. Returns the
        title, address and a snippet of the best pages.

        Args:
            query: What to search for, in plain words, e.g. "Basel museums open Monday".
        """
        text = plain_text(query, "query", MAX_QUESTION_CHARS)
        if not text:
            raise InvalidInputError("query must not be empty; say what to search for.")
        try:
            response = client().search(
                text, max_results=MAX_RESULTS, timeout=SEARCH_TIMEOUT_SECONDS
            )
        except Exception as error:  # network, quota and key errors of an outside service
            raise WebSearchError(
                f"The web search failed ({type(error).__name__}: {shown(str(error), 120)}). "
                "Answer without it, or try again later."
            ) from error
        results = [
            {
                "title": str(item.get("title", "")),
                "url": str(item.get("url", "")),
                "snippet": str(item.get("content", ""))[:SNIPPET_CHARS],
            }
            for item in (response or {}).get("results", [])[:MAX_RESULTS]
        ]
        answer: dict[str, Any] = {"query": text, "results": results}
        if not results:
            answer["message"] = "The web search found nothing; try other words."
        return answer

    return tavily_search
