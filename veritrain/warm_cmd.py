"""`veritrain warm`: compile the exact-numerics kernels for this machine before a job needs them."""

from __future__ import annotations

import time

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from rolebase.cli import err_console


def warm_kernels() -> None:
    """Compile (or load from numba's cache) every repro-v1 and repro-v2 CPU kernel a job runs here.

    numba compiles each kernel on its first call and caches the machine code for this CPU. Without
    this, a fresh install's first job waits for them: about 2.7 minutes of a core on a 2-core Xeon,
    in a solver's first segment or a verifier's first replay. Run it once after installing or
    upgrading, and after moving to another CPU; from a warm cache it takes seconds.

    Examples:

      veritrain warm
    """
    from proofs.warm import STEPS, warm  # here: every other command starts without torch and numba

    started = time.monotonic()
    columns = ("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("compiling", total=STEPS)
        begun = 0

        def step(what: str) -> None:  # called before each step: the ones before it are done
            nonlocal begun
            bar.update(task, description=what, completed=begun)
            begun += 1

        warm(progress=step)
    err_console.print(f"repro-v1 and repro-v2 kernels ready for this CPU in {time.monotonic() - started:.0f} s", highlight=False)
