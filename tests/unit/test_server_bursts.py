"""Bursts of requests against one worker's cap: served up to the cap, fairly, the rest 503.

Requests are sent at once over plain loopback sockets (every request written before the
server reads the first), as a reconnect storm after a restart sends them. A client is a
source address: 127.0.0.1 and 127.0.0.2 are two clients of the same machine.
"""

from __future__ import annotations

import asyncio
import select
import socket
import time
from pathlib import Path

import pytest

from db.engine import Database
from server.limits import QUEUE_PER_PLACE, Admission, ServerLimits
from server.service import ConversationService
from tests.support.scripted import ScriptedChatModel
from tests.support.web import LiveServer, build_app, build_service, read_all

# Headers in, body still to come: a request the server works on until its body arrives.
BODY = b'{"text": "held open"}'
HELD = (
    b"POST /no-such-page HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(BODY)
)
QUICK = b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


@pytest.fixture
def service(travel_db: Database, model: ScriptedChatModel, tmp_path: Path) -> ConversationService:
    return build_service(travel_db, model, tmp_path / "sessions.sqlite", retry_policy=None)


def server_for(service: ConversationService, limits: ServerLimits) -> LiveServer:
    app, _ = build_app(service)
    return LiveServer(app, limits)


def connect(port: int, count: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """Open ``count`` connections to ``port`` from ``source``."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
        sockets.append(sock)
    return sockets


def at_once(sockets: list[socket.socket], request: bytes) -> None:
    """Write ``request`` on every socket, one right after the other."""
    for sock in sockets:
        sock.sendall(request)


def answered(sockets: list[socket.socket], within: float) -> list[socket.socket]:
    """Return the sockets with an answer to read within ``within`` seconds."""
    ready, _, _ = select.select(sockets, [], [], within)
    return ready


def test_server_a_burst_beyond_the_cap_is_served_up_to_the_cap_and_only_the_rest_refused(
    service: ConversationService,
) -> None:
    """Forty requests at once on a cap of eight: eight worked on, thirty-two 503 at once.

    The requests of a burst are all in flight before the first is looked at; a cap that
    counted the requests it is about to refuse would refuse every one of them.
    """
    server = server_for(service, ServerLimits(max_connections=8, queue_timeout=0, body_timeout=30))
    with server:
        time.sleep(0.2)
        burst = connect(server.port, 40)
        try:
            started = time.monotonic()
            at_once(burst, HELD + BODY[:5])
            refused = []
            deadline = started + 10
            while len(refused) < 32 and time.monotonic() < deadline:
                ready = answered([s for s in burst if s not in refused], 0.5)
                for sock in ready:
                    answer = read_all(sock, 5)
                    assert answer.startswith(b"HTTP/1.1 503"), answer
                    assert b"retry-after: 1" in answer.lower()
                    assert b"busy with other requests" in answer
                    refused.append(sock)
            assert len(refused) == 32, len(refused)
            assert time.monotonic() - started < 3  # refused at once, not after a wait
            served = [s for s in burst if s not in refused]
            assert not answered(served, 0.3)  # the eight are still worked on
            for sock in served:
                sock.sendall(BODY[5:])
            for sock in served:  # answered by the application, not the cap
                assert read_all(sock, 30).startswith(b"HTTP/1.1 404")
        finally:
            for sock in burst:
                sock.close()


def test_server_a_burst_waits_its_turn_and_is_served_whole(service: ConversationService) -> None:
    """As many requests at once as a cap of four and its waiting room hold: all served."""
    count = 4 + 4 * QUEUE_PER_PLACE
    server = server_for(service, ServerLimits(max_connections=4, queue_timeout=20))
    with server:
        time.sleep(0.2)
        burst = connect(server.port, count)
        try:
            at_once(burst, QUICK)
            answers = [read_all(sock, 30) for sock in burst]
        finally:
            for sock in burst:
                sock.close()
    statuses = [answer.split(b" ", 2)[1] for answer in answers]
    assert statuses == [b"200"] * count, statuses


def test_server_a_client_with_many_requests_gets_its_share_not_everyones(
    service: ConversationService,
) -> None:
    """A place that frees goes to the client with the fewest requests in flight.

    One client holds all four places and has four more requests waiting; a second client's
    request, which came last, gets the first place that frees (and keeps it: its body is
    still to come), so the first client's waiting requests wait on.
    """
    server = server_for(service, ServerLimits(max_connections=4, queue_timeout=20, body_timeout=30))
    with server:
        time.sleep(0.2)
        held = connect(server.port, 4)
        waiting = connect(server.port, 4)
        other = connect(server.port, 1, source="127.0.0.2")
        try:
            at_once(held, HELD + BODY[:5])
            time.sleep(0.2)
            at_once(waiting, QUICK)
            time.sleep(0.2)
            at_once(other, HELD + BODY[:5])
            time.sleep(0.2)
            assert not answered(held + waiting + other, 0.2)  # all four places taken
            held[0].sendall(BODY[5:])
            assert read_all(held[0], 10).startswith(b"HTTP/1.1 404")
            # The freed place is the second client's: the first one's requests still wait.
            assert not answered(waiting + other, 0.5)
            other[0].sendall(BODY[5:])
            assert read_all(other[0], 10).startswith(b"HTTP/1.1 404")
            for sock in held[1:]:
                sock.sendall(BODY[5:])
            for sock in waiting:
                assert read_all(sock, 10).startswith(b"HTTP/1.1 200")
        finally:
            for sock in held + waiting + other:
                sock.close()


def test_admission_a_full_waiting_room_makes_room_for_another_client() -> None:
    """With the room full of one client's requests, another's takes the newest one's place."""

    async def scenario() -> None:
        admission = Admission(cap=1, wait=10, room=2)
        first = await admission.enter("a")
        assert first is not None
        a1 = asyncio.ensure_future(admission.enter("a"))
        a2 = asyncio.ensure_future(admission.enter("a"))
        await asyncio.sleep(0)
        assert admission.queued == 2
        b = asyncio.ensure_future(admission.enter("b"))
        assert await a2 is None  # the newest of the client with the most waiting: refused
        await asyncio.sleep(0)
        first.release()
        place = await a1  # none in flight on either side: the longest waiting
        assert place is not None and not b.done()
        place.release()
        last = await b
        assert last is not None
        last.release()
        assert (admission.working, admission.queued) == (0, 0)
        # Two of one client and one of another at most: a third client is refused.
        held = await admission.enter("a")
        waits = [asyncio.ensure_future(admission.enter(p)) for p in ("a", "b")]
        await asyncio.sleep(0)
        assert await admission.enter("c") is None
        assert held is not None
        held.release()
        for wait in waits:
            place = await wait
            assert place is not None
            place.release()

    asyncio.run(scenario())
