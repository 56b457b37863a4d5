"""The CLI's help pages and usage errors (issue 27): each command speaks for itself.

Every help page has a one-line description, an example and the defaults of its options;
a usage error shows the usage of the command it was made in, not the whole program's.
"""

from __future__ import annotations

import argparse

import pytest

from cli import main
from commands.arguments import PAGES, _command_parsers, build_parser


def pages() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    found = [("", parser)]
    for command in _command_parsers(parser):
        found.append((command.prog.removeprefix("travel-assistant").strip(), command))
    return found


def test_every_help_page_has_a_description_an_example_and_the_defaults() -> None:
    seen = pages()
    assert {name for name, _ in seen} == set(PAGES)
    for name, parser in seen:
        page = parser.format_help()
        description, example = PAGES[name]
        assert "\n" not in description
        assert description in page, name
        assert f"example:\n  {example}" in page, name
        assert example.startswith(f"travel-assistant {name}".rstrip())
        for action in parser._actions:
            if action.option_strings and action.default not in (
                None,
                False,
                argparse.SUPPRESS,
            ):
                assert "default" in (action.help or "") or (
                    f"(default: {action.default})" in page
                ), (name, action.dest)


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["serve", "--bogus"], "usage: travel-assistant serve"),
        (["eval", "--trials", "2", "--nope"], "usage: travel-assistant eval"),
        (["db"], "usage: travel-assistant db"),
        (["db", "init", "--date", "tomorrow"], "usage: travel-assistant db init"),
        (["sessions", "delete", "x", "--bad"], "usage: travel-assistant sessions delete"),
        (["chat", "--passenger-id", "3442587242", "--wat"], "usage: travel-assistant chat"),
    ],
)
def test_a_usage_error_shows_its_own_commands_usage(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(usage), err
    assert "COMMAND ..." not in err.splitlines()[0]  # not the whole program's usage


def test_eval_summary_with_one_trial_has_one_pass_column() -> None:
    from evaluation.reports import summarise

    trials = {"flights": {"a": [True], "b": [False]}}
    one = summarise(trials, 1)
    assert one[0].split() == ["category", "scenarios", "pass^1"]
    assert one[-1].split() == ["all", "2", "0.50"]
    three = summarise({"flights": {"a": [True, True, False]}}, 3)
    assert three[0].split() == ["category", "scenarios", "pass^1", "pass^3"]
