"""The submitter: post a training job, follow it, fetch the proven model (docs/roles.md)."""
