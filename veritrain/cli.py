"""The `veritrain` command: one entry point, one sub-app or command per concern.

Each role adds its commands from its own module, with one line below::

    from submitter.cli import app as submit_app
    app.add_typer(submit_app, name="submit")

Errors: a :class:`core.errors.VeritrainError` reaching the top prints one
line on stderr and exits with the error's ``exit_code`` (no traceback);
Ctrl-C exits 130.
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated, Any

import typer

from core.agent import CredentialFilter
from core.errors import VeritrainError
from rolebase.cli import err_console
from solver.cli import app as solver_app
from submitter.cli import app as submit_app
from verifier.cli import app as verifier_app
from veritrain import demo, deploy_cmd, devnet_cmd
from whistleblower.cli import app as whistleblower_app

__all__ = ["app", "VeritrainApp"]


class VeritrainApp(typer.Typer):
    """A Typer app whose expected failures end in one readable line and an exit code."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except VeritrainError as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False, markup=True, soft_wrap=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            err_console.print("interrupted")
            sys.exit(130)


app = VeritrainApp(
    name="veritrain",
    help="Buy machine-learning training from strangers, with proof that the training was done.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    add_completion=False,
)


@app.callback()
def main(
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="more logs (-v info, -vv debug)")] = 0,
) -> None:
    """veritrain: escrowed training jobs, staked solvers and verifiers, proofs of learning on chain.

    Examples:

      veritrain devnet                      # local chain with the protocol deployed

      veritrain deploy --rpc http://127.0.0.1:8545 --key-env DEPLOYER_KEY
    """
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(CredentialFilter())  # web3 logs its endpoint URL at DEBUG


app.command(name="devnet", no_args_is_help=False)(devnet_cmd.devnet)
app.command(name="deploy")(deploy_cmd.deploy)

app.command(name="demo")(demo.demo)
app.add_typer(submit_app, name="submit")
app.add_typer(solver_app, name="solver")
app.add_typer(verifier_app, name="verifier")
app.add_typer(whistleblower_app, name="whistleblower")
