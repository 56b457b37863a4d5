"""The service's metrics in Prometheus's text format: ``GET /metrics`` (a supervisor's token).

Counted as they happen in this worker: the HTTP requests by route template, method and
status, with their seconds and those in flight; the turns by outcome and their seconds;
the actions by outcome; the staff checks decided. Read at each scrape from the store: the
conversations waiting for a person and how long the oldest has waited. No label holds a
conversation id, a passenger or a member of staff: only routes, outcomes and kinds.

Each worker answers for itself on its own port (``serve --port``); Prometheus scrapes
every one of them (docs/operations.md has the scrape configuration).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from conversations.desk import Desk

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TURN_SECONDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


class ServiceMetrics:
    """One worker's metrics, in a registry of their own (a test may build many services)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Counter(
            "travel_assistant_http_requests",
            "HTTP requests answered, by route template, method and status code.",
            ["route", "method", "status"],
            registry=registry,
        )
        self.request_seconds = Histogram(
            "travel_assistant_http_request_duration_seconds",
            "Seconds from a request's start to its answer's end (a stream's included).",
            ["route", "method"],
            buckets=_SECONDS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "travel_assistant_http_requests_in_flight",
            "HTTP requests being answered now.",
            registry=registry,
        )
        self.turns = Counter(
            "travel_assistant_turns",
            "Turns by outcome: done, or the kind of failure (model, time_limit, cancelled, "
            "busy, unexpected, ...).",
            ["outcome"],
            registry=registry,
        )
        self.turn_seconds = Histogram(
            "travel_assistant_turn_duration_seconds",
            "Seconds a turn ran, from its start to its end.",
            buckets=_TURN_SECONDS,
            registry=registry,
        )
        self.actions = Counter(
            "travel_assistant_actions",
            "Actions that needed the customer's yes, by outcome: approved (done), failed, "
            "declined, refused (not possible), not_done.",
            ["outcome"],
            registry=registry,
        )
        self.checks = Counter(
            "travel_assistant_staff_checks",
            "Staff checks (second approvals) decided, by outcome: approved, refused.",
            ["outcome"],
            registry=registry,
        )

    def watch_desk(self, desk: Desk) -> None:
        """Report the desk's queue at every scrape (read from the store, for every worker)."""
        self.registry.register(_QueueCollector(desk))

    def exposition(self) -> bytes:
        """Return every metric in Prometheus's text format."""
        return generate_latest(self.registry)

    def middleware(self, app: App) -> App:
        """Return ``app`` counting its HTTP requests (by the route that answered them)."""

        async def counted(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            status = [500]

            async def sending(message: MutableMapping[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    status[0] = int(message["status"])
                await send(message)

            self.in_flight.inc()
            try:
                await app(scope, receive, sending)
            finally:
                self.in_flight.dec()
                route = _route_of(scope)
                method = str(scope.get("method", ""))
                self.requests.labels(route, method, str(status[0])).inc()
                elapsed = time.perf_counter() - started
                self.request_seconds.labels(route, method).observe(elapsed)

        return counted


def _route_of(scope: Scope) -> str:
    """Return the template of the route that answered (never the path: it holds ids)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


class _QueueCollector(Collector):
    """The conversations waiting for a person now, and the oldest one's wait."""

    def __init__(self, desk: Desk) -> None:
        self.desk = desk

    def collect(self) -> Iterator[Metric]:
        waiting = self.desk.queue()
        length = GaugeMetricFamily(
            "travel_assistant_handoff_queue_length",
            "Conversations waiting for a person from customer service now.",
        )
        length.add_metric([], len(waiting))
        oldest = GaugeMetricFamily(
            "travel_assistant_handoff_oldest_wait_seconds",
            "How long the conversation waiting longest for a person has waited (0: none).",
        )
        now = datetime.now(UTC)
        waits = [(now - h.requested_at).total_seconds() for h in waiting]
        oldest.add_metric([], max(waits, default=0.0))
        yield length
        yield oldest

    def describe(self) -> Iterator[Metric]:
        """Describe nothing, so that registering does not read the store."""
        return iter(())
