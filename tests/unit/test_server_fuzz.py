"""Property: whatever arrives, the service answers a 4xx problem or a real success.

Random requests go to every endpoint of a running service (uvicorn on 127.0.0.1, a real
HTTP client): random bytes, random JSON, and bodies of the right shape whose strings are
random Unicode (lone surrogates, NUL, control characters) and whose numbers are huge;
paths with random conversation ids; tokens present or not. Every answer is a 4xx with a
JSON ``detail``, or a success whose body is what it should be (a streamed turn ends with
``done``, not ``error``); never a 5xx or a dropped connection. The service is healthy
afterwards. The example count is bounded so that the test runs in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from tests.support.web import EchoModel, LiveServer, auth, build_app, build_service, parse_sse

ODD = ["\x00", "\ud800", "\udfff", "\udc80", "\x1b", "\x7f", "\u202e", "\ufeff", "\n", "\r"]
characters = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),  # lone surrogates, which hypothesis leaves out
    st.sampled_from(ODD),
)
texts = st.text(characters, max_size=60)
numbers = st.one_of(
    st.integers(),
    st.integers(min_value=10**300, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
decision = st.fixed_dictionaries(
    {"tool_call_id": texts | numbers, "approved": st.booleans() | texts | numbers},
    optional={"reason": st.none() | texts | numbers, "why": json_values},
)
shaped = st.one_of(
    st.fixed_dictionaries({"text": texts | numbers | json_values}),
    st.fixed_dictionaries({"decisions": st.lists(decision, max_size=3) | json_values}),
)


def encoded(value: Any) -> bytes:
    # ensure_ascii writes a lone surrogate as the escape "\ud800", as a client would.
    return json.dumps(value).encode()


bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(encoded),
    shaped.map(encoded),
    shaped.map(encoded),
    shaped.map(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.none(),
)
ENDPOINTS = [
    ("GET", "/api/v1/health"),
    ("GET", "/api/v1/me"),
    ("GET", "/api/v1/conversations"),
    ("POST", "/api/v1/conversations"),
    ("GET", "/api/v1/conversations/{id}"),
    ("GET", "/api/v1/conversations/{id}/messages"),
    ("POST", "/api/v1/conversations/{id}/messages"),
    ("GET", "/api/v1/conversations/{id}/pending"),
    ("POST", "/api/v1/conversations/{id}/decisions"),
    ("GET", "/"),
    ("GET", "/static/app.js"),
    ("GET", "/openapi.json"),
]


@pytest.fixture
def served(travel_db: Database, tmp_path: Path) -> Iterator[tuple[httpx.Client, str]]:
    service = build_service(travel_db, EchoModel(), tmp_path / "sessions.sqlite")
    app, signer = build_app(service)
    with (
        LiveServer(app) as server,
        httpx.Client(
            base_url=server.url, headers=auth(signer, FIXTURE_PASSENGER_ID), timeout=30
        ) as client,
    ):
        conversation = client.post("/api/v1/conversations").json()["conversation_id"]
        yield client, conversation
        assert client.get("/api/v1/health").json() == {"status": "ok"}
        assert client.get(f"/api/v1/conversations/{conversation}/messages").status_code == 200


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    # Half the requests go to the endpoints that read a body, mostly of a conversation
    # that exists, with a valid token and JSON: where a body gets furthest.
    endpoint=st.one_of(st.sampled_from(ENDPOINTS[6:9:2]), st.sampled_from(ENDPOINTS)),
    body=bodies,
    conversation=st.one_of(st.just(None), st.just(None), texts, st.just("nope-123")),
    content_type=st.sampled_from(["application/json"] * 4 + ["text/plain", ""]),
    signed=st.sampled_from([True, True, True, False]),
)
def test_server_answers_anything_with_a_problem_or_a_success(
    served: tuple[httpx.Client, str],
    endpoint: tuple[str, str],
    body: bytes | None,
    conversation: str | None,
    content_type: str,
    signed: bool,
) -> None:
    client, ours = served
    method, template = endpoint
    chosen = ours if conversation is None else conversation
    path = template.replace("{id}", quote(chosen.encode("utf-8", "surrogatepass"), safe=""))
    headers = {"Content-Type": content_type} if content_type else {}
    if not signed:
        headers["Authorization"] = "Bearer not-a-token"
    response = client.request(method, path, content=body, headers=headers)
    status = response.status_code
    assert status < 500, (method, path, body, response.text)
    kind = response.headers.get("content-type", "")
    if status >= 400:
        assert kind == "application/json", (status, kind)
        assert response.json()["detail"], response.text
        return
    if status == 307:
        # A path that ends in "/" (an empty id, or one ending in an encoded "/") is sent to
        # the same path without it: ".../conversations/" is the list.
        asked = unquote(path)
        assert asked.endswith("/"), (path, response.headers["location"])
        assert urlparse(response.headers["location"]).path == asked.rstrip("/")
        return
    assert status in (200, 201), status
    if kind.startswith("text/event-stream"):
        events = parse_sse(response.text)
        assert events and events[-1].name == "done", (body, response.text)
    elif kind == "application/json":
        response.json()
