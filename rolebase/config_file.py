"""``--config FILE``: a daemon's options from a TOML file, flags on the command line overriding it.

The keys are the command's long option names, the values what the flag would take::

    # solver.toml: veritrain solver run --config solver.toml --poll 1
    rpc-url = "https://rpc.example"
    account = "gpu1"                 # a key by name, or keystore = "solver.json", or key-env = "SOLVER_KEY"
    password-file = "/run/secrets/veritrain"
    stake = "200"
    max-active = 2
    device = "cuda"
    log-json = true

Precedence: the command line, then environment variables that back an option (``VERITRAIN_*``),
then the file, then defaults. A repeatable flag takes an array (``peer = ["http://10.0.0.2:8088"]``).
A key that is not one of the command's (shown) options, a table or array where a value belongs, or a
value the option refuses fails the command with one line naming
the file and the key. No option takes a private key itself (only a keystore path, an account name
or the name of an env var), so a config file never holds one. Relative paths are read from the
working directory, as on the command line. The file is bounded in size and nesting before parsing.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

import typer

from core.bounded import MAX_DEPTH, InputRejected, json_depth, read_regular_file

__all__ = ["ConfigFile", "read_config"]

_MAX_CONFIG_BYTES = 64 * 1024


def _options_by_key(ctx: typer.Context) -> dict[str, Any]:
    """The command's shown options by long name without the dashes (``rpc-url`` and ``rpc`` alike)."""
    return {
        opt[2:]: param
        for param in ctx.command.params
        if param.param_type_name == "option" and not getattr(param, "hidden", False) and param.name != "config"
        for opt in param.opts
        if opt.startswith("--")
    }


def read_config(ctx: typer.Context, value: Path | None) -> Path | None:
    """The ``--config`` callback (eager: before every other option): checks the file's keys and values
    against the command's options and makes them the command's defaults (``ctx.default_map``)."""
    if value is None:
        return None

    def bad(why: str) -> typer.BadParameter:
        return typer.BadParameter(f"{value}: {why}", ctx=ctx, param_hint="--config")

    try:
        data = read_regular_file(value, max_bytes=_MAX_CONFIG_BYTES, what="config file")
        if json_depth(data) > MAX_DEPTH:
            raise InputRejected(f"config file nested deeper than {MAX_DEPTH} brackets")
        table = tomllib.loads(data.decode())
    except (InputRejected, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise bad(str(exc).splitlines()[0]) from None
    options = _options_by_key(ctx)
    defaults: dict[str, Any] = {}
    for key, raw in table.items():
        option = options.get(key)
        if option is None:
            raise bad(f"unknown key {key!r} (the keys are this command's long options: {', '.join(sorted(options))})")
        many = getattr(option, "multiple", False)  # a repeatable flag (--peer) takes an array of values
        if isinstance(raw, dict) or (isinstance(raw, list) and (not many or any(isinstance(v, dict | list) for v in raw))):
            kind = "a table" if isinstance(raw, dict) else "an array" if not many else "an array of arrays or tables"
            raise bad(f"{key}: {'an array of strings, numbers or booleans' if many else 'a string, number or boolean'}, not {kind}")
        if many and not isinstance(raw, list):
            raw = [raw]
        try:
            option.process_value(ctx, raw)  # converted and range-checked as the flag would be
        except typer.BadParameter as exc:
            raise bad(f"{key} = {raw!r}: {exc.message}") from None
        defaults[option.name] = raw
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return value


ConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help='TOML file of this command\'s options by long name (rpc-url = "...", stake = "200"); flags on the command line override it (docs/cli.md)',
        is_eager=True,
        callback=read_config,
        show_default=False,
    ),
]
