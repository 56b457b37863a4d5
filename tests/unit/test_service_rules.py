"""Limits of ``travel-assistant serve`` as its options set them, checked on the real process.

``tests/unit/test_server_hardening.py`` checks the limits on uvicorn in this process, with
``ServerLimits`` given directly. Here the installed program is started with its options
(``--header-timeout``, ``--max-connections``) and spoken to over plain loopback sockets,
so an option that is parsed but never reaches the server fails here. A request's
time limit is checked near its value, and the connection cap at the cap and one past it.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from db.fixtures import FIXTURE_PASSENGER_ID
from server.auth import TokenSigner
from server.limits import HEADER_TIMEOUT, QUEUE_TIMEOUT
from tests.support.fake_openai import FakeOpenAI, Reply
from tests.support.terminal import PROGRAM
from tests.support.waiting import wait_until
from tests.support.web import SECRET, free_port, read_all

# Nothing listens on the discard port: ``--no-check`` keeps the start from asking it.
NO_MODEL_SERVER = "http://127.0.0.1:9/v1"


@pytest.fixture
def serve(db_path: Path, tmp_path: Path) -> Iterator[Callable[..., int]]:
    """Start ``travel-assistant serve OPTIONS`` on a free port; return the port once it answers.

    The process is killed after the test; what it said is in ``serve.log``.
    """
    started: list[subprocess.Popen[bytes]] = []
    log = tmp_path / "serve.log"

    def start(*options: str, model: str = NO_MODEL_SERVER) -> int:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "TAVILY"))}
        env.update(
            OPENAI_BASE_URL=model,
            OPENAI_API_KEY="test",
            TRAVEL_ASSISTANT_MODEL="scripted",
            TRAVEL_ASSISTANT_HOME=str(tmp_path / "home"),
            TRAVEL_ASSISTANT_DB=str(db_path),
            TRAVEL_ASSISTANT_SECRET=SECRET,
        )
        with log.open("ab") as output:
            process = subprocess.Popen(
                [str(PROGRAM), "serve", "--port", str(port), "--no-check", *options],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        started.append(process)
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text(errors="replace")
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=5)
                return port
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "serve did not answer"
            time.sleep(0.02)

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def test_serve_header_timeout_option_closes_a_request_whose_headers_are_late(
    serve: Callable[..., int],
) -> None:
    """``--header-timeout 0.5``: a request with half its headers is answered 408 in time.

    Well before the default of ``HEADER_TIMEOUT`` (10 s), which a server that never got
    the option would wait.
    """
    assert HEADER_TIMEOUT >= 5
    port = serve("--header-timeout", "0.5")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n")  # no blank line: unfinished
        answer = read_all(sock, timeout=HEADER_TIMEOUT / 2)
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), (took, answer)
    assert b"did not arrive in time" in answer
    # Not the default's 10 s, with room for a loaded machine.
    assert 0.4 < took < 4, took


# The requests held at the cap: headers complete, body still arriving (``Connection:
# close`` so that each connection ends with its answer).
BODY = b'{"text": "held open"}'
HELD = (
    b"POST /no-such-page HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(BODY)
)
CAP = 4


@pytest.mark.e2e  # runs the program in processes of its own
def test_serve_max_connections_serves_the_cap_and_refuses_only_the_next(
    serve: Callable[..., int],
) -> None:
    """``--max-connections 4``: four requests at once are all served, a fifth is 503.

    The fifth waits its turn for ``--queue-timeout`` (0.5 s here), then is refused: it
    came after the four, and none of them ends.

    Pinned at the level of plain connections with a request in flight: each of the four
    is a connection whose request has its headers in and its body still arriving, so it
    counts as an open connection and as a running request alike (the cap counts both
    today, the request asking included). This stays the rule when idle streams of
    customers waiting for a reply stop counting: none of these is such a stream.
    """
    assert QUEUE_TIMEOUT >= 2
    port = serve("--max-connections", str(CAP), "--body-timeout", "30", "--queue-timeout", "0.5")
    # The application is loaded (the web chat's page is there), so that the requests
    # below are answered by it rather than held while it loads.
    wait_until(lambda: httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200)
    # The probes' connections, closed by the client, are gone on the server's side too.
    time.sleep(0.5)
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(CAP)]
    try:
        for sock in held:
            sock.sendall(HELD + BODY[:5])
        # None of the four is refused (the cap's 503 comes at once): each waits for its body.
        answered, _, _ = select.select(held, [], [], 0.5)
        assert not answered, [read_all(sock, 1) for sock in answered]
        # One more, with all four still open and in flight, is one past the cap.
        started = time.monotonic()
        refused = httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=5)
        took = time.monotonic() - started
        assert refused.status_code == 503, refused.text
        assert 0.4 < took < 1.8, took  # not the default's 2 s of waiting, nor at once
        assert "busy with other requests" in refused.json()["detail"]
        assert refused.headers["retry-after"] == "1"
        # The four were served: their bodies complete, each is answered by the application
        # (a 404 for a page that is not there), not by the cap.
        for sock in held:
            sock.sendall(BODY[5:])
        answers = [read_all(sock, 30) for sock in held]
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 404"), answer
    finally:
        for sock in held:
            sock.close()


def one_answer(sock: socket.socket) -> bytes:
    """Read one HTTP answer (its headers and its ``content-length`` of body) from ``sock``."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


@pytest.mark.e2e  # runs the program in processes of its own
def test_serve_idle_kept_alive_connections_do_not_use_up_the_cap(
    serve: Callable[..., int],
) -> None:
    """``--max-connections 4``: ten pages idle between two polls, and a request still works.

    A tab that asks every second or two keeps its connection alive in between; such a
    connection has no request in flight and does no work, so it does not count.
    """
    port = serve("--max-connections", str(CAP))
    health = f"http://127.0.0.1:{port}/api/v1/health"
    wait_until(lambda: httpx.get(health, timeout=30).status_code == 200, seconds=60)
    ask = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(CAP + 6)]
    try:
        for sock in idle:  # each asks once and stays open, as a polling tab does
            sock.sendall(ask)
            answer = one_answer(sock)
            assert answer.startswith(b"HTTP/1.1 200"), answer
        asked = httpx.get(health, timeout=5)
        assert asked.status_code == 200, asked.text
        for sock in idle:  # and each asks again on the same connection
            sock.sendall(ask)
            assert one_answer(sock).startswith(b"HTTP/1.1 200")
    finally:
        for sock in idle:
            sock.close()


WAITING_CUSTOMERS = 6


@pytest.mark.e2e  # runs the program in processes of its own
def test_serve_customers_waiting_for_the_model_do_not_use_up_the_cap(
    serve: Callable[..., int],
) -> None:
    """``--max-connections 2``: six streams waiting for their replies, and still room to work.

    A connection that only streams a turn's events while the model is silent does no
    work: the cap counts the requests worked on, so a seventh customer's request is
    answered, and every waiting customer gets their reply once the model speaks.
    """
    gate = threading.Event()

    def held(body: dict[str, object]) -> Reply:
        gate.wait(60)  # the model says nothing until the test lets it
        return Reply(text="Your flight leaves at 09:00.")

    signer = TokenSigner(SECRET)
    with FakeOpenAI([held] * WAITING_CUSTOMERS, strict=False) as model:
        port = serve("--max-connections", "2", model=model.base_url)
        base = f"http://127.0.0.1:{port}/api/v1"
        replies: list[str] = []

        def customer() -> None:
            headers = {"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID)}"}
            with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
                made = client.post("/conversations")
                assert made.status_code == 201, made.text
                conversation = made.json()["conversation_id"]
                with client.stream(
                    "POST", f"/conversations/{conversation}/messages", json={"text": "When?"}
                ) as stream:
                    assert stream.status_code == 200
                    replies.append(stream.read().decode())

        customers = [threading.Thread(target=customer) for _ in range(WAITING_CUSTOMERS)]
        try:
            for number, thread in enumerate(customers, start=1):
                thread.start()  # one after the other: each comes once the last one waits
                wait_until(lambda number=number: len(model.requests) >= number, seconds=60)
            # Every customer's stream is open and waiting; the cap of two is not used up.
            headers = {"Authorization": f"Bearer {signer.issue(FIXTURE_PASSENGER_ID)}"}
            listed = httpx.get(f"{base}/conversations", headers=headers, timeout=30)
            assert listed.status_code == 200, listed.text
        finally:
            gate.set()
            for thread in customers:
                if thread.ident is not None:  # started
                    thread.join(60)
    assert len(replies) == WAITING_CUSTOMERS
    assert all("Your flight leaves at 09:00." in reply for reply in replies)
