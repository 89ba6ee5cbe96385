"""Verifier TEST adversaries, chosen in one place (:func:`strategies`) and nowhere else.

- ``lazy``: passes every trace without replaying, guessing each probe as the solver's checkpoint at
  the end of the probe's segment (a plausible state, and a wrong one: a whistleblower catches it).
- ``lie``: fails every trace, accusing its first replayed segment, and answers every midpoint of a
  dispute game wrong (the referees rule against it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from core.contracts import Game, GameId, JobId
from proofs.data import Dataset
from proofs.manifest import Manifest
from proofs.probes import Probe
from proofs.replay import SegmentVerdict
from proofs.spec import JobSpec
from rolebase.dispute import DisputeReplayer
from verifier.work import TraceVerifier

log = logging.getLogger(__name__)


class LazyTraceVerifier(TraceVerifier):
    def _replay(
        self,
        job_id: JobId,
        spec: JobSpec,
        dataset: Dataset,
        manifest: Manifest,
        replayed: list[int],
        positions: Sequence[tuple[int, int, int]],
        deadline: int,
        report: dict[str, object],
    ) -> tuple[list[SegmentVerdict], list[Probe]]:
        log.warning("report passed without replay (lazy test adversary)", extra={"job": job_id})
        return [], [Probe(i, segment, step, manifest.state_hashes[segment + 1]) for i, segment, step in positions]

    def _conclude(self, verdicts: Sequence[SegmentVerdict]) -> tuple[bool, int | None, str]:
        return True, None, "passed without replay (lazy verifier, test adversary)"


class LyingTraceVerifier(TraceVerifier):
    def _conclude(self, verdicts: Sequence[SegmentVerdict]) -> tuple[bool, int | None, str]:
        passed, failed, summary = super()._conclude(verdicts)
        if not passed or not verdicts:
            return passed, failed, summary
        accused = min(v.segment for v in verdicts)
        return False, accused, f"segment {accused} accused by a lying verifier (test adversary)"


class LyingReplayer(DisputeReplayer):
    def answer(self, game_id: GameId, game: Game) -> bool:
        return not super().answer(game_id, game)


def strategies(*, lie: bool, lazy: bool) -> tuple[type[TraceVerifier], type[DisputeReplayer]]:
    """The trace verifier and dispute replayer classes a verifier runs: honest unless a TEST flag is set
    (the CLI refuses both at once)."""
    if lie:
        return LyingTraceVerifier, LyingReplayer
    if lazy:
        return LazyTraceVerifier, DisputeReplayer
    return TraceVerifier, DisputeReplayer
