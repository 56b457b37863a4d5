"""Tokens: issued, checked, expired, forged; their roles; the secret; ``travel-assistant token``."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jwt
import pytest

from conversations.desk import AGENT_CHARS
from db.fixtures import FIXTURE_PASSENGER_ID
from server.auth import (
    AGENT,
    ALGORITHM,
    AUDIENCE,
    CUSTOMER,
    ISSUER,
    MAX_LIFETIME,
    MAX_SUBJECT_CHARS,
    MIN_SECRET_CHARS,
    SECRET_ENV,
    SECRET_FILE,
    SUPERVISOR,
    AuthError,
    SecretError,
    TokenSigner,
    load_secret,
)
from tests.support.cli import run

SECRET = "s" * 40


def test_server_token_round_trip() -> None:
    signer = TokenSigner(SECRET)
    claims = signer.verify(signer.issue(FIXTURE_PASSENGER_ID, timedelta(hours=2)))
    assert claims.passenger_id == FIXTURE_PASSENGER_ID
    assert (
        timedelta(hours=1, minutes=59) < claims.expires_at - datetime.now(UTC) <= timedelta(hours=2)
    )


def test_server_token_expires() -> None:
    signer = TokenSigner(SECRET)
    token = signer.issue(
        FIXTURE_PASSENGER_ID, timedelta(hours=1), now=datetime.now(UTC) - timedelta(hours=2)
    )
    with pytest.raises(AuthError, match="expired"):
        signer.verify(token)


def test_server_token_of_another_secret_or_altered_is_refused() -> None:
    token = TokenSigner(SECRET).issue(FIXTURE_PASSENGER_ID)
    with pytest.raises(AuthError, match="not valid"):
        TokenSigner("t" * 40).verify(token)
    header, payload, signature = token.split(".")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    with pytest.raises(AuthError):
        TokenSigner(SECRET).verify(f"{header}.{payload}.{flipped}")


def test_server_signer_refuses_a_short_secret_and_long_lifetimes() -> None:
    with pytest.raises(SecretError):
        TokenSigner("short")
    with pytest.raises(ValueError, match="30 days"):
        TokenSigner(SECRET).issue(FIXTURE_PASSENGER_ID, timedelta(days=31))


def test_server_token_lives_thirty_days_at_most_and_not_a_second_more() -> None:
    signer = TokenSigner(SECRET)
    now = datetime.now(UTC).replace(microsecond=0)
    longest = signer.verify(signer.issue(FIXTURE_PASSENGER_ID, timedelta(days=30), now=now))
    assert longest.expires_at == now + timedelta(days=30)
    with pytest.raises(ValueError, match="30 days"):
        signer.issue(FIXTURE_PASSENGER_ID, timedelta(days=30, seconds=1), now=now)


def _signed(claims: dict[str, object]) -> str:
    """A token signed with the service's own secret, whatever it says."""
    now = int(datetime.now(UTC).timestamp())
    base = {"iat": now, "exp": now + 3600, "iss": ISSUER, "aud": AUDIENCE, "role": CUSTOMER}
    return jwt.encode({**base, **claims}, SECRET, algorithm=ALGORITHM)


@pytest.mark.parametrize(
    "subject", ["\ud800", "3442\x00587242", "a\nb", "x" * (MAX_SUBJECT_CHARS + 1)]
)
def test_server_token_signed_with_the_secret_but_a_bad_subject_is_refused(subject: str) -> None:
    signer = TokenSigner(SECRET)
    with pytest.raises(AuthError, match="not valid"):
        signer.verify(_signed({"sub": subject}))
    with pytest.raises(ValueError, match=r"not printable|longer than"):
        signer.issue(subject)


def test_server_token_subject_of_the_longest_length_is_accepted() -> None:
    signer = TokenSigner(SECRET)
    name = "x" * MAX_SUBJECT_CHARS
    assert signer.verify(_signed({"sub": name})).subject == name
    assert MAX_SUBJECT_CHARS == AGENT_CHARS  # the name checked is the name stored


def test_server_token_living_longer_than_thirty_days_is_refused_however_signed() -> None:
    signer = TokenSigner(SECRET)
    now = int(datetime.now(UTC).timestamp())
    longest = int(MAX_LIFETIME.total_seconds())
    assert signer.verify(_signed({"sub": "ana", "iat": now, "exp": now + longest}))
    with pytest.raises(AuthError, match="30 days"):
        signer.verify(_signed({"sub": "ana", "iat": now, "exp": now + longest + 1}))


def test_server_secret_of_exactly_the_minimum_length_is_accepted_and_one_less_is_not(
    tmp_path: Path,
) -> None:
    shortest, too_short = "k" * MIN_SECRET_CHARS, "k" * (MIN_SECRET_CHARS - 1)
    assert TokenSigner(shortest).verify(TokenSigner(shortest).issue(FIXTURE_PASSENGER_ID))
    with pytest.raises(SecretError):
        TokenSigner(too_short)
    assert load_secret(tmp_path, env={SECRET_ENV: shortest}) == shortest
    with pytest.raises(SecretError, match=f"at least {MIN_SECRET_CHARS}"):
        load_secret(tmp_path, env={SECRET_ENV: too_short})
    path = tmp_path / SECRET_FILE
    for text, accepted in ((shortest, True), (too_short, False)):
        path.unlink(missing_ok=True)
        descriptor = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(text + "\n")
        if accepted:
            assert load_secret(tmp_path, env={}) == shortest
        else:
            with pytest.raises(SecretError, match="too short"):
                load_secret(tmp_path, env={})


def test_server_secret_is_made_once_and_private(tmp_path: Path) -> None:
    first = load_secret(tmp_path / "home", env={})
    path = tmp_path / "home" / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret(tmp_path / "home", env={}) == first
    assert len(first) >= 32
    assert [p.name for p in path.parent.iterdir()] == [SECRET_FILE]  # no scratch file left


@pytest.mark.parametrize(
    "mode",
    [0o644, 0o640, 0o604, 0o620, 0o610],
    ids=[
        "other-and-group-readable",
        "group-readable",
        "other-readable",
        "group-writable",
        "group-executable",
    ],
)
def test_server_secret_open_to_anyone_but_its_owner_is_refused(tmp_path: Path, mode: int) -> None:
    # Anyone in the file's group who can read the secret can sign tokens for any passenger.
    load_secret(tmp_path, env={})
    os.chmod(tmp_path / SECRET_FILE, mode)
    with pytest.raises(SecretError, match="chmod 600"):
        load_secret(tmp_path, env={})


def test_server_secret_from_the_environment(tmp_path: Path) -> None:
    assert load_secret(tmp_path, env={SECRET_ENV: "e" * 40}) == "e" * 40
    assert not (tmp_path / SECRET_FILE).exists()
    with pytest.raises(SecretError, match="at least 32"):
        load_secret(tmp_path, env={SECRET_ENV: "too-short"})


def test_cli_token_prints_a_token_the_service_accepts(db_path: Path, tmp_path: Path) -> None:
    home = tmp_path / "app"
    result = run(
        ["--home", str(home), "--db", str(db_path), "token", "--passenger-id", "3442587242"]
    )
    assert result.code == 0, result.err
    token = result.out.strip()
    assert "\n" not in token  # stdout is the token alone: TOKEN=$(travel-assistant token ...)
    claims = TokenSigner(load_secret(home, env={})).verify(token)
    assert claims.passenger_id == FIXTURE_PASSENGER_ID  # written the way the database writes it
    assert "valid for 24 hours" in result.err
    assert f"http://127.0.0.1:8000/#token={token}" in result.err  # the ready link


def test_cli_token_refuses_unknown_passengers_and_bad_lifetimes(
    db_path: Path, tmp_path: Path
) -> None:
    base = ["--home", str(tmp_path / "app"), "--db", str(db_path), "token"]
    result = run([*base, "--passenger-id", "0000 000000"])
    assert (result.code, result.out) == (2, "")
    assert "No passenger with id '0000 000000'" in result.err
    result = run([*base, "--passenger-id", FIXTURE_PASSENGER_ID, "--hours", "0"])
    assert (result.code, result.out) == (2, "")
    assert "--hours" in result.err


@pytest.mark.parametrize(
    ("hours", "lifetime"),
    [("720", timedelta(days=30)), (repr(1 / 60), timedelta(minutes=1))],
    ids=["the-longest", "the-shortest"],
)
def test_cli_token_issues_the_longest_and_the_shortest_lifetimes(
    db_path: Path, tmp_path: Path, hours: str, lifetime: timedelta
) -> None:
    home = tmp_path / "app"
    base = ["--home", str(home), "--db", str(db_path), "token"]
    before = datetime.now(UTC).replace(microsecond=0)
    result = run([*base, "--passenger-id", FIXTURE_PASSENGER_ID, f"--hours={hours}"])
    assert result.code == 0, result.err
    claims = TokenSigner(load_secret(home, env={})).verify(result.out.strip())
    assert before + lifetime <= claims.expires_at <= datetime.now(UTC) + lifetime


@pytest.mark.parametrize("hours", ["nan", "inf", "-inf", "1e20", "-1", "720.5", "0.01"])
def test_cli_token_refuses_hours_that_are_not_a_lifetime(tmp_path: Path, hours: str) -> None:
    home = tmp_path / "app"
    result = run(["--home", str(home), "token", "--passenger-id", "x", f"--hours={hours}"])
    assert (result.code, result.out) == (2, "")
    assert "--hours must be between 1/60 and 720 hours." in result.err
    assert not home.exists()  # refused before any database was built, or a secret made


def test_cli_token_checks_the_secret_before_building_a_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "abc")
    home = tmp_path / "app"
    result = run(["--home", str(home), "token", "--passenger-id", FIXTURE_PASSENGER_ID])
    assert (result.code, result.out) == (2, "")
    assert "token_urlsafe" in result.err
    assert not (home / "travel.sqlite").exists()


def test_cli_token_with_a_short_secret_names_the_fix(
    db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "abc")
    result = run(
        [
            "--home",
            str(tmp_path),
            "--db",
            str(db_path),
            "token",
            "--passenger-id",
            FIXTURE_PASSENGER_ID,
        ]
    )
    assert (result.code, result.out) == (2, "")
    assert "token_urlsafe" in result.err


def test_cli_serve_refuses_a_bad_port(tmp_path: Path) -> None:
    result = run(["--home", str(tmp_path), "serve", "--port", "70000"])
    assert (result.code, result.out) == (2, "")
    assert "--port must be between 1 and 65535" in result.err


@pytest.mark.parametrize("option", ["--header-timeout", "--body-timeout", "--max-connections"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_cli_serve_refuses_limits_that_are_not_positive_numbers(
    tmp_path: Path, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        run(["--home", str(tmp_path), "serve", f"{option}={value}"])
    assert stopped.value.code == 2
    assert "must be a positive" in capsys.readouterr().err


def test_server_token_roles_customer_by_default_supervisor_acts_for_no_passenger() -> None:
    signer = TokenSigner(SECRET)
    assert signer.verify(signer.issue(FIXTURE_PASSENGER_ID)).role == CUSTOMER
    claims = signer.verify(signer.issue("ana", role=SUPERVISOR))
    assert (claims.role, claims.subject) == (SUPERVISOR, "ana")
    with pytest.raises(AuthError, match="acts for no passenger"):
        _ = claims.passenger_id
    now = datetime.now(UTC)
    base = {"sub": FIXTURE_PASSENGER_ID, "iat": now, "exp": now + timedelta(hours=1)}
    base |= {"iss": ISSUER, "aud": AUDIENCE}
    # A token issued before roles existed is a customer's.
    old = signer.verify(jwt.encode(base, SECRET, algorithm=ALGORITHM))
    assert (old.role, old.passenger_id) == (CUSTOMER, FIXTURE_PASSENGER_ID)
    for role in ("admin", "Supervisor", 1, None):
        with pytest.raises(AuthError):
            signer.verify(jwt.encode({**base, "role": role}, SECRET, algorithm=ALGORITHM))
    with pytest.raises(ValueError, match="role"):
        signer.issue("ana", role="admin")  # type: ignore[arg-type]


def test_cli_token_supervisor_prints_a_token_that_says_what_it_can_do(tmp_path: Path) -> None:
    home = tmp_path / "app"
    result = run(["--home", str(home), "token", "--supervisor", "  Ana   López "])
    assert result.code == 0, result.err
    claims = TokenSigner(load_secret(home, env={})).verify(result.out.strip())
    assert (claims.role, claims.subject, claims.name) == (SUPERVISOR, "Ana López", "")
    said = " ".join(result.err.split())
    assert "changes nothing" not in said and "/supervisor" in said
    assert "proposes actions and decides second approvals" in said
    assert "never one it proposed" in said  # four eyes, said where the token is made
    assert "reads every conversation and the audit log" in said
    # Without --name, customers see the login: the output says so, and how to change it.
    assert 'customers see "Ana López": give --name NAME' in said
    assert not (home / "travel.sqlite").exists()  # no passenger to look up, no database
    longest = "x" * MAX_SUBJECT_CHARS  # what the desk stores of a name, and no more
    assert run(["--home", str(home), "token", "--supervisor", longest]).code == 0
    for bad in ("", "   ", "a\x07b", "x" * (MAX_SUBJECT_CHARS + 1)):
        refused = run(["--home", str(home), "token", "--supervisor", bad])
        assert (refused.code, refused.out) == (2, ""), bad
        assert "--supervisor takes who you are" in refused.err
    with pytest.raises(SystemExit) as both:
        run(["--home", str(home), "token", "--supervisor", "ana", "--passenger-id", "x"])
    assert both.value.code == 2


def test_server_token_roles_agent_and_supervisor_carry_a_login_and_a_name() -> None:
    signer = TokenSigner(SECRET)
    agent = signer.verify(signer.issue("ana@example.com", role=AGENT, name="Ana Lima"))
    assert (agent.role, agent.subject, agent.name) == (AGENT, "ana@example.com", "Ana Lima")
    assert agent.shown_name == "Ana Lima"
    with pytest.raises(AuthError, match="An agent's token acts for no passenger"):
        _ = agent.passenger_id
    # A token issued before names existed shows its login.
    older = signer.verify(signer.issue("bruno@example.com", role=SUPERVISOR))
    assert (older.name, older.shown_name) == ("", "bruno@example.com")
    longest = "x" * MAX_SUBJECT_CHARS
    assert signer.verify(signer.issue("ana", role=AGENT, name=longest)).name == longest
    with pytest.raises(ValueError, match="Only a member of staff's token carries a name"):
        signer.issue(FIXTURE_PASSENGER_ID, name="Elena")
    for bad in ("", "  ", "a\nb", "a\x00b", "\ud800", "x" * (MAX_SUBJECT_CHARS + 1)):
        with pytest.raises(ValueError, match=r"name (is blank|holds|is longer)"):
            signer.issue("ana", role=AGENT, name=bad)


@pytest.mark.parametrize(
    "claims",
    [
        {"role": AGENT, "name": "\ud800"},
        {"role": AGENT, "name": "Ana\x00Lima"},
        {"role": AGENT, "name": "Ana\nLima"},
        {"role": SUPERVISOR, "name": "x" * (MAX_SUBJECT_CHARS + 1)},
        {"role": SUPERVISOR, "name": "   "},
        {"role": SUPERVISOR, "name": None},
        {"role": SUPERVISOR, "name": 7},
        {"role": SUPERVISOR, "name": ["Ana"]},
        {"role": CUSTOMER, "name": "Elena"},
        {"role": AGENT, "sub": "ana@example.com\x07"},
    ],
    ids=[
        "lone-surrogate",
        "nul",
        "newline",
        "too-long",
        "blank",
        "null",
        "a-number",
        "a-list",
        "a-customer-with-a-name",
        "control-character-login",
    ],
)
def test_server_token_signed_with_the_secret_but_a_bad_name_is_refused(
    claims: dict[str, object],
) -> None:
    signer = TokenSigner(SECRET)
    with pytest.raises(AuthError, match="not valid"):
        signer.verify(_signed({"sub": "ana@example.com", **claims}))


def test_cli_token_agent_prints_a_token_with_its_login_and_name(tmp_path: Path) -> None:
    home = tmp_path / "app"
    result = run(
        ["--home", str(home), "token", "--agent", " ana@example.com ", "--name", " Ana   Lima "]
    )
    assert result.code == 0, result.err
    claims = TokenSigner(load_secret(home, env={})).verify(result.out.strip())
    assert (claims.role, claims.subject, claims.name) == (AGENT, "ana@example.com", "Ana Lima")
    said = " ".join(result.err.split())
    assert said.startswith('Agent token for ana@example.com (customers see "Ana Lima")')
    assert "does not decide second approvals" in said
    assert "nor read other conversations or the audit log" in said
    assert not (home / "travel.sqlite").exists()
    supervisor = run(["--home", str(home), "token", "--supervisor", "bruno", "--name", "Bruno"])
    assert supervisor.code == 0, supervisor.err
    assert TokenSigner(load_secret(home, env={})).verify(supervisor.out.strip()).name == "Bruno"
    for bad in ("", "   ", "a\x07b", "x" * (MAX_SUBJECT_CHARS + 1)):
        refused = run(["--home", str(home), "token", "--agent", bad])
        assert (refused.code, refused.out) == (2, ""), bad
        assert "--agent takes who you are" in refused.err
        named = run(["--home", str(home), "token", "--agent", "ana", "--name", bad])
        assert (named.code, named.out) == (2, ""), bad
        assert "--name takes the name customers see" in named.err
    longest = "x" * MAX_SUBJECT_CHARS
    assert run(["--home", str(home), "token", "--agent", longest, "--name", longest]).code == 0
    # A passenger's token carries no name; a token is for one kind of person.
    passenger = run(["--home", str(home), "token", "--passenger-id", "x", "--name", "Elena"])
    assert (passenger.code, passenger.out) == (2, "")
    assert "--name is the name a member of staff goes by" in passenger.err
    with pytest.raises(SystemExit) as both:
        run(["--home", str(home), "token", "--agent", "ana", "--supervisor", "ana"])
    assert both.value.code == 2
