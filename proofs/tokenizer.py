"""The shipped tokenizer: a byte-level BPE (GPT-2's scheme) whose merges are package data.

Text is UTF-8 encoded, cut into chunks by :data:`CHUNK` (GPT-2's pre-tokenizer over bytes:
contractions, a word with its leading space, a number, a run of punctuation, whitespace), a chunk
longer than :data:`MAX_PIECE` bytes into pieces of that length (so a line without spaces costs
linear time, not quadratic), and each piece's bytes are merged pair by pair, lowest rank first,
as the merges file says. Token
``i < 256`` is byte ``i``; token ``256 + r`` is merge ``r``. Every byte string has an encoding
and decodes back to itself, so ``decode(encode(text)) == text`` for any text.

The merges (``proofs/datasets/bpe-merges.txt``, one ``left right`` pair of token ids a line)
were learnt from the shipped Shakespeare corpus by :func:`train`, which is deterministic (ties
go to the smallest pair), so ``python -m proofs.tokenizer train`` rewrites the same file.
Nothing here is unpickled or downloaded.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from core.bounded import InputRejected

__all__ = ["CHUNK", "MAX_PIECE", "VOCAB_SIZE", "Tokenizer", "pieces", "shipped", "train"]

#: GPT-2's pre-tokenizer over bytes; a byte >= 0x80 (UTF-8 beyond ASCII) counts as a letter.
CHUNK = re.compile(rb"'(?:s|t|re|ve|m|ll|d)| ?[A-Za-z\x80-\xff]+| ?[0-9]+| ?[^\sA-Za-z0-9\x80-\xff]+|\s+(?!\S)|\s+")
#: The longest run of bytes merged as one (English words are under 20; the corpus's longest chunk is 17).
MAX_PIECE = 64
#: The shipped tokenizer's vocabulary: 256 bytes and 3,840 merges.
VOCAB_SIZE = 4096
_MERGES = "datasets/bpe-merges.txt"
_HEADER = "# veritrain byte-level BPE: token 256+r is line r's pair 'left right'"
#: Pieces whose tokens are remembered (a corpus has far fewer distinct words; the cache restarts when full).
_CACHE = 1 << 16
#: How many bytes of text pass between two progress calls.
_PROGRESS_EVERY = 1 << 20


class Tokenizer:
    """Encode text to token ids (uint16: at most 65,536 tokens) and decode them back."""

    def __init__(self, merges: Sequence[tuple[int, int]]) -> None:
        for rank, (left, right) in enumerate(merges):
            if not (0 <= left < 256 + rank and 0 <= right < 256 + rank):
                raise InputRejected(f"merge {rank} ({left} {right}) names a token that does not exist yet")
        if len(set(merges)) != len(merges):
            raise InputRejected("the merges name one pair twice")
        if 256 + len(merges) > 1 << 16:
            raise InputRejected(f"{256 + len(merges):,} tokens do not fit in uint16")
        self.merges = tuple(merges)
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.pieces = [bytes([b]) for b in range(256)]
        for left, right in self.merges:
            self.pieces.append(self.pieces[left] + self.pieces[right])
        self._cache: dict[bytes, tuple[int, ...]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def encode(self, text: str | bytes, progress: Callable[[int], None] | None = None) -> array[int]:
        """The tokens of ``text`` (a str is UTF-8 encoded) as ``array('H')``; ``progress`` is called
        with the bytes done so far every MiB and at the end."""
        data = text.encode() if isinstance(text, str) else text
        out: array[int] = array("H")
        done = reported = 0
        for piece in pieces(data):
            out.extend(self._piece(piece))
            done += len(piece)
            if progress is not None and done - reported >= _PROGRESS_EVERY:
                reported = done
                progress(reported)
        if progress is not None:
            progress(len(data))
        return out

    def decode_bytes(self, tokens: Iterable[int]) -> bytes:
        pieces = self.pieces
        try:
            return b"".join(pieces[t] for t in tokens)
        except (IndexError, TypeError):
            raise InputRejected(f"a token is not an id in [0, {self.vocab_size})") from None

    def decode(self, tokens: Iterable[int]) -> str:
        """The text of ``tokens``; bytes that are not UTF-8 (a sample cut inside a character) read as U+FFFD."""
        return self.decode_bytes(tokens).decode("utf-8", errors="replace")

    def _piece(self, piece: bytes) -> tuple[int, ...]:
        hit = self._cache.get(piece)
        if hit is not None:
            return hit
        ids = list(piece)
        ranks = self.ranks
        while len(ids) > 1:
            best = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, 1 << 30))
            if best not in ranks:
                break
            ids = _merge(ids, best, 256 + ranks[best])
        if len(self._cache) >= _CACHE:
            self._cache.clear()
        self._cache[piece] = result = tuple(ids)
        return result


def pieces(data: bytes) -> Iterator[bytes]:
    """What BPE merges inside: :data:`CHUNK`'s matches, each cut into pieces of at most :data:`MAX_PIECE` bytes."""
    for match in CHUNK.finditer(data):
        chunk = match.group()
        for start in range(0, len(chunk), MAX_PIECE):
            yield chunk[start : start + MAX_PIECE]


def _merge(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """``ids`` with every occurrence of ``pair`` (left to right, not overlapping) replaced by ``new``."""
    out, i, n = [], 0, len(ids)
    while i < n:
        if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def parse_merges(text: str) -> Tokenizer:
    """A tokenizer from a merges file's text (comment lines start with ``#``)."""
    merges = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#") or not line:
            continue
        fields = line.split(" ")
        if len(fields) != 2 or not all(f.isdigit() and len(f) <= 5 for f in fields):
            raise InputRejected(f"merges line {number} is not two token ids: {line[:40]!r}")
        merges.append((int(fields[0]), int(fields[1])))
    return Tokenizer(merges)


@cache
def shipped() -> Tokenizer:
    """The package's tokenizer (:data:`VOCAB_SIZE` tokens)."""
    return parse_merges(resources.files("proofs").joinpath(_MERGES).read_text(encoding="ascii"))


def train(data: bytes, vocab_size: int) -> list[tuple[int, int]]:
    """Learn ``vocab_size - 256`` merges from ``data``: repeatedly merge the most frequent adjacent
    pair inside pieces (ties: the smallest pair), as counted over distinct pieces times their count."""
    words = [(list(piece), count) for piece, count in sorted(Counter(pieces(data)).items())]
    counts: Counter[tuple[int, int]] = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for w, (ids, count) in enumerate(words):
        for pair in zip(ids, ids[1:]):
            counts[pair] += count
            where.setdefault(pair, set()).add(w)
    heap = [(-c, pair) for pair, c in counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    while len(merges) < vocab_size - 256 and heap:
        neg, pair = heapq.heappop(heap)
        if counts.get(pair, 0) != -neg or neg == 0:
            continue  # a stale entry: its pair's count changed since it was pushed
        new = 256 + len(merges)
        merges.append(pair)
        touched: set[tuple[int, int]] = set()
        for w in sorted(where.pop(pair)):
            ids, count = words[w]
            for old in zip(ids, ids[1:]):
                counts[old] -= count
                touched.add(old)
            ids = _merge(ids, pair, new)
            words[w] = (ids, count)
            for fresh in zip(ids, ids[1:]):
                counts[fresh] += count
                touched.add(fresh)
                where.setdefault(fresh, set()).add(w)
        counts.pop(pair, None)
        for p in touched - {pair}:
            if counts[p] > 0:
                heapq.heappush(heap, (-counts[p], p))
    return merges


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m proofs.tokenizer train``: relearn the shipped merges from the shipped corpus."""
    parser = argparse.ArgumentParser(prog="python -m proofs.tokenizer", description=main.__doc__)
    parser.add_argument("command", choices=["train"])
    parser.add_argument("--corpus", type=Path, default=Path(str(resources.files("proofs").joinpath("datasets/shakespeare.txt"))))
    parser.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    parser.add_argument("--out", type=Path, default=Path(str(resources.files("proofs").joinpath(_MERGES))))
    args = parser.parse_args(argv)
    merges = train(args.corpus.read_bytes(), args.vocab_size)
    args.out.write_text("\n".join([_HEADER, *(f"{a} {b}" for a, b in merges)]) + "\n", encoding="ascii")
    print(f"wrote {len(merges)} merges ({256 + len(merges)} tokens) to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
