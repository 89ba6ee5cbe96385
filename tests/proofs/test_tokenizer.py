from __future__ import annotations

import random
import time
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.bounded import InputRejected
from proofs.tokenizer import CHUNK, MAX_PIECE, VOCAB_SIZE, Tokenizer, main, parse_merges, pieces, shipped, train

CORPUS = resources.files("proofs").joinpath("datasets/shakespeare.txt").read_bytes()


@given(st.text())
def test_any_text_round_trips_exactly(text: str) -> None:
    tokens = shipped().encode(text)
    assert shipped().decode(tokens) == text
    assert all(t < VOCAB_SIZE for t in tokens)


@given(st.binary())
def test_any_bytes_round_trip_and_pieces_cover_every_byte(data: bytes) -> None:
    assert b"".join(pieces(data)) == data and all(len(p) <= MAX_PIECE for p in pieces(data))
    assert shipped().decode_bytes(shipped().encode(data)) == data


def test_the_shipped_tokenizer_compresses_its_corpus_and_knows_its_words() -> None:
    tok = shipped()
    assert tok.vocab_size == VOCAB_SIZE == 4096
    tokens = tok.encode(CORPUS[:100_000])
    assert len(tokens) < 100_000 / 3  # about 3.1 bytes a token on Shakespeare
    assert tok.encode(" Hamlet") == tok.encode(" Hamlet")
    assert [tok.pieces[t] for t in tok.encode(" Rosencrantz and Guildenstern")] == [b" Rosencrantz", b" and", b" Guildenstern"]


def test_the_shipped_merges_are_what_training_on_the_corpus_gives(tmp_path: Path) -> None:
    out = tmp_path / "merges.txt"
    main(["train", "--out", str(out)])
    assert out.read_bytes() == resources.files("proofs").joinpath("datasets/bpe-merges.txt").read_bytes()


def _naive_train(data: bytes, vocab_size: int) -> list[tuple[int, int]]:
    """The textbook loop: recount every pair after each merge."""
    words = Counter(p for chunk in CHUNK.findall(data) for p in (chunk[i : i + MAX_PIECE] for i in range(0, len(chunk), MAX_PIECE)))
    seqs = {w: list(w) for w in words}
    merges: list[tuple[int, int]] = []
    while len(merges) < vocab_size - 256:
        counts: Counter[tuple[int, int]] = Counter()
        for w, ids in seqs.items():
            for pair in zip(ids, ids[1:]):
                counts[pair] += words[w]
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        new = 256 + len(merges) - 1
        for w, ids in seqs.items():
            out, i = [], 0
            while i < len(ids):
                if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            seqs[w] = out
    return merges


@pytest.mark.parametrize("text", [CORPUS[:20_000], b"aaaaaaa abab aaab" * 30, "naïve café 日本語 日本".encode() * 9, b"abcdefghij" * 20])
def test_incremental_training_matches_the_textbook_loop(text: bytes) -> None:
    assert train(text, 256 + 120) == _naive_train(text, 256 + 120)


def test_encoding_a_chunk_merges_by_rank_not_by_position() -> None:
    tok = Tokenizer([(98, 99), (97, 98)])  # 256 = "bc", 257 = "ab": "abc" merges "bc" first
    assert list(tok.encode("abc")) == [97, 256]
    assert list(tok.encode("abab")) == [257, 257]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("256 97\n", "does not exist yet"),
        ("97 98\n97 98\n", "one pair twice"),
        ("97\n", "not two token ids"),
        ("97 -1\n", "not two token ids"),
        ("97 123456\n", "not two token ids"),
    ],
)
def test_a_malformed_merges_file_is_refused_in_one_line(text: str, match: str) -> None:
    with pytest.raises(InputRejected, match=match):
        parse_merges(text)


def test_decoding_an_id_outside_the_vocabulary_is_refused_and_a_cut_character_is_replaced() -> None:
    tok = shipped()
    with pytest.raises(InputRejected, match=r"\[0, 4096\)"):
        tok.decode([VOCAB_SIZE])
    assert tok.decode(list("é".encode())[:1]) == "\ufffd"


def test_progress_is_reported_up_to_the_end() -> None:
    seen: list[int] = []
    shipped().encode(CORPUS, progress=seen.append)  # 1.1 MiB: once past 1 MiB, once at the end
    assert seen[-1] == len(CORPUS) and seen == sorted(seen) and len(seen) >= 2


def test_a_line_without_spaces_costs_linear_time() -> None:
    """A chunk is merged in pieces of MAX_PIECE bytes: 200 KB of letters with no space (a DNA
    sequence, unspaced text) is 3,125 pieces, not one quadratic merge loop."""
    letters = bytes(random.Random(1).choices(b"acgt", k=200_000))
    start = time.process_time()
    tokens = shipped().encode(letters)
    assert shipped().decode_bytes(tokens) == letters
    assert time.process_time() - start < 20  # one 200 KB piece: about an hour
