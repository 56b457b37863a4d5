"""An OpenID Connect identity provider on 127.0.0.1, for the staff sign-in tests.

``Provider`` makes an RSA key (``cryptography``), publishes its public half as a JWKS at
``<issuer>/keys`` and a discovery document at ``<issuer>/.well-known/openid-configuration``
from an HTTP server of its own, and signs tokens with it (``token``), as a company's
identity provider would.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "travel-desk"
KID = "key-2026"


class Provider:
    """An identity provider on 127.0.0.1: its key, its JWKS, and tokens it signs."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(RSAAlgorithm.to_jwk(self.key.public_key()))
        self.jwks = {"keys": [{**public, "kid": KID, "use": "sig", "alg": "RS256"}]}
        self.fetches = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": provider.issuer, "jwks_uri": f"{provider.issuer}/keys"}
                elif self.path == "/keys":
                    provider.fetches += 1
                    body = provider.jwks
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, *, kid: str = KID, key: Any = None, **claims: Any) -> str:
        now = datetime.now(UTC)
        body = {
            "iss": self.issuer,
            "aud": AUDIENCE,
            "sub": "00u1a2b3c4",
            "email": "Ana.Lima@Example.com",
            "name": "Ana Lima",
            "roles": ["travel-desk", "supervisor"],
            "iat": now,
            "exp": now + timedelta(hours=1),
            **claims,
        }
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
