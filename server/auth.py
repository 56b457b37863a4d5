"""Who is asking: signed bearer tokens, one passenger or one member of staff each.

``travel-assistant token --passenger-id ID`` issues a passenger's token,
``travel-assistant token --agent LOGIN`` an agent's and ``--supervisor LOGIN`` a
supervisor's (with ``--name NAME``, the name customers see); every API request carries it
as ``Authorization: Bearer <token>``. A token is a JWT signed with HMAC-SHA256 (PyJWT)
naming who it is for (``sub``: a passenger id, or a member of staff's login), their
``role`` (``customer``, ``agent`` or ``supervisor``; a token without one, as issued before
roles existed, is a customer's), a member of staff's display ``name`` (optional: without
one, as issued before names existed, the login is shown), when it was issued and when it
expires; the service accepts nothing else (no other algorithm, no token without an
expiry, no other issuer or audience, no other role).

- A customer's token acts for its passenger only.
- An agent's works the desk: the queue, the conversations waiting in it or held by the
  agent, taking one, writing to the customer, proposing an action, handing it back.
- A supervisor's does all that, decides staff checks (the second approval of a large
  action, never one they proposed themselves) and reads every conversation and the audit
  log.

Every look and act of staff is audited under their login. A subject and a name are
printable text of at most ``MAX_SUBJECT_CHARS`` characters, and no token lives longer
than ``MAX_LIFETIME``, whoever signed it: all are checked at issue and at every
verification.

A member of staff's login is one identity however it is spelled: ``Claims.login`` is its
canonical form (``conversations.desk_rows.canonical_login``: NFKC, case-folded), which
the desk compares and the audit log records; the name customers see keeps its spelling.

Staff may also sign in with the company's identity provider (``OidcVerifier``): a token
whose issuer is the configured OpenID Connect issuer is verified against the issuer's
published keys (its JWKS, fetched and cached by PyJWT's ``PyJWKClient``) instead of the
secret, for the configured audience, with its login, name and role read from the
configured claims; a valid token that carries neither staff role is refused (403).

The signing secret is ``TRAVEL_ASSISTANT_SECRET`` when it is set (at least 32
characters; every worker of a deployment needs the same one), otherwise a random secret
generated once into ``<home>/server-secret`` with 0600 permissions. Changing the secret
invalidates every token issued with the old one; there is no other revocation, so keep
lifetimes short.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, cast

import jwt

from conversations.logins import canonical_login

SECRET_ENV = "TRAVEL_ASSISTANT_SECRET"
SECRET_FILE = "server-secret"
MIN_SECRET_CHARS = 32
ALGORITHM = "HS256"
ISSUER = "travel-assistant"
AUDIENCE = "travel-assistant-api"
DEFAULT_LIFETIME = timedelta(hours=24)
MAX_LIFETIME = timedelta(days=30)
# The longest subject or name (a passenger id, a member of staff's login or name): what
# the desk stores of one (``conversations.desk.AGENT_CHARS``; a test keeps the two equal).
MAX_SUBJECT_CHARS = 80

Role = Literal["customer", "agent", "supervisor"]
CUSTOMER: Role = "customer"
AGENT: Role = "agent"
SUPERVISOR: Role = "supervisor"
ROLES: tuple[Role, ...] = (CUSTOMER, AGENT, SUPERVISOR)
# The roles of the people behind the desk.
STAFF_ROLES: tuple[Role, ...] = (AGENT, SUPERVISOR)


class SecretError(Exception):
    """The signing secret cannot be used; the message names the fix."""


class AuthError(Exception):
    """A request's token is missing, malformed, forged or expired."""


class NotStaffError(AuthError):
    """A valid token of the identity provider whose holder has no staff role (403)."""


class SignInUnavailableError(AuthError):
    """The identity provider's keys cannot be fetched now: nothing is known of the token (503)."""


@dataclass(frozen=True)
class Claims:
    """What a valid token says: who (a passenger, or staff's login), as what, until when.

    ``name`` is the name a member of staff goes by with customers (empty in a token
    issued without one: the login is shown, ``shown_name``).
    """

    subject: str
    expires_at: datetime
    role: Role = CUSTOMER
    name: str = ""

    @property
    def passenger_id(self) -> str:
        """Return the passenger a customer's token acts for.

        Raises:
            AuthError: The token is a member of staff's, which acts for no passenger.
        """
        if self.role != CUSTOMER:
            raise AuthError(f"{_a(self.role)} token acts for no passenger.")
        return self.subject

    @property
    def shown_name(self) -> str:
        """Return the name customers see of the member of staff: their name, or their login."""
        return self.name or self.subject

    @property
    def login(self) -> str:
        """Return the member of staff's login in its one canonical form (``canonical_login``).

        What the desk compares (who holds, who proposed, who decided) and the audit log
        records: ``ANA@example.com`` and ``ana@example.com`` are one login.
        """
        return canonical_login(self.subject)


def _a(role: Role) -> str:
    """Return "A supervisor's", "An agent's": how a role's token is named."""
    return f"{'An' if role == AGENT else 'A'} {role}'s"


def load_secret(home: Path, env: Mapping[str, str]) -> str:
    """Return the signing secret: ``TRAVEL_ASSISTANT_SECRET``, or the one kept in ``home``.

    The file is created on first use, atomically (a second process started at the same
    moment reads the same secret), readable by its owner only.

    Raises:
        SecretError: The variable is too short, or the file is readable by others or
            cannot be read.
    """
    given = env.get(SECRET_ENV)
    if given is not None:
        if len(given.strip()) < MIN_SECRET_CHARS:
            raise SecretError(
                f"{SECRET_ENV} must be at least {MIN_SECRET_CHARS} characters long; "
                'generate one with: python -c "import secrets; print(secrets.token_urlsafe(48))"'
            )
        return given.strip()
    path = home / SECRET_FILE
    if not path.exists():
        _create_secret_file(path)
    return _read_secret_file(path)


def _create_secret_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    descriptor = os.open(scratch, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(secrets.token_urlsafe(48) + "\n")
        # Fails if another process created it first: theirs is kept.
        with contextlib.suppress(FileExistsError):
            os.link(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)


def _read_secret_file(path: Path) -> str:
    try:
        mode = path.stat().st_mode
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SecretError(
                f"{path} is readable by other users; make it private with: chmod 600 {path}"
            )
        value = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise SecretError(f"Cannot read the signing secret {path} ({error}).") from error
    if len(value) < MIN_SECRET_CHARS:
        raise SecretError(
            f"The signing secret {path} is too short; delete it and a new one is made "
            "(every token issued so far stops working)."
        )
    return value


def subject_problem(subject: str) -> str | None:
    """Say what is wrong with a token's subject (or name), or ``None`` when it can be one.

    Printable text (no control character, no NUL, which PostgreSQL cannot store, no lone
    surrogate, which no database can) of at most ``MAX_SUBJECT_CHARS`` characters.
    """
    if len(subject) > MAX_SUBJECT_CHARS:
        return f"is longer than {MAX_SUBJECT_CHARS} characters"
    if not subject.isprintable() or any("\ud800" <= c <= "\udfff" for c in subject):
        return "holds characters that are not printable text"
    return None


class TokenSigner:
    """Issue and check the tokens of passengers and staff with one secret."""

    def __init__(self, secret: str, oidc: OidcVerifier | None = None) -> None:
        """Sign with ``secret`` (see ``load_secret``); accept ``oidc``'s staff tokens too."""
        if len(secret) < MIN_SECRET_CHARS:
            raise SecretError(f"The signing secret must be at least {MIN_SECRET_CHARS} characters.")
        self._secret = secret
        self.oidc = oidc

    def from_identity_provider(self, token: str) -> bool:
        """Tell whether ``token`` names the identity provider as its issuer (unverified).

        Its verification may then fetch the provider's keys: the service runs it off
        its event loop.
        """
        return self.oidc is not None and self.oidc.issued(token)

    def issue(
        self,
        subject: str,
        lifetime: timedelta = DEFAULT_LIFETIME,
        *,
        now: datetime | None = None,
        role: Role = CUSTOMER,
        name: str | None = None,
    ) -> str:
        """Return a token for ``subject``: a passenger id, or a member of staff's login.

        ``name`` is the name customers see of a member of staff (``None``: their login).
        The token is valid for ``lifetime`` from ``now``.

        Raises:
            ValueError: A subject or name that cannot be one, a name on a passenger's
                token, an unknown role, or too long a lifetime.
        """
        what = "passenger id" if role == CUSTOMER else "login"
        if not subject.strip():
            raise ValueError(f"A token needs a {what}.")
        problem = subject_problem(subject)
        if problem is not None:
            raise ValueError(f"A token's {what} {problem}.")
        if role not in ROLES:
            raise ValueError(f"A token's role is one of {', '.join(ROLES)}, not {role!r}.")
        if name is not None:
            if role == CUSTOMER:
                raise ValueError("Only a member of staff's token carries a name.")
            if not name.strip():
                raise ValueError("A token's name is blank.")
            problem = subject_problem(name)
            if problem is not None:
                raise ValueError(f"A token's name {problem}.")
        if lifetime > MAX_LIFETIME:
            raise ValueError(f"A token may live at most {MAX_LIFETIME.days} days.")
        issued = (now or datetime.now(UTC)).replace(microsecond=0)
        claims = {
            "sub": subject,
            "iat": issued,
            "exp": issued + lifetime,
            "iss": ISSUER,
            "aud": AUDIENCE,
            "role": role,
        }
        if name is not None:
            claims["name"] = name
        return jwt.encode(claims, self._secret, algorithm=ALGORITHM)

    def verify(self, token: str) -> Claims:
        """Return what ``token`` says, if this service signed it and it has not expired.

        A token whose issuer is the configured identity provider's is verified by it
        (``OidcVerifier.verify``).

        Raises:
            AuthError: The token is malformed, signed with another secret or algorithm,
                expired, or lacks a claim (``NotStaffError``: an identity provider's
                token without a staff role; ``SignInUnavailableError``: its keys cannot
                be fetched).
        """
        if self.oidc is not None and self.oidc.issued(token):
            return self.oidc.verify(token)
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[ALGORITHM],
                audience=AUDIENCE,
                issuer=ISSUER,
                options={"require": ["sub", "exp", "iat", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise AuthError(
                "Your token has expired; ask for a new one (travel-assistant token)."
            ) from error
        except jwt.InvalidTokenError as error:
            raise AuthError("The token is not valid.") from error
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject.strip():
            raise AuthError("The token names no passenger.")
        if subject_problem(subject) is not None:
            raise AuthError("The token is not valid.")
        _lifetime_ok(claims)
        # Tokens issued before roles existed carry none: they are customers'.
        role = claims.get("role", CUSTOMER)
        if role not in ROLES:
            raise AuthError("The token is not valid.")
        if role != CUSTOMER and subject_problem(canonical_login(subject)) is not None:
            raise AuthError("The token is not valid.")  # too long once folded
        # Tokens issued before names existed carry none: the login is shown. A name is
        # checked as a subject is, and only staff have one.
        name = claims.get("name")
        if "name" in claims and (
            role == CUSTOMER
            or not isinstance(name, str)
            or not name.strip()
            or subject_problem(name) is not None
        ):
            raise AuthError("The token is not valid.")
        expires = datetime.fromtimestamp(int(claims["exp"]), UTC)
        return Claims(subject, expires, cast(Role, role), name or "")


def _lifetime_ok(claims: Mapping[str, Any]) -> None:
    """Refuse a token that lives longer than ``MAX_LIFETIME``, whoever signed it."""
    try:
        lifetime = int(claims["exp"]) - int(claims["iat"])
    except (TypeError, ValueError) as error:
        raise AuthError("The token is not valid.") from error
    if lifetime > MAX_LIFETIME.total_seconds():
        raise AuthError(
            f"The token lives longer than {MAX_LIFETIME.days} days; ask for a new one "
            "(travel-assistant token)."
        )


# --- the company's identity provider (OpenID Connect) ---------------------------------------

# Public-key algorithms only: a provider's token is never checked with a shared secret.
OIDC_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384"]
# How long a fetch of the provider's keys (or its discovery document) may take.
OIDC_TIMEOUT = 5.0
# How long the provider's key set is kept before it is fetched again.
OIDC_KEYS_SECONDS = 300.0
# Clock skew allowed between this service and the provider.
OIDC_LEEWAY = 30


@dataclass(frozen=True)
class OidcConfig:
    """Which identity provider's tokens are staff tokens, and how to read them.

    ``issuer`` and ``audience`` must match the token's ``iss`` and ``aud``; the keys are
    at ``jwks_url`` (empty: the ``jwks_uri`` of the issuer's discovery document,
    ``<issuer>/.well-known/openid-configuration``). ``login_claim`` names the login,
    ``name_claim`` the name customers see (the login without one), and ``role_claim``
    (a dotted path such as ``realm_access.roles``; a string or a list of strings) holds
    ``supervisor_role`` for a supervisor, ``agent_role`` for an agent.
    """

    issuer: str
    audience: str
    jwks_url: str = ""
    login_claim: str = "email"
    name_claim: str = "name"
    role_claim: str = "roles"
    agent_role: str = "agent"
    supervisor_role: str = "supervisor"


class OidcVerifier:
    """Verify the staff tokens an OpenID Connect issuer signed, against its published keys."""

    def __init__(self, config: OidcConfig, *, timeout: float = OIDC_TIMEOUT) -> None:
        """Accept ``config``'s issuer's tokens; fetch its keys lazily, at the first one.

        Raises:
            ValueError: No issuer or audience, or a keys address that is not http(s).
        """
        if not config.issuer.strip() or not config.audience.strip():
            raise ValueError("Signing in with an identity provider needs its issuer and audience.")
        if config.jwks_url and not config.jwks_url.startswith(("https://", "http://")):
            raise ValueError(
                f"The identity provider's keys address {config.jwks_url!r} is not http(s)."
            )
        self.config = config
        self._timeout = timeout
        self._lock = threading.Lock()
        self._client: jwt.PyJWKClient | None = None

    def issued(self, token: str) -> bool:
        """Tell whether ``token`` says it comes from this issuer (nothing verified yet)."""
        try:
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.InvalidTokenError:
            return False
        return unverified.get("iss") == self.config.issuer

    def _keys(self) -> jwt.PyJWKClient:
        with self._lock:
            if self._client is None:
                url = self.config.jwks_url or self._discover()
                self._client = jwt.PyJWKClient(
                    url, cache_jwk_set=True, lifespan=OIDC_KEYS_SECONDS, timeout=self._timeout
                )
            return self._client

    def _discover(self) -> str:
        """Return the ``jwks_uri`` of the issuer's discovery document."""
        import httpx

        where = self.config.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            answer = httpx.get(where, timeout=self._timeout)
            answer.raise_for_status()
            document = answer.json()
        except (httpx.HTTPError, ValueError) as error:
            raise SignInUnavailableError(
                f"The identity provider's discovery document ({where}) cannot be read: {error}"
            ) from error
        url = document.get("jwks_uri") if isinstance(document, dict) else None
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise SignInUnavailableError(
                f"The identity provider's discovery document ({where}) names no jwks_uri."
            )
        return url

    def verify(self, token: str) -> Claims:
        """Return the member of staff an identity provider's ``token`` proves.

        Raises:
            AuthError: Not signed by one of the provider's keys (an unknown ``kid``
                included), another issuer or audience, expired, or without a usable login.
            NotStaffError: Valid, but its role claim holds no staff role.
            SignInUnavailableError: The provider's keys cannot be fetched.
        """
        config = self.config
        try:
            key = self._keys().get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError as error:
            raise SignInUnavailableError(
                "The identity provider's keys cannot be fetched now; try again shortly."
            ) from error
        except (jwt.PyJWKClientError, jwt.InvalidTokenError) as error:
            raise AuthError(
                "The token is not signed by a key the identity provider publishes."
            ) from error
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=OIDC_ALGORITHMS,
                audience=config.audience,
                issuer=config.issuer,
                leeway=OIDC_LEEWAY,
                options={"require": ["exp", "iat", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise AuthError("Your token has expired; sign in again.") from error
        except jwt.InvalidTokenError as error:
            raise AuthError("The token is not valid.") from error
        _lifetime_ok(claims)
        login = claims.get(config.login_claim)
        if not isinstance(login, str) or not login.strip():
            raise AuthError(f"The identity provider's token has no login ({config.login_claim}).")
        if (
            subject_problem(login) is not None
            or subject_problem(canonical_login(login)) is not None
        ):
            raise AuthError("The token is not valid.")
        role = _role_of(claims, config)
        name = claims.get(config.name_claim)
        # A name the desk cannot keep (too long, unprintable) is not shown: the login is.
        if not isinstance(name, str) or not name.strip() or subject_problem(name) is not None:
            name = ""
        expires = datetime.fromtimestamp(int(claims["exp"]), UTC)
        return Claims(login, expires, role, name)


def _role_of(claims: Mapping[str, Any], config: OidcConfig) -> Role:
    """Return the staff role the token's role claim holds (a supervisor's wins).

    Raises:
        NotStaffError: It holds neither.
    """
    found: Any = claims
    for part in config.role_claim.split("."):
        found = found.get(part) if isinstance(found, Mapping) else None
    values = {found} if isinstance(found, str) else set(found) if isinstance(found, list) else set()
    if config.supervisor_role in values:
        return SUPERVISOR
    if config.agent_role in values:
        return AGENT
    raise NotStaffError(
        f"Your sign-in carries no staff role ({config.role_claim} holds neither "
        f"{config.agent_role!r} nor {config.supervisor_role!r}); ask your administrator."
    )
