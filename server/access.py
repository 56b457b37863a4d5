"""Who may do what: the bearer token of a request, and the role it must carry.

``bearer_claims`` reads and checks the token (401 without a valid one); ``customer`` and
``supervisor`` are the FastAPI dependencies of the two sides of the service. A
customer's token acts for its passenger on ``/api/v1/conversations``; a supervisor's reads
every conversation under ``/api/v1/supervisor`` and acts only at the desk (conversations
handed to a person, second approvals: ``server.handoff``). Either token on the other
side's endpoints answers 403.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from server.auth import CUSTOMER, SUPERVISOR, AuthError, Claims, TokenSigner

bearer = HTTPBearer(
    auto_error=False,
    bearerFormat="JWT",
    description="A token from: travel-assistant token --passenger-id ID (a passenger's) "
    "or travel-assistant token --supervisor NAME (a supervisor's: reads, and acts at the desk)",
)

SUPERVISOR_REFUSED = (
    "This is a supervisor's token: it reads conversations at /supervisor and cannot act "
    "for a passenger (send messages or decide approvals)."
)
CUSTOMER_REFUSED = (
    "Only a supervisor's token reads other conversations; get one with: "
    "travel-assistant token --supervisor NAME"
)


async def bearer_claims(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Claims:
    """Return what the request's bearer token says, or answer 401.

    ``async`` like the other dependencies that do no I/O: FastAPI runs a plain ``def``
    in a worker thread, a hand-over that costs more than checking the signature.
    """
    if credentials is None:
        raise HTTPException(
            401,
            "Sign in: send 'Authorization: Bearer <token>'; get a token with: "
            "travel-assistant token --passenger-id ID",
            headers={"WWW-Authenticate": "Bearer"},
        )
    signer = cast(TokenSigner, request.app.state.signer)
    try:
        return signer.verify(credentials.credentials)
    except AuthError as error:
        raise HTTPException(
            401, str(error), headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
        ) from error


async def customer(claims: Annotated[Claims, Depends(bearer_claims)]) -> Claims:
    """Return a customer's claims; a supervisor's token answers 403."""
    if claims.role != CUSTOMER:
        raise HTTPException(403, SUPERVISOR_REFUSED)
    return claims


async def supervisor(claims: Annotated[Claims, Depends(bearer_claims)]) -> Claims:
    """Return a supervisor's claims; a customer's token answers 403."""
    if claims.role != SUPERVISOR:
        raise HTTPException(403, CUSTOMER_REFUSED)
    return claims
