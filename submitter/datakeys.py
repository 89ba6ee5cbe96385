"""Where the submitter keeps a sealed job's data key, and the seal that follows its post (issue 30,
docs/sealing.md).

The data key is drawn before the post and written here first, so a crash between the post and the
seal, or any later, loses nothing: ``submit seal`` and ``submit watch`` find it from the job's spec
(its sealed dataset's CID names the file). Kept apart from ``submitter.sealed`` (which reads jobs
through ``submitter.service``) so that ``service.post_job`` can seal without an import cycle.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from core.chain import Address, Receipt
from core.cid import Cid, validate_cid
from core.contracts import JobId, Protocol, TokenAmount
from core.sealing import DATA_KEY_BYTES, key_hash, read_secret, write_secret

log = logging.getLogger(__name__)


class DataKeys:
    """The data keys of our sealed jobs by their sealed dataset's CID: ``<root>/<CID>``, the 32 raw
    bytes, mode 0600 in a directory of mode 0700, created never overwritten (losing one loses the job's
    data to its buyer; overwriting one would lose it the same way)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def of(cls, data_dir: Path) -> DataKeys:
        return cls(data_dir / "data-keys")

    def path(self, dataset_cid: str) -> Path:
        return self.root / validate_cid(dataset_cid)

    def keep(self, dataset_cid: Cid, data_key: bytes) -> Path:
        """Write ``data_key`` to a new file (synced before it returns: the job is posted next)."""
        path = self.path(dataset_cid)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        write_secret(path, data_key, "data key file")
        return path

    def load(self, dataset_cid: str) -> bytes:
        """The key kept for ``dataset_cid``, refusing a file that is not a regular file of 32 bytes or
        that anyone but its owner may read or write."""
        return read_secret(self.path(dataset_cid), DATA_KEY_BYTES, "data key file", "the job was not posted with --sealed from this data directory")


def seal_job(protocol: Protocol, me: Address, job_id: JobId, data_key: bytes) -> dict[str, Receipt]:
    """As ``me``, the job's submitter: approve the key bond (the job's reward + verifier fee) to
    ``SealedJobs`` and seal the job under ``data_key``'s hash."""
    job = protocol.market.get_job(job_id)
    bond = TokenAmount(job.reward + job.verifier_fee)
    sealed, token = protocol.sealed_jobs, protocol.token
    receipts: dict[str, Receipt] = {}
    if token.allowance(me, sealed.address) < bond:
        receipts["approveBond"] = token.approve(sealed.address, bond)
    receipts["seal"] = sealed.seal(job_id, key_hash(data_key))
    log.info("job sealed", extra={"job": job_id, "bond": bond})
    return receipts
