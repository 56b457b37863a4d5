"""Staff signing in with the company's identity provider (OpenID Connect, issue 48).

The test is the provider: an RSA key made here (``cryptography``), its public half
published as a JWKS (and a discovery document) by an HTTP server on 127.0.0.1, and
tokens signed with it. The service verifies them with PyJWT's ``PyJWKClient`` against
that JWKS: a supervisor's and an agent's work, with their login canonical; a wrong
issuer, a wrong audience, an expired token, an unknown key id, a role claim without a
staff role, a token signed with the service's own secret under the provider's issuer,
each is refused (401, or 403 for the role), and keys out of reach answer 503.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient

from conversations.store import ConversationStore
from server.auth import OidcConfig, OidcVerifier, TokenSigner
from server.service import ConversationService
from tests.support.oidc import AUDIENCE, KID, Provider
from tests.support.web import SECRET, build_app


@pytest.fixture
def provider() -> Iterator[Provider]:
    idp = Provider()
    yield idp
    idp.close()


def _client(make_assistant: Any, config: OidcConfig) -> Iterator[TestClient]:
    store = ConversationStore.in_memory()
    service = ConversationService.over_store(make_assistant(checkpointer=store.saver), store)
    app, _ = build_app(service)
    app.state.signer = TokenSigner(SECRET, OidcVerifier(config, timeout=2.0))
    with TestClient(app) as client:
        yield client
    store.close()


@pytest.fixture
def client(make_assistant: Any, provider: Provider) -> Iterator[TestClient]:
    config = OidcConfig(issuer=provider.issuer, audience=AUDIENCE)  # keys found by discovery
    yield from _client(make_assistant, config)


def me(client: TestClient, token: str) -> Any:
    return client.get("/api/v1/supervisor/me", headers={"Authorization": f"Bearer {token}"})


def test_a_staff_token_of_the_identity_provider_works_the_desk(
    client: TestClient, provider: Provider
) -> None:
    answered = me(client, provider.token())
    assert answered.status_code == 200, answered.text
    body = answered.json()
    # The login is the configured claim, canonical; the name keeps its spelling.
    assert (body["login"], body["name"], body["role"]) == (
        "ana.lima@example.com",
        "Ana Lima",
        "supervisor",
    )
    agent = me(client, provider.token(roles="agent", email="bruno@example.com", name=None))
    assert agent.status_code == 200, agent.text
    assert (agent.json()["role"], agent.json()["name"]) == ("agent", "bruno@example.com")
    queue = client.get(
        "/api/v1/supervisor/desk/queue",
        headers={"Authorization": f"Bearer {provider.token(roles='agent')}"},
    )
    assert queue.status_code == 200, queue.text
    assert provider.fetches == 1  # the key set is fetched once and kept


@pytest.mark.parametrize(
    ("change", "status", "said"),
    [
        ({"iss": "http://127.0.0.1:9/other"}, 401, "not valid"),
        ({"aud": "another-app"}, 401, "not valid"),
        ({"exp": datetime.now(UTC) - timedelta(minutes=5)}, 401, "expired"),
        ({"kid": "rotated-away"}, 401, "not signed by a key the identity provider publishes"),
        ({"roles": ["travel-desk"]}, 403, "carries no staff role"),
        ({"roles": "customer"}, 403, "carries no staff role"),
        ({"roles": None}, 403, "carries no staff role"),
        ({"email": None}, 401, "has no login (email)"),
        ({"iat": datetime.now(UTC) - timedelta(days=40)}, 401, "lives longer than 30 days"),
    ],
)
def test_an_identity_provider_token_that_does_not_prove_staff_is_refused(
    client: TestClient, provider: Provider, change: dict[str, Any], status: int, said: str
) -> None:
    kid = change.pop("kid", KID)
    answered = me(client, provider.token(kid=kid, **change))
    assert answered.status_code == status, answered.text
    assert said in answered.json()["detail"]


def test_a_token_signed_with_another_key_under_the_providers_kid_is_refused(
    client: TestClient, provider: Provider
) -> None:
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert me(client, provider.token(key=forger)).status_code == 401
    # The service's own secret under the provider's issuer: never an HMAC for it.
    shared = jwt.encode(
        {"iss": provider.issuer, "aud": AUDIENCE, "email": "a@example.com", "roles": "supervisor"},
        SECRET,
        algorithm="HS256",
        headers={"kid": KID},
    )
    assert me(client, shared).status_code == 401


def test_the_service_says_503_when_the_providers_keys_are_out_of_reach(
    make_assistant: Any, provider: Provider
) -> None:
    config = OidcConfig(issuer=provider.issuer, audience=AUDIENCE, jwks_url="http://127.0.0.1:9/k")
    for client in _client(make_assistant, config):
        answered = me(client, provider.token())
        assert answered.status_code == 503, answered.text
        assert "keys cannot be fetched" in answered.json()["detail"]
        # The service's own tokens still work meanwhile.
        own = TokenSigner(SECRET).issue("ana@example.com", role="agent")
        assert me(client, own).status_code == 200
