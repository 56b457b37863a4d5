"""The service against hostile and clumsy clients (issue 25), over real loopback sockets.

Text that cannot be stored (lone surrogates, NUL) is refused with a short 422 that does
not quote it, and changes nothing; the body limit holds however the body arrives;
slow clients are dropped on time and a worker serves a bounded number of connections;
every answer carries the security headers that fit it; the docs page is off by default.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from db.engine import Database
from db.fixtures import FIXTURE_PASSENGER_ID
from server.limits import ServerLimits
from server.middleware import DRAIN_BYTES, MAX_BODY_BYTES
from server.service import ConversationService
from tests.support.flights import ticket_flight
from tests.support.scripted import ScriptedChatModel
from tests.support.web import (
    FLIGHT_REQUEST,
    LiveServer,
    auth,
    build_app,
    build_service,
    flight_then_hotel_script,
    parse_sse,
    plan_trip,
    read_all,
)


@pytest.fixture
def service(travel_db: Database, model: ScriptedChatModel, tmp_path: Path) -> ConversationService:
    return build_service(travel_db, model, tmp_path / "sessions.sqlite", retry_policy=None)


def serving(
    service: ConversationService, limits: ServerLimits | None = None, **options: Any
) -> tuple[LiveServer, dict[str, str]]:
    app, signer = build_app(service, **options)
    return LiveServer(app, limits), auth(signer, FIXTURE_PASSENGER_ID)


@pytest.fixture
def live(service: ConversationService) -> Iterator[httpx.Client]:
    server, headers = serving(service)
    with server, httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        yield client


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Tell whether the server closes ``sock`` within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


# --- text that cannot be stored --------------------------------------------------------------


def test_server_refuses_text_that_is_not_utf8_or_has_nul_and_changes_nothing(
    live: httpx.Client, model: ScriptedChatModel, travel_db: Database
) -> None:
    model.extend(*flight_then_hotel_script(plan_trip(travel_db))[:2])
    conversation = live.post("/api/v1/conversations").json()["conversation_id"]
    base = f"/api/v1/conversations/{conversation}"
    with live.stream("POST", f"{base}/messages", json={"text": FLIGHT_REQUEST}) as response:
        assert response.status_code == 200
        assert parse_sse(response.read().decode())[-1].name == "done"
    (pending,) = live.get(f"{base}/pending").json()["actions"]
    call_id = pending["tool_call_id"]

    def state() -> Any:
        return (
            live.get(f"{base}/messages").json(),
            live.get(f"{base}/pending").json(),
            live.get("/api/v1/conversations").json(),
            ticket_flight(travel_db),
            len(model.received),
        )

    before = state()
    decline = '{"decisions": [{"tool_call_id": "%s", "approved": false, "reason": %s}]}'
    bad = [
        ("messages", b'{"text": "Hello \\ud800 there"}'),
        ("messages", b'{"text": "\\udfff"}'),
        ("messages", b'{"text": "Hello \\u0000 there"}'),
        ("messages", b'{"text": "surrogate bytes \xed\xa0\x80"}'),
        ("messages", b'{"te\\ud800xt": "hi"}'),
        ("decisions", (decline % (call_id, '"Too dear \\ud800"')).encode()),
        ("decisions", (decline % (call_id, '"Too dear \\u0000"')).encode()),
        ("decisions", (decline % ("call_\\udc80", "null")).encode()),
        ("decisions", (decline % (call_id + "\\u0000", "null")).encode()),
    ]
    for path, body in bad:
        response = live.post(
            f"{base}/{path}", content=body, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"] == "application/json"
        problems = response.json()["detail"]
        assert problems and all(set(p) == {"type", "loc", "msg"} for p in problems)
        text = response.text
        assert "\\ud800" not in text and "\\u0000" not in text and "Too dear" not in text
        assert "\\udc80" not in text and "\\udfff" not in text and "Hello" not in text
        assert len(text) < 500
    assert state() == before
    assert live.get("/api/v1/health").json() == {"status": "ok"}


def test_server_refusal_names_a_made_up_field_only_when_printable(live: httpx.Client) -> None:
    conversation = live.post("/api/v1/conversations").json()["conversation_id"]
    path = f"/api/v1/conversations/{conversation}/messages"
    named = live.post(path, json={"text": "hi", "role": "system"})
    assert named.status_code == 422 and "role" in named.text
    hidden = live.post(path, json={"text": "hi", "x" * 5000: 1})
    assert hidden.status_code == 422 and "x" * 200 not in hidden.text


# --- the body limit --------------------------------------------------------------------------


def chunks(size: int, piece: int = 4096) -> Iterator[bytes]:
    body = json.dumps({"text": "y" * size}).encode()
    for start in range(0, len(body), piece):
        yield body[start : start + piece]


def test_server_chunked_body_over_the_limit_is_413(live: httpx.Client) -> None:
    conversation = live.post("/api/v1/conversations").json()["conversation_id"]
    path = f"/api/v1/conversations/{conversation}/messages"
    headers = {"Content-Type": "application/json"}
    chunked = live.post(path, content=chunks(MAX_BODY_BYTES + 1000), headers=headers)
    assert chunked.request.headers["transfer-encoding"] == "chunked"
    assert chunked.status_code == 413, chunked.text
    assert "larger than" in chunked.json()["detail"]
    declared = live.post(path, json={"text": "y" * (MAX_BODY_BYTES + 1000)})
    assert declared.status_code == 413
    assert declared.json() == chunked.json()
    # A chunked body within the limit is read as any other: here, too long a message.
    small = live.post(path, content=chunks(5000, 100), headers=headers)
    assert small.status_code == 422 and "4000" in small.text
    assert live.get("/api/v1/health").status_code == 200


SENT = 12 * MAX_BODY_BYTES  # more than the server reads at once, less than it drains
assert SENT < DRAIN_BYTES


@pytest.mark.parametrize("framing", ["chunked", "declared"])
def test_server_refused_body_is_read_so_a_slow_reader_still_gets_the_413(
    service: ConversationService, framing: str
) -> None:
    """A client that sends its whole too-large body before reading still reads the 413.

    Closing a connection with bytes unread resets it, and the reset throws away an answer
    the client has not read yet: the service reads the refused body to its end first.
    """
    server, headers = serving(service)
    with server:
        conversation = httpx.post(f"{server.url}/api/v1/conversations", headers=headers).json()[
            "conversation_id"
        ]
        body = b"".join(chunks(SENT))
        if framing == "chunked":
            framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in chunks(SENT))
            length = "Transfer-Encoding: chunked"
            framed += b"0\r\n\r\n"
        else:
            framed, length = body, f"Content-Length: {len(body)}"
        request = (
            f"POST /api/v1/conversations/{conversation}/messages HTTP/1.1\r\n"
            f"Host: x\r\nAuthorization: {headers['Authorization']}\r\n"
            f"Content-Type: application/json\r\n{length}\r\n\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(request + framed)
            time.sleep(0.3)  # busy elsewhere: the answer waits in the socket meanwhile
            sock.settimeout(10)
            answer, reset = b"", False
            try:
                while chunk := sock.recv(65536):
                    answer += chunk
            except ConnectionResetError:
                reset = True
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
        assert b"larger than" in answer
        # Read to its end, the body leaves nothing unread: the connection ends cleanly, not
        # with a reset, which (had it overtaken the answer) would have lost the 413.
        assert not reset


def test_server_body_of_exactly_the_limit_is_read_and_one_byte_more_is_413(
    live: httpx.Client,
) -> None:
    conversation = live.post("/api/v1/conversations").json()["conversation_id"]
    path = f"/api/v1/conversations/{conversation}/messages"
    headers = {"Content-Type": "application/json"}
    envelope = len(json.dumps({"text": ""}))
    exactly = MAX_BODY_BYTES - envelope  # characters of text that make a body of the limit
    for size, status in ((exactly, 422), (exactly + 1, 413)):
        assert len(json.dumps({"text": "y" * size})) == size + envelope
        # Read whole, a body of the limit is refused for what it says (the message is too
        # long), one byte more for its size; declared or chunked alike.
        body = json.dumps({"text": "y" * size}).encode()
        declared = live.post(path, content=body, headers=headers)
        assert declared.request.headers["content-length"] == str(len(body))
        chunked = live.post(path, content=chunks(size), headers=headers)
        assert chunked.request.headers["transfer-encoding"] == "chunked"
        assert (declared.status_code, chunked.status_code) == (status, status), size


# --- slow and numerous clients --------------------------------------------------------------


def test_server_slow_body_answers_408_on_time(service: ConversationService) -> None:
    server, headers = serving(service, body_timeout=0.5)
    with server:
        conversation = httpx.post(f"{server.url}/api/v1/conversations", headers=headers).json()[
            "conversation_id"
        ]
        sock = socket.create_connection(("127.0.0.1", server.port))
        request = (
            f"POST /api/v1/conversations/{conversation}/messages HTTP/1.1\r\n"
            f"Host: x\r\nAuthorization: {headers['Authorization']}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            '{"text": '
        )
        started = time.monotonic()
        sock.sendall(request.encode())
        answer = read_all(sock, timeout=10)
        took = time.monotonic() - started
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert 0.4 < took < 5
        history = httpx.get(
            f"{server.url}/api/v1/conversations/{conversation}/messages", headers=headers
        )
        assert history.json()["items"] == []


def test_server_drops_connections_whose_headers_are_late(service: ConversationService) -> None:
    """Silent sockets, and sockets trickling header bytes, are closed at the deadline."""
    limits = ServerLimits(header_timeout=1.0, max_connections=1000)
    server, _ = serving(service, limits)
    with server:
        started = time.monotonic()
        silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(150)]
        partial = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(50)]
        for sock in partial:
            sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")
        trickle = socket.create_connection(("127.0.0.1", server.port))
        trickle_closed = None
        for byte in b"GET /api/v1/health HTTP/1.1\r\n" + b"X-Slow: yes" * 20:
            try:  # a byte every 50 ms: the deadline is not extended by each of them
                trickle.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                trickle_closed = time.monotonic() - started
                break
            time.sleep(0.05)
        assert trickle_closed is not None and 0.9 < trickle_closed < 3
        for sock in silent + partial:
            assert closed_by_server(sock, timeout=max(0.1, started + 6 - time.monotonic()))
            sock.close()
        trickle.close()
        assert time.monotonic() - started < 8
        assert httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code == 200
        # A connection that sends its request in time is answered and kept alive.
        with httpx.Client(base_url=server.url, timeout=5) as client:
            assert client.get("/api/v1/health").status_code == 200
            time.sleep(0.3)
            assert client.get("/api/v1/health").status_code == 200


def test_server_beyond_its_requests_answers_503_at_once(service: ConversationService) -> None:
    """Eight requests in flight fill a cap of eight; twenty connections that ask nothing do not.

    With no time to wait for a place (``queue_timeout=0``) the ninth is refused at once.
    """
    limits = ServerLimits(max_connections=8, header_timeout=30, body_timeout=30, queue_timeout=0)
    server, _ = serving(service, limits)
    body = b'{"text": "held open"}'
    head = (
        b"POST /no-such-page HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    with server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
        time.sleep(0.2)
        assert httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code == 200
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(8)]
        for sock in held:  # headers in, body still arriving: eight requests worked on
            sock.sendall(head + body[:5])
        time.sleep(0.2)
        started = time.monotonic()
        refused = httpx.get(f"{server.url}/api/v1/health", timeout=5)
        assert refused.status_code == 503
        assert time.monotonic() - started < 2
        # uvicorn's own answer would be text/plain without nosniff; the service's is JSON.
        assert refused.headers["x-content-type-options"] == "nosniff"
        assert "busy with other requests" in refused.json()["detail"]
        assert refused.headers["retry-after"] == "1"
        for sock in held + idle:
            sock.close()
        deadline = time.monotonic() + 5
        while httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_server_a_request_it_cannot_parse_answers_400_with_its_headers(
    service: ConversationService,
) -> None:
    server, _ = serving(service)
    with server:
        for garbage in (b"GET / HTTP/1.1\r\nHost x\r\n\r\n", b"\x16\x03\x01\x00\xa5\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
                sock.sendall(garbage)
                answer = b""
                while chunk := sock.recv(4096):
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            lines = head.decode().lower().split("\r\n")
            assert lines[0].startswith("http/1.1 400"), answer
            assert "x-content-type-options: nosniff" in lines
            assert "content-type: application/json" in lines
            assert json.loads(body)["detail"]  # says what was wrong, as JSON
        assert httpx.get(f"{server.url}/api/v1/health", timeout=5).status_code == 200


# --- security headers and the docs page ------------------------------------------------------


def test_server_every_answer_says_nosniff_and_every_page_has_a_policy(
    live: httpx.Client,
) -> None:
    conversation = live.post("/api/v1/conversations").json()["conversation_id"]
    base = f"/api/v1/conversations/{conversation}"
    answers = [
        live.get("/"),
        live.get("/static/index.html"),
        live.get("/static/app.js"),
        live.get("/static/nope.js"),
        live.get("/api/v1/health"),
        live.get("/openapi.json"),
        live.get("/nope"),
        live.get("/api/v1/me", headers={"Authorization": "Bearer nope"}),
        live.get(f"{base}/pending"),
        live.post(f"{base}/messages", json={"text": " "}),
        live.post(f"{base}/messages", json={"text": "y" * (MAX_BODY_BYTES + 1)}),
        live.post(f"{base}/decisions", json={"decisions": [{"tool_call_id": "x", "approved": 1}]}),
    ]
    for answer in answers:
        assert answer.headers.get("x-content-type-options") == "nosniff", answer.request.url
        if answer.headers.get("content-type", "").startswith("text/html"):
            policy = answer.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in policy, answer.request.url
            assert "default-src 'self'" in policy, answer.request.url
    assert {a.status_code for a in answers} >= {200, 401, 404, 413, 422}
    assert sum(a.headers["content-type"].startswith("text/html") for a in answers) == 2


def test_server_docs_page_is_off_unless_asked_for(service: ConversationService) -> None:
    server, _ = serving(service)
    with server:
        assert httpx.get(f"{server.url}/docs").status_code == 404
        assert httpx.get(f"{server.url}/redoc").status_code == 404
        assert httpx.get(f"{server.url}/openapi.json").status_code == 200
    server, _ = serving(service, docs=True)
    with server:
        page = httpx.get(f"{server.url}/docs")
        assert page.status_code == 200 and "swagger-ui" in page.text
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "https://cdn.jsdelivr.net" in policy
        assert page.headers["x-content-type-options"] == "nosniff"
