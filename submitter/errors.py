"""The submitter's own error: an input it cannot act on."""

from __future__ import annotations

from core.errors import VeritrainError


class SubmitError(VeritrainError):
    """The submitter's input cannot be acted on (the message says which input and why)."""

    exit_code = 2
