"""The log messages that operators grep for and the e2e tests wait on, declared once.

The daemons log them as the record's ``msg`` (``--log-json``); the chain-call and agent-loop messages
are ``core.agent.ACTION_DROPPED`` and ``core.agent.mined(call)``.
"""

from __future__ import annotations

TRAINING_STARTED = "training started"
TRAINING_RESUMED = "training resumed"
SEGMENT_REPLAYED = "segment replayed"
REPLAY_DONE = "replay done"
AUDIT_RECORDED = "audit recorded"
CHALLENGE_HELD = "challenge held: no committee can be seated"
JACKPOT_INCOME = "expected jackpot income per audit"
DEPLOYMENT_CHANGED = "deployment changed, starting afresh on the new one (the old records are kept)"
JOB_REFUSED = "job refused: it cannot be run here"
SPEC_JUDGED = "job spec judged"
