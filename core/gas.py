"""What the protocol's transactions cost in gas, where a client must know it before sending: the
availability answer, whose calldata grows with the checkpoint it publishes, and so the largest
checkpoint a chain's blocks let a solver publish. Properties of the EVM's pricing and of the chain,
fitted to the contract (tests/chain/test_availability_gas.py holds the fit to anvil's receipts)."""

from __future__ import annotations

__all__ = ["answer_availability_gas", "answer_standard_gas", "max_published_checkpoint_bytes", "MAX_PROOF_HASHES", "ANSWER_BLOCK_SHARE"]

# The gas of an availability answer (``JobMarket.answerAvailability``) publishing a checkpoint of n
# bytes, every byte non-zero (the worst case; a checkpoint's floats are), with a Merkle proof of
# h hashes: the larger of the transaction's standard cost and its EIP-7623 calldata floor. Fitted to
# the measurements (snapshots/AvailabilityGas.json: standard; anvil, 4 KiB to 16 MiB:
# tests/chain/test_availability_gas.py), which it exceeds by at most 0.7 % (docs/protocol.md).
#: The transaction's intrinsic gas.
TX_BASE_GAS = 21_000
#: Calldata, standard: 16 gas a non-zero byte; floor (EIP-7623): 10 gas a token, 4 tokens a non-zero byte.
CALLDATA_GAS_PER_BYTE = 16
CALLDATA_FLOOR_GAS_PER_BYTE = 40
#: The log's data: 8 gas a byte.
LOG_GAS_PER_BYTE = 8
#: Per 32-byte word of content: copied to memory for keccak256 (3) and again for the log (3), hashed
#: (6), memory's linear cost (3).
ANSWER_GAS_PER_WORD = 15
#: Memory expansion's quadratic term: (words + the log's other words)^2 / 512, one content-sized region.
MEMORY_QUADRATIC_DIVISOR = 512
ANSWER_MEMORY_EXTRA_WORDS = 32
#: The rest, fitted at 4 KiB: the challenge cleared, the publication recorded, the deposit paid (standard);
#: the ABI words around the content (floor); and per proof hash, its calldata (and, standard, its keccak).
ANSWER_FIXED_GAS = 56_700
ANSWER_FLOOR_FIXED_GAS = 2_000
ANSWER_GAS_PER_PROOF_HASH = 620
ANSWER_FLOOR_GAS_PER_PROOF_HASH = 1_280
#: The deepest proof a solver may have to send: a publishable manifest lists at most ~1,310 checkpoints.
MAX_PROOF_HASHES = 11
#: A solver claims only jobs whose every checkpoint's answer fits in this share of a block, so that
#: the answer is mined in a busy block too.
ANSWER_BLOCK_SHARE = (2, 3)


def answer_availability_gas(content_bytes: int, proof_hashes: int = MAX_PROOF_HASHES) -> int:
    """The gas of an availability answer carrying ``content_bytes`` bytes of checkpoint (see above)."""
    floor = TX_BASE_GAS + ANSWER_FLOOR_FIXED_GAS + CALLDATA_FLOOR_GAS_PER_BYTE * content_bytes + ANSWER_FLOOR_GAS_PER_PROOF_HASH * proof_hashes
    return max(answer_standard_gas(content_bytes, proof_hashes), floor)


def answer_standard_gas(content_bytes: int, proof_hashes: int) -> int:
    """The answer's standard cost, without the EIP-7623 floor (what forge's gas snapshots measure)."""
    words = -(-content_bytes // 32)
    memory = words + ANSWER_MEMORY_EXTRA_WORDS
    return (
        TX_BASE_GAS
        + ANSWER_FIXED_GAS
        + (CALLDATA_GAS_PER_BYTE + LOG_GAS_PER_BYTE) * content_bytes
        + ANSWER_GAS_PER_WORD * words
        + memory * memory // MEMORY_QUADRATIC_DIVISOR
        + ANSWER_GAS_PER_PROOF_HASH * proof_hashes
    )


def max_published_checkpoint_bytes(block_gas_limit: int) -> int:
    """The largest checkpoint a solver can publish when its availability is challenged, on a chain whose
    blocks hold ``block_gas_limit`` gas (``eth_getBlockByNumber('latest').gasLimit``): its answer fits in
    :data:`ANSWER_BLOCK_SHARE` of a block (0 when none fits). A property of the chain, not of the protocol."""
    budget = block_gas_limit * ANSWER_BLOCK_SHARE[0] // ANSWER_BLOCK_SHARE[1]
    low, high = 0, budget // CALLDATA_GAS_PER_BYTE + 1  # every byte costs more than 16 gas: high does not fit
    while high - low > 1:  # low fits (or is 0), high does not
        mid = (low + high) // 2
        low, high = (mid, high) if answer_availability_gas(mid) <= budget else (low, mid)
    return low
