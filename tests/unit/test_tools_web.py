"""Tests of the tavily_search tool with the Tavily client replaced (no network)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import tavily

from tests.support.tools import error_text, payload, run_one
from tools.web import MAX_RESULTS, make_tavily_tool


class FakeClient:
    """Stands in for TavilyClient; records what it was asked."""

    instances: ClassVar[list[FakeClient]] = []

    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.queries: list[tuple[str, dict[str, Any]]] = []
        FakeClient.instances.append(self)

    def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        self.queries.append((query, kwargs))
        if query == "boom":
            raise ConnectionError("network down")
        return {
            "results": [
                {"title": f"Page {n}", "url": f"https://example.org/{n}", "content": "x" * 900}
                for n in range(MAX_RESULTS + 3)
            ]
        }


@pytest.fixture
def fake_client(monkeypatch: pytest.MonkeyPatch) -> type[FakeClient]:
    FakeClient.instances = []
    monkeypatch.setattr(tavily, "TavilyClient", FakeClient)
    return FakeClient


def test_make_tavily_tool_needs_a_key() -> None:
    assert make_tavily_tool(None) is None
    assert make_tavily_tool("") is None


def test_tavily_search_builds_its_client_lazily(fake_client: type[FakeClient]) -> None:
    search = make_tavily_tool("tvly-key")
    assert search is not None and search.name == "tavily_search"
    assert fake_client.instances == []
    run_one([search], "tavily_search", {"query": "Basel weather"}, None)
    run_one([search], "tavily_search", {"query": "Basel museums"}, None)
    (client,) = fake_client.instances
    assert client.api_key == "tvly-key"
    assert [q for q, _ in client.queries] == ["Basel weather", "Basel museums"]


def test_tavily_search_returns_titles_urls_and_snippets(fake_client: type[FakeClient]) -> None:
    search = make_tavily_tool("tvly-key")
    assert search is not None
    data = payload(run_one([search], "tavily_search", {"query": "Basel"}, None))
    assert len(data["results"]) == MAX_RESULTS
    first = data["results"][0]
    assert first["title"] == "Page 0" and first["url"] == "https://example.org/0"
    assert len(first["snippet"]) <= 500


def test_tavily_search_failure_is_an_error_message(fake_client: type[FakeClient]) -> None:
    search = make_tavily_tool("tvly-key")
    assert search is not None
    text = error_text(run_one([search], "tavily_search", {"query": "boom"}, None))
    assert "web search failed" in text


def test_tavily_search_rejects_an_empty_query(fake_client: type[FakeClient]) -> None:
    search = make_tavily_tool("tvly-key")
    assert search is not None
    assert "must not be empty" in error_text(
        run_one([search], "tavily_search", {"query": " "}, None)
    )
    assert fake_client.instances == []
