"""A smoke test against a real model endpoint, run only when one is configured.

``pytest -m live`` (or a plain ``pytest``) runs it when ``OPENAI_API_KEY`` or
``OPENAI_BASE_URL`` is set in the environment that started pytest; otherwise it is
skipped. It drives the real terminal program in-process with piped input and checks that
a real model answers a question about the fixture passenger's own flight.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from cli import Console, Overrides, main
from db.fixtures import FIXTURE_FLIGHT_NO, FIXTURE_PASSENGER_ID

pytestmark = pytest.mark.live


def test_live_endpoint_answers_a_question_about_the_passengers_flight(
    live_endpoint: dict[str, str], tmp_path: Path
) -> None:
    out, err = io.StringIO(), io.StringIO()
    with create_pipe_input() as pipe:
        pipe.send_text("Which flight am I booked on? Answer with the flight number.\n")
        pipe.close()
        code = main(
            ["--home", str(tmp_path / "home"), "chat", "--passenger-id", FIXTURE_PASSENGER_ID],
            Overrides(console=Console(out=out, err=err), pt_input=pipe, pt_output=DummyOutput()),
        )
    assert code == 0, err.getvalue()
    assert FIXTURE_FLIGHT_NO in out.getvalue().replace(" ", ""), (out.getvalue(), err.getvalue())
