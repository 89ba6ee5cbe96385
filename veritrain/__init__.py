"""The `veritrain` command line."""
