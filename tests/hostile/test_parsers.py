"""Every parser of outside bytes survives hostile input in a process where web3 is imported.

The fuzzing itself is in ``fuzz_parsers.py``, run as a child process: the failure this guards
against is a SIGSEGV (the C JSON parser overflowing the stack once web3 raised the recursion
limit), which would kill pytest itself in process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_the_unbounded_parser_crashes_where_web3_is_imported() -> None:
    """The hazard is real: a plain ``json.loads`` dies of SIGSEGV, no exception to catch."""
    done = _python("import web3, json\ntry:\n    json.loads('[' * 300000)\nexcept Exception:\n    pass", 60)
    assert done.returncode == -signal.SIGSEGV, (done.returncode, done.stderr[-500:])


def test_every_parser_of_outside_bytes_survives_hostile_input() -> None:
    done = subprocess.run(
        [sys.executable, "tests/hostile/fuzz_parsers.py"], cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    assert "parsers survived" in done.stdout
