"""``python -m veritrain``: the same command as ``veritrain`` (the demo starts its daemons so)."""

from veritrain.cli import app

app()
