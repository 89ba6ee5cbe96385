"""The solver: a daemon that stakes, claims jobs it can run, trains, commits and collects its pay (docs/roles.md)."""
