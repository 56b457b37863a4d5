"""The service's staff API, as the terminal desk uses it: one client, one proven identity.

``travel-assistant desk --server URL --token TOKEN`` is a client of the running service,
as ``gh`` is of GitHub: every look and every act (the queue, take, write, propose, hand
back, checks, the second-approval amount) is a request to the service's
``/api/v1/supervisor`` endpoints with the member of staff's token, and the service alone
decides who may do what, under the login the token proves. Nothing here opens a store.

Every refusal is one line for the member of staff (``DeskApiError``): a token the
service does not accept, a service that cannot be reached, a 403 with the service's
reason, a 409 with what the desk refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import httpx

STAFF = "/api/v1/supervisor"
DESK = f"{STAFF}/desk"
# How long one request may take; deciding a check waits for the action it runs.
TIMEOUT = httpx.Timeout(30.0, connect=5.0)
DECIDE_TIMEOUT = httpx.Timeout(120.0, connect=5.0)


class DeskApiError(Exception):
    """A request the service refused, or could not answer; the message is one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        """Keep ``message`` (what the member of staff reads) and the HTTP ``status``."""
        super().__init__(message)
        self.status = status


def _detail(response: httpx.Response) -> str:
    """Return the service's reason for a refusal, in one line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # a 422: the fields and what is wrong with each
        parts = []
        for problem in detail:
            if isinstance(problem, Mapping):
                where = ".".join(str(p) for p in problem.get("loc", ()) if p != "body")
                parts.append(f"{where}: {problem.get('msg', '')}" if where else problem.get("msg"))
        detail = "; ".join(str(p) for p in parts)
    if not isinstance(detail, str) or not detail.strip():
        detail = response.reason_phrase or f"HTTP {response.status_code}"
    return " ".join(detail.split())


class DeskApi:
    """The staff's endpoints of one service, called with one member of staff's token."""

    def __init__(self, client: httpx.Client, server: str = "") -> None:
        """Call the service through ``client`` (its base URL and token set); ``server`` names it."""
        self.client = client
        self.server = server or str(client.base_url)

    @classmethod
    def connect(cls, server: str, token: str) -> DeskApi:
        """Return a client of the service at ``server`` acting with ``token``.

        Raises:
            DeskApiError: ``server`` is not an http(s) address.
        """
        server = server.strip().rstrip("/")
        if not server.startswith(("http://", "https://")):
            raise DeskApiError(
                f"--server takes the service's address, such as http://127.0.0.1:8000, "
                f"not {server!r}."
            )
        headers = {"Authorization": f"Bearer {token.strip()}", "Accept": "application/json"}
        client = httpx.Client(base_url=server, headers=headers, timeout=TIMEOUT)
        return cls(client, server)

    def close(self) -> None:
        """Close the connections to the service."""
        self.client.close()

    def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        timeout: httpx.Timeout = TIMEOUT,
    ) -> Any:
        extra: dict[str, Any] = {} if timeout is TIMEOUT else {"timeout": timeout}
        try:
            response = self.client.request(method, path, json=body, **extra)
        except httpx.TimeoutException as error:
            raise DeskApiError(
                f"The service at {self.server} did not answer in time ({type(error).__name__})."
            ) from error
        except httpx.TransportError as error:
            raise DeskApiError(
                f"Cannot reach the service at {self.server} ({error or type(error).__name__}): "
                "is travel-assistant serve running there?"
            ) from error
        if response.status_code == 401:
            raise DeskApiError(
                f"The service refused your token: {_detail(response)} Get a new one with: "
                "travel-assistant token --agent LOGIN (or --supervisor LOGIN).",
                401,
            )
        if response.status_code >= 400:
            raise DeskApiError(_detail(response), response.status_code)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as error:
            raise DeskApiError(
                f"The service at {self.server} answered something that is not JSON: is it "
                "travel-assistant serve?"
            ) from error

    # Who, and the queue ------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        """Return who the token names: ``name``, ``login``, ``role``, ``expires_at``."""
        return cast("dict[str, Any]", self._call("GET", f"{STAFF}/me"))

    def queue(self) -> dict[str, list[dict[str, Any]]]:
        """Return the waiting conversations (``waiting``) and those held (``yours``)."""
        return cast("dict[str, list[dict[str, Any]]]", self._call("GET", f"{DESK}/queue"))

    def conversation(self, conversation_id: str) -> dict[str, Any]:
        """Return one conversation step by step, as the supervisor's view reads it."""
        return cast("dict[str, Any]", self._call("GET", f"{STAFF}/conversations/{conversation_id}"))

    # Acting on a conversation --------------------------------------------------------------

    def take(self, conversation_id: str) -> dict[str, Any]:
        """Take a waiting conversation; return its hand-off."""
        return cast("dict[str, Any]", self._call("POST", f"{DESK}/{conversation_id}/take"))

    def write(self, conversation_id: str, text: str) -> None:
        """Write ``text`` to the customer of a conversation held."""
        self._call("POST", f"{DESK}/{conversation_id}/messages", {"text": text})

    def hand_back(
        self, conversation_id: str, note: str, *, close: bool, end_pending: bool = False
    ) -> dict[str, Any]:
        """Give a conversation held back to the assistant (``close``: settled).

        Over a pending action the service refuses it once (409), naming what it would
        end; ``end_pending`` goes on.
        """
        body = {"note": note, "close": close, "end_pending": end_pending}
        return cast(
            "dict[str, Any]", self._call("POST", f"{DESK}/{conversation_id}/hand-back", body)
        )

    def actions(self) -> list[dict[str, Any]]:
        """Return the actions a person may propose, each with its arguments' schema."""
        return cast("list[dict[str, Any]]", self._call("GET", f"{DESK}/actions")["actions"])

    def propose(self, conversation_id: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """Put an action to the customer; return it as the customer sees it."""
        body = {"action": action, "args": dict(args)}
        return cast(
            "dict[str, Any]", self._call("POST", f"{DESK}/{conversation_id}/proposals", body)
        )

    # Checks and the second-approval amount ---------------------------------------------------

    def checks(self) -> list[dict[str, Any]]:
        """Return the checks waiting for a supervisor (an agent's token: 403)."""
        return cast("list[dict[str, Any]]", self._call("GET", f"{DESK}/checks")["checks"])

    def decide(self, check_id: int, *, approved: bool, reason: str = "") -> dict[str, Any]:
        """Approve or refuse a check; the service applies the last decision at once."""
        body = {"approved": approved, "reason": reason}
        return cast(
            "dict[str, Any]",
            self._call("POST", f"{DESK}/checks/{check_id}", body, timeout=DECIDE_TIMEOUT),
        )

    def second_approval(self) -> dict[str, Any]:
        """Return the second-approval amount the service uses (``amount``: null when off)."""
        return cast("dict[str, Any]", self._call("GET", f"{DESK}/second-approval"))

    def set_second_approval(self, amount: str | None) -> dict[str, Any]:
        """Set the second-approval amount (``None``: off); a supervisor's token only."""
        return cast(
            "dict[str, Any]", self._call("PUT", f"{DESK}/second-approval", {"amount": amount})
        )
