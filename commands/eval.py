"""``travel-assistant eval``: run the scenario suite against a real model."""

from __future__ import annotations

import argparse
import fnmatch
import tomllib
import traceback
from collections.abc import Sequence
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from commands.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Overrides,
    default_model_factory,
    read_reference_files,
)
from terminal import Console

if TYPE_CHECKING:
    from settings import Settings

DEFAULT_EVAL_SECONDS = 600.0


class _EvalProgress:
    """What ``eval`` shows while it runs: one line per trial, and on a terminal a bar.

    The bar advances per trial and shows the scenario and customer message under way and
    the pass rate so far; a real model takes minutes per scenario, so silence would look
    like a hang.
    """

    def __init__(self, console: Console, total: int) -> None:
        from rich.console import Console as RichConsole
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.console = console
        self.total = total
        self.finished = self.passed = 0
        self.current = ""
        terminal = RichConsole(file=console.err, no_color=not console.color)
        self.live = terminal.is_terminal
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=terminal,
            disable=not self.live,
        )
        self.task = self.bar.add_task("eval", total=total, rate="")

    def __enter__(self) -> _EvalProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def _line(self, text: str) -> None:
        if self.live:
            self.bar.console.print(text, markup=False, highlight=False, style="dim")
        else:
            self.console.status(text)

    def begin(self, scenario: str, trial: int) -> None:
        """A trial starts."""
        self.current = f"{scenario} trial {trial}"
        self.bar.update(self.task, description=self.current)
        if not self.live:
            self._line(f"{self.current}: running ({self.finished + 1} of {self.total})")

    def turn(self, index: int) -> None:
        """The customer sends message ``index`` (from 0) of the current trial."""
        self.bar.update(self.task, description=f"{self.current}, message {index + 1}")

    def end(self, passed: bool, verdict: str) -> None:
        """The current trial ended with ``verdict``."""
        self.finished += 1
        self.passed += passed
        rate = f"pass {self.passed}/{self.finished} ({self.passed / self.finished:.0%})"
        self.bar.update(self.task, advance=1, rate=rate)
        self._line(f"{self.current}: {verdict}")


def _open_records(path: Path | None) -> TextIO | None:
    if path is None:
        return None
    try:
        path.expanduser().parent.mkdir(parents=True, exist_ok=True)
        return path.expanduser().open("a", encoding="utf-8")
    except OSError as error:
        raise CliError(f"Cannot write the trial records to {path}: {error}.", EXIT_USAGE) from error


def _check_selection(names: Sequence[str], categories: Sequence[str]) -> None:
    """Refuse a ``--scenario`` or ``--category`` that matches no scenario, at once.

    Read from the scenario files' ``id`` and ``category`` alone, with the standard
    library: the scenarios' own reader (``evaluation.select_scenarios``, which says the
    same) loads the whole evaluation first, seconds before it could say it.
    """
    if not names and not categories:
        return
    folder = files("data") / "scenarios"
    found: list[tuple[str, str]] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        try:
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return  # the scenarios' reader says what is wrong with the file
        stem = entry.name.removesuffix(".toml")
        found.append((str(data.get("id", stem)), str(data.get("category", ""))))
    unknown = [n for n in names if not any(fnmatch.fnmatchcase(i, n) for i, _ in found)]
    if unknown:
        raise CliError(f"No scenario named {sorted(unknown)}.", EXIT_USAGE)
    known = sorted({category for _, category in found})
    unknown = [c for c in categories if c not in known]
    if unknown:
        raise CliError(f"No category {sorted(unknown)}; the categories are {known}.", EXIT_USAGE)


def cmd_eval(
    args: argparse.Namespace, settings: Settings, console: Console, overrides: Overrides
) -> int:
    """Run ``travel-assistant eval``: the scenarios against a real model.

    Each trial has a time limit; a provider error or the time limit ends that trial as
    an error and the suite goes on. With ``--jsonl`` every trial is appended to a file
    as soon as it ends, so nothing is lost when the run is stopped.
    """
    if args.trials < 1:
        raise CliError("--trials must be at least 1.", EXIT_USAGE)
    _check_selection(args.scenario or (), args.category or ())
    import statistics
    import tempfile
    from datetime import UTC, datetime

    from langchain_core.language_models import BaseChatModel

    import evaluation
    from db.engine import reference_data_dir
    from evaluation.trials import build_template, run_trials, template_location
    from tools.policies import POLICY_FILE_NAME, PolicyIndex

    try:
        scenarios = evaluation.select_scenarios(
            evaluation.load_scenarios(), args.scenario or (), args.category or ()
        )
    except evaluation.ScenarioError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    # The trials need the scenarios' own data, so each runs on a fresh copy of it: in
    # temporary SQLite files, or, when --db names a PostgreSQL database, in temporary
    # databases on that server (made from a template built for the run, dropped after).
    server: str | None = None
    if settings.db:
        named = settings.db_location
        if named.backend == "postgresql":
            server = named.sqlalchemy_url()
        where = "on its PostgreSQL server" if server else "in temporary files"
        console.status(
            f"eval runs every trial on its own copy of the scenario database, {where}; "
            f"{named.shown()} itself is neither read nor changed."
        )
    if args.list:
        for scenario in scenarios:
            console.say(f"{scenario.id:<40} {scenario.category:<12} {scenario.description}")
        return EXIT_OK
    factory = overrides.model_factory or partial(default_model_factory, settings)
    models = factory(None)  # names what to set when no endpoint is configured
    # Every trial's crew reads the default policy: a missing file stops the run here.
    policy = reference_data_dir(settings.data_dir) / POLICY_FILE_NAME
    read_reference_files(PolicyIndex(policy).load)
    customer_models = factory(args.customer_model)
    customer_model = (
        customer_models
        if isinstance(customer_models, BaseChatModel)
        else customer_models["primary_assistant"]
    )
    model_name = settings.models.model
    price = evaluation.PRICES_PER_MILLION.get(model_name)
    if args.price_in is not None and args.price_out is not None:
        price = (args.price_in, args.price_out)
    records = _open_records(args.jsonl)
    run_context = {
        "run": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": model_name,
        "customer_model": args.customer_model or model_name,
        "max_tokens": settings.max_tokens,
    }
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            template_location(server, Path(folder)) as template,
            _EvalProgress(console, len(scenarios) * args.trials) as progress,
        ):
            report = run_trials(
                scenarios,
                args.trials,
                models,
                customer_model,
                folder=Path(folder),
                template=template,
                clock=build_template(template, overrides.clock, settings.data_dir),
                seconds=args.time_limit,
                progress=progress,
                records=records,
                context=run_context,
                on_error=(lambda _error: traceback.print_exc()) if args.debug else None,
                data_dir=settings.data_dir,
            )
    finally:
        if records is not None:
            records.close()
    by_category, latencies, errors, spent = (
        report.by_category,
        report.latencies,
        report.errors,
        report.spent,
    )
    for line in evaluation.summarise(by_category, args.trials):
        console.say(line)
    cost = spent.cost(price)
    estimate = f"USD {cost:.4f}" if cost is not None else "n/a (pass --price-in/--price-out)"
    console.say(
        f"tokens: {spent.input_tokens} in, {spent.output_tokens} out; cost estimate: {estimate}"
    )
    if latencies:
        console.say(
            f"latency per customer message: median {statistics.median(latencies):.2f} s, "
            f"p95 {evaluation.percentile(latencies, 0.95):.2f} s"
        )
    if args.jsonl:
        console.status(f"Trial records appended to {args.jsonl}.")
    if errors:
        console.error(
            f"{errors} of {len(scenarios) * args.trials} trials ended in an error (see above); "
            "they count as failed."
        )
        return EXIT_ERROR
    return EXIT_OK
