"""The `veritrain` command: one entry point, one sub-app or command per concern.

Each role adds its commands from its own module, with one line below::

    from submitter.cli import app as submit_app
    app.add_typer(submit_app, name="submit")

Errors: a :class:`core.errors.VeritrainError` reaching the top prints one
line on stderr and exits with the error's ``exit_code`` (no traceback); a usage
error (an unknown option, a bad value) prints one line and exits 2, as cast does;
Ctrl-C exits 130.
"""

from __future__ import annotations

import logging
import sys
from importlib import metadata
from typing import Annotated, Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError

from core.agent import CredentialFilter
from core.errors import VeritrainError
from core.reverts import ContractRevert, explain
from rolebase.cli import err_console
from solver.cli import app as solver_app
from submitter.cli import app as submit_app
from verifier.cli import app as verifier_app
from veritrain import data_cmd, demo, deploy_cmd, devnet_cmd, keys_cmd, model_cmd, money, spec_cmd, up_cmd, wallet, warm_cmd
from veritrain.dashboard.server import dashboard
from whistleblower.cli import app as whistleblower_app

__all__ = ["app", "VeritrainApp"]


class VeritrainApp(typer.Typer):
    """A Typer app whose expected failures end in one readable line and an exit code."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            code = super().__call__(*args, standalone_mode=False, **kwargs)
        except NoArgsIsHelpError as exc:
            print(exc.format_message())
            sys.exit(0)
        except UsageError as exc:
            where = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            err_console.print(f"[bold red]error:[/] {exc.format_message()}{where}", highlight=False, markup=True, soft_wrap=True)
            sys.exit(exc.exit_code)
        except ContractRevert as exc:  # the error's name and values are its str; its NatSpec says what it means
            meaning = explain(exc)
            err_console.print(f"[bold red]error:[/] {exc}{': ' + meaning if meaning else ''}", highlight=False, markup=True, soft_wrap=True)
            sys.exit(exc.exit_code)
        except VeritrainError as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False, markup=True, soft_wrap=True)
            sys.exit(exc.exit_code)
        except (KeyboardInterrupt, typer.Abort):
            err_console.print("interrupted")
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


app = VeritrainApp(
    name="veritrain",
    help="Buy machine-learning training from strangers, with proof that the training was done.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    add_completion=False,
)


def _version(given: bool) -> None:
    if given:
        print(f"veritrain {metadata.version('veritrain')}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", "-V", help="print the version and exit", is_eager=True, callback=_version)] = False,
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
app.command(name="up", no_args_is_help=False)(up_cmd.up)

for command in (money.balance, money.stake, money.unstake, money.withdraw, money.claim, money.transfer, money.fund, money.earnings):
    app.command()(command)
app.add_typer(wallet.app, name="wallet")
app.add_typer(keys_cmd.app, name="keys")
app.add_typer(model_cmd.app, name="model")
app.add_typer(spec_cmd.app, name="spec")
app.add_typer(data_cmd.app, name="data")
app.command()(wallet.init)
app.command(name="demo")(demo.demo)
app.command(name="dashboard")(dashboard)
app.command(name="warm", no_args_is_help=False)(warm_cmd.warm_kernels)
app.add_typer(submit_app, name="submit")
app.add_typer(solver_app, name="solver")
app.add_typer(verifier_app, name="verifier")
app.add_typer(whistleblower_app, name="whistleblower")
