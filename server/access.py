"""Who may do what: the bearer token of a request, and the role it must carry.

``bearer_claims`` reads and checks the token (401 without a valid one); ``customer``,
``staff`` and ``supervisor`` are the FastAPI dependencies of the sides of the service.

- A customer's token acts for its passenger on ``/api/v1/conversations``.
- A member of staff's (an agent's or a supervisor's) works the desk under
  ``/api/v1/supervisor/desk`` (the queue, take, write, propose, hand back:
  ``server.handoff``), says who it is (``/api/v1/supervisor/me``) and reads a
  conversation that waits in the queue or that it holds (``agent_may_read``).
- Only a supervisor's decides staff checks (the second approval) and reads every
  conversation and the audit log: an agent's answers 403 there.

A customer's token on the staff's endpoints, or a staff token on a passenger's, answers
403.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, cast

import anyio
from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from conversations.desk_rows import login_of
from server.auth import (
    CUSTOMER,
    STAFF_ROLES,
    SUPERVISOR,
    AuthError,
    Claims,
    NotStaffError,
    SignInUnavailableError,
    TokenSigner,
)

if TYPE_CHECKING:
    from conversations.desk import Handoff

bearer = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT",
    description="A token from: travel-assistant token --passenger-id ID (a passenger's), "
    "--agent LOGIN (an agent's: works the desk) or --supervisor LOGIN (a supervisor's: "
    "works the desk, decides second approvals, reads every conversation)",
)

CUSTOMER_REFUSED = (
    "Only a supervisor's token (or an agent's, at the desk) reads other conversations; get "
    "one with: travel-assistant token --supervisor LOGIN (or --agent LOGIN)"
)
AGENT_REFUSED = (
    "This is an agent's token: it works the desk (the queue, the conversations waiting in it "
    "or that you hold). Only a supervisor's token decides staff checks (the second approval "
    "of a large action) and reads every conversation and the audit log; ask a supervisor."
)
AGENT_CANNOT_READ = (
    "This is an agent's token: it reads a conversation only while it waits for a person or "
    "you hold it. A supervisor's token reads every conversation."
)


def staff_refused(claims: Claims) -> str:
    """Return why a member of staff's token cannot act on a passenger's endpoint."""
    who = "an agent's" if claims.role != SUPERVISOR else "a supervisor's"
    return (
        f"This is {who} token: it works at the desk and cannot act for a passenger (send "
        "messages or decide approvals)."
    )


async def bearer_claims(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Claims:
    """Return what the request's bearer token says, or answer 401.

    ``async`` like the other dependencies that do no I/O: FastAPI runs a plain ``def``
    in a worker thread, a hand-over that costs more than checking the signature. A token
    of the company's identity provider may need its keys fetched: that one is checked in
    a worker thread. Its holder without a staff role answers 403; its keys out of reach,
    503.
    """
    if credentials is None:
        raise HTTPException(
            401,
            "Sign in: send 'Authorization: Bearer <token>'; get a token with: "
            "travel-assistant token --passenger-id ID",
            headers={"WWW-Authenticate": "Bearer"},
        )
    signer = cast(TokenSigner, request.app.state.signer)
    token = credentials.credentials
    try:
        if signer.from_identity_provider(token):
            return await anyio.to_thread.run_sync(signer.verify, token)
        return signer.verify(token)
    except NotStaffError as error:
        raise HTTPException(403, str(error)) from error
    except SignInUnavailableError as error:
        raise HTTPException(503, str(error), headers={"Retry-After": "5"}) from error
    except AuthError as error:
        raise HTTPException(
            401, str(error), headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
        ) from error


async def customer(claims: Annotated[Claims, Depends(bearer_claims)]) -> Claims:
    """Return a customer's claims; a member of staff's token answers 403."""
    if claims.role != CUSTOMER:
        raise HTTPException(403, staff_refused(claims))
    return claims


async def staff(claims: Annotated[Claims, Depends(bearer_claims)]) -> Claims:
    """Return an agent's or a supervisor's claims; a customer's token answers 403."""
    if claims.role not in STAFF_ROLES:
        raise HTTPException(403, CUSTOMER_REFUSED)
    return claims


async def supervisor(claims: Annotated[Claims, Depends(bearer_claims)]) -> Claims:
    """Return a supervisor's claims; an agent's or a customer's token answers 403."""
    if claims.role != SUPERVISOR:
        raise HTTPException(403, AGENT_REFUSED if claims.role in STAFF_ROLES else CUSTOMER_REFUSED)
    return claims


def agent_may_read(claims: Claims, handoff: Handoff | None) -> None:
    """Let a member of staff read a conversation whose open hand-off is ``handoff``.

    A supervisor reads any; an agent one that waits for a person, or that they hold
    (by login).

    Raises:
        HTTPException: 403, an agent's token and a conversation neither waiting nor theirs.
    """
    if claims.role == SUPERVISOR:
        return
    if handoff is not None and (
        handoff.status == "waiting" or login_of(handoff.agent_login) == claims.login
    ):
        return
    raise HTTPException(403, AGENT_CANNOT_READ)
