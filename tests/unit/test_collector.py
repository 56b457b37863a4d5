"""The collector pauses while the program loads its code, and only in the program's process.

Each case runs in a fresh interpreter: freezing the test process's objects would keep
its garbage for the rest of the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(done.stdout)


def test_a_load_pauses_the_collector_then_freezes_what_it_loaded() -> None:
    seen = _run(
        """
        import gc, json
        import collector
        collector.own_process()
        before = gc.get_freeze_count()
        with collector.loading_code():
            during = gc.isenabled()
            kept = [[] for _ in range(1000)]
        print(json.dumps({"during": during, "after": gc.isenabled(),
                          "frozen": gc.get_freeze_count() - before}))
        """
    )
    assert seen == {"during": False, "after": True, "frozen": seen["frozen"]}
    assert isinstance(seen["frozen"], int) and seen["frozen"] >= 1000


def test_overlapping_loads_resume_the_collector_when_the_last_ends() -> None:
    seen = _run(
        """
        import gc, json, threading
        import collector
        collector.own_process()
        first_in, second_done = threading.Event(), threading.Event()
        states = {}
        def first():
            with collector.loading_code():
                first_in.set()
                second_done.wait(10)
                states["first, after the second ended"] = gc.isenabled()
        thread = threading.Thread(target=first)
        thread.start()
        first_in.wait(10)
        with collector.loading_code():
            states["second"] = gc.isenabled()
        second_done.set()
        thread.join(10)
        states["after both"] = gc.isenabled()
        print(json.dumps(states))
        """
    )
    assert seen == {"second": False, "first, after the second ended": False, "after both": True}


def test_a_collector_that_was_off_stays_off() -> None:
    seen = _run(
        """
        import gc, json
        import collector
        collector.own_process()
        gc.disable()
        with collector.loading_code():
            pass
        print(json.dumps({"after": gc.isenabled()}))
        """
    )
    assert seen == {"after": False}


def test_a_process_that_is_not_the_programs_keeps_its_collector() -> None:
    seen = _run(
        """
        import gc, json
        import collector
        with collector.loading_code():
            during = gc.isenabled()
        print(json.dumps({"during": during, "frozen": gc.get_freeze_count()}))
        """
    )
    assert seen == {"during": True, "frozen": 0}


def test_an_error_in_the_load_still_resumes_the_collector() -> None:
    seen = _run(
        """
        import gc, json
        import collector
        collector.own_process()
        try:
            with collector.loading_code():
                raise ValueError("the build failed")
        except ValueError:
            pass
        print(json.dumps({"after": gc.isenabled()}))
        """
    )
    assert seen == {"after": True}


def test_the_console_script_owns_its_process() -> None:
    # ``cli.run`` is the installed command's entry point: it must claim the process
    # before it dispatches (``--version`` exits at once, after the claim).
    seen = _run(
        """
        import contextlib, io, json, sys
        import cli, collector
        sys.argv = ["travel-assistant", "--version"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            cli.run()
        print(json.dumps({"owned": collector._owned}))
        """
    )
    assert seen == {"owned": True}
