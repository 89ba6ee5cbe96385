"""The whistleblower: a daemon that stakes, audits passing reports by replaying their probes and segments, and challenges the wrong ones in the window (docs/roles.md)."""
