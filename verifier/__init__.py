"""The verifier: a daemon that stakes, replays sampled segments of the traces it is drawn for, and reports (docs/roles.md)."""
