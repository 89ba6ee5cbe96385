"""ChainClient on a real anvil: nonces, retries of transient failures only, receipts, logs, signers."""

from __future__ import annotations

import json
import logging
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import requests
from eth_typing import HexStr
from eth_utils import to_checksum_address

from core.agent import Disposition, default_classify
from core.chain import ChainClient, RetryPolicy, Signer, TxHash
from core.contracts import JobId, Protocol
from core.errors import SignerError, TransientRPCError
from core.reverts import revert_class
from deploy.devnet import Devnet

if TYPE_CHECKING:
    from tests.conftest import Parties

FAST = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05)


class FlakyProxy:
    """An HTTP proxy in front of anvil that answers 503 to the next ``failures`` requests and counts methods."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.failures = 0
        self.methods: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                proxy.methods.append(json.loads(body).get("method", "?"))
                if proxy.failures > 0:
                    proxy.failures -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                upstream = requests.post(proxy.upstream, data=body, headers={"Content-Type": "application/json"}, timeout=10)
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(upstream.content)))
                self.end_headers()
                self.wfile.write(upstream.content)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FlakyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(devnet: Devnet) -> Iterator[FlakyProxy]:
    with FlakyProxy(devnet.rpc_url) as p:
        yield p


def test_sequential_sends_use_consecutive_nonces(devnet: Devnet, parties: Parties) -> None:
    token = devnet.protocol(parties.submitter).token
    start = devnet.client.w3.eth.get_transaction_count(to_checksum_address(parties.submitter.address))
    balance = token.balance_of(parties.outsider.address)
    receipts = [token.transfer(parties.outsider.address, i + 1) for i in range(8)]
    nonces = [devnet.client.w3.eth.get_transaction(HexStr(r.tx_hash))["nonce"] for r in receipts]
    assert nonces == list(range(start, start + 8))
    assert all(r.status == 1 and r.gas_used > 21_000 for r in receipts)
    assert token.balance_of(parties.outsider.address) == balance + sum(range(1, 9))


def test_concurrent_sends_from_one_process_never_reuse_a_nonce(devnet: Devnet, parties: Parties) -> None:
    # two clients on the same endpoint share the process-wide nonce cache
    clients = [devnet.client, ChainClient(devnet.rpc_url)]
    proto = devnet.protocol()
    start = devnet.client.w3.eth.get_transaction_count(to_checksum_address(parties.solver.address))
    results: list[str] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        token = Protocol.connect(clients[i % 2], proto.book, parties.solver).token
        try:
            for _ in range(3):
                results.append(token.transfer(parties.outsider.address, 1).tx_hash)
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    nonces = sorted(devnet.client.w3.eth.get_transaction(HexStr(h))["nonce"] for h in results)
    assert nonces == list(range(start, start + 12))


def test_nonces_heal_after_a_snapshot_revert(devnet: Devnet, parties: Parties) -> None:
    token = devnet.protocol(parties.verifier).token
    snapshot = devnet.chain.snapshot()
    token.transfer(parties.outsider.address, 1)
    token.transfer(parties.outsider.address, 1)
    # revert behind the client's back: its cached nonce is now ahead of the chain
    devnet.client.rpc("evm_revert", [snapshot])
    receipt = token.transfer(parties.outsider.address, 1)
    assert receipt.status == 1


class _Hashes:
    """A send journal that keeps every version's hash, in order."""

    def __init__(self) -> None:
        self.hashes: list[str] = []

    def signed(self, tx_hash: TxHash, nonce: int) -> None:
        self.hashes.append(tx_hash)


def test_a_transaction_stranded_by_a_rising_base_fee_is_repriced_and_mined_once(devnet: Devnet, parties: Parties) -> None:
    """A busy chain: the base fee jumps past a pending transaction's fee cap. After ``reprice_after``
    the client signs the same nonce again with higher fees; that version is mined, one transfer lands
    and the account's nonce moves by one."""
    client = ChainClient(devnet.rpc_url, reprice_after=0.5)
    token = Protocol.connect(client, devnet.protocol().book, parties.solver).token
    sender = to_checksum_address(parties.solver.address)
    start = client.w3.eth.get_transaction_count(sender)
    balance = token.balance_of(parties.outsider.address)
    journal, receipts, errors = _Hashes(), [], []

    def send() -> None:
        try:
            with client.journaled(journal):
                receipts.append(token.transfer(parties.outsider.address, 1))
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    def until(what: str, probe: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not probe():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)

    base = int(client.w3.eth.get_block("latest")["baseFeePerGas"])
    devnet.client.rpc("evm_setAutomine", [False])
    thread = threading.Thread(target=send)
    try:
        thread.start()
        until("the first version in the pool", lambda: bool(journal.hashes) and client.tx_state(TxHash(journal.hashes[0])).pending)
        devnet.client.rpc("anvil_setNextBlockBaseFeePerGas", [hex(50 * base)])
        devnet.chain.mine(1)  # its fee cap (2 x base + tip) is now below the base fee (anvil drops it from its pool; geth keeps it)
        assert client.tx_state(TxHash(journal.hashes[0])).block is None
        until("a replacement in the pool", lambda: len(journal.hashes) == 2 and client.tx_state(TxHash(journal.hashes[1])).pending)
        devnet.chain.mine(1)
        thread.join(30)
    finally:
        devnet.client.rpc("evm_setAutomine", [True])
        devnet.client.rpc("anvil_setNextBlockBaseFeePerGas", [hex(base)])  # the fee market a snapshot revert does not restore
    assert not errors and not thread.is_alive()
    (receipt,) = receipts
    replacement = client.w3.eth.get_transaction(HexStr(journal.hashes[1]))
    assert receipt.tx_hash == journal.hashes[1] and replacement["nonce"] == start
    assert replacement["maxFeePerGas"] >= 100 * base  # 2 x the latest base fee + tip
    assert client.w3.eth.get_transaction_count(sender) == start + 1
    assert token.balance_of(parties.outsider.address) == balance + 1
    assert client.tx_state(TxHash(journal.hashes[0])).block is None  # the first version was never mined


def test_transient_5xx_is_retried_with_backoff(devnet: Devnet, parties: Parties, proxy: FlakyProxy) -> None:
    client = ChainClient(proxy.url, retry=FAST)
    proxy.failures = 2
    assert client.block_number() == devnet.client.block_number()
    assert proxy.methods[:3] == ["eth_blockNumber"] * 3
    proxy.failures = 3
    token = Protocol.connect(client, devnet.book, parties.submitter).token
    receipt = token.transfer(parties.outsider.address, 5)
    assert receipt.status == 1


def test_transient_failures_give_up_after_the_policy(devnet: Devnet, proxy: FlakyProxy) -> None:
    client = ChainClient(proxy.url, retry=FAST)
    proxy.failures = 100
    with pytest.raises(TransientRPCError):
        client.block_number()
    assert proxy.methods == ["eth_blockNumber"] * FAST.attempts


def test_unreachable_endpoint_is_transient_and_bounded() -> None:
    from deploy.anvil import free_port

    client = ChainClient(f"http://127.0.0.1:{free_port()}", retry=FAST, timeout=1.0)
    with pytest.raises(TransientRPCError):
        client.block_number()


def test_a_call_no_code_answers_is_transient_for_a_daemon_to_read_again(devnet: Devnet, parties: Parties) -> None:
    """A node restarted from an older state, or behind, answers a view pinned at a block it does not have
    with no data: a daemon backs off and reads again (the chain-restart e2e test's verifier died of it
    once), never exits. A deployment whose code is missing is refused at start, not here."""
    market = devnet.protocol().market
    nowhere = devnet.client.w3.eth.contract(address=to_checksum_address(parties.outsider.address), abi=market.contract.abi)
    with pytest.raises(TransientRPCError, match="jobCount: the node returned no data"):
        devnet.client.call(nowhere.functions.jobCount())
    assert default_classify(TransientRPCError("x")) is Disposition.TRANSIENT


def test_revert_is_never_retried_and_nothing_is_sent(devnet: Devnet, parties: Parties, proxy: FlakyProxy) -> None:
    client = ChainClient(proxy.url, retry=FAST)
    proto = Protocol.connect(client, devnet.book, parties.solver)
    with pytest.raises(revert_class("UnknownJob")):
        proto.market.claim(JobId(123))
    assert proxy.methods.count("eth_estimateGas") == 1
    assert "eth_sendRawTransaction" not in proxy.methods


def test_a_mined_failure_is_decoded_into_the_named_revert(devnet: Devnet, parties: Parties) -> None:
    market = devnet.protocol().market
    before = devnet.client.w3.eth.get_transaction_count(to_checksum_address(parties.solver.address))
    with pytest.raises(revert_class("UnknownJob")) as caught:
        # an explicit gas limit skips the estimate, so the failing transaction is mined
        devnet.client.transact(market.contract, "claim", [77], parties.solver, gas=200_000)
    assert caught.value.jobId == 77
    assert devnet.client.w3.eth.get_transaction_count(to_checksum_address(parties.solver.address)) == before + 1


def test_event_logs_are_fetched_in_bounded_ranges(devnet: Devnet, parties: Parties) -> None:
    token = devnet.protocol(parties.submitter).token
    first = devnet.client.block_number() + 1
    for i in range(7):
        token.transfer(parties.outsider.address, 100 + i)
        devnet.chain.mine(2)
    logs = devnet.client.get_logs(token.contract.events.Transfer(), first, argument_filters={"to": parties.outsider.address}, max_range=3)
    assert [e["args"]["value"] for e in logs] == [100 + i for i in range(7)]
    events = token.events("Transfer", first, to=parties.outsider.address)
    assert [e.args["value"] for e in events] == [100 + i for i in range(7)]
    with pytest.raises(ValueError):
        devnet.client.get_logs(token.contract.events.Transfer(), first, max_range=0)


def test_signer_never_shows_its_key(devnet: Devnet, parties: Parties, caplog: pytest.LogCaptureFixture) -> None:
    from deploy.anvil import dev_private_key

    key = dev_private_key(1)
    signer = Signer.from_private_key(key)
    assert signer.address == parties.submitter.address
    assert key[2:] not in repr(signer) and key[2:] not in str(signer)
    with pytest.raises(TypeError):
        pickle.dumps(signer)
    with caplog.at_level(logging.DEBUG):
        devnet.protocol(signer).token.transfer(parties.outsider.address, 1)
    assert key[2:].lower() not in caplog.text.lower()


def test_signer_from_env_and_keystore(tmp_path: Path) -> None:
    from deploy.anvil import dev_private_key

    key = dev_private_key(3)
    from_env = Signer.from_env("TEST_KEY", env={"TEST_KEY": key})
    with pytest.raises(SignerError, match="not set"):
        Signer.from_env("TEST_KEY", env={})
    with pytest.raises(SignerError, match="valid private key"):
        Signer.from_env("TEST_KEY", env={"TEST_KEY": "0x1234"})
    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(from_env.encrypt("correct horse")))
    assert Signer.from_keystore(keystore, "correct horse").address == from_env.address
    with pytest.raises(SignerError, match="wrong password"):
        Signer.from_keystore(keystore, "wrong")
    with pytest.raises(SignerError, match="does not exist"):
        Signer.from_keystore(tmp_path / "missing.json", "x")
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(SignerError):
        Signer.from_keystore(tmp_path / "junk.json", "x")


def test_a_transaction_the_chain_drops_is_sent_again_at_once(devnet: Devnet, parties: Parties) -> None:
    """A reorg or the pool drops our pending transaction: the client sends the same signed bytes again
    within a second or two, not after its re-price delay (here 60 s), and it is mined once."""
    client = ChainClient(devnet.rpc_url, reprice_after=60.0)
    token = Protocol.connect(client, devnet.protocol().book, parties.solver).token
    balance = token.balance_of(parties.outsider.address)
    journal, receipts, errors = _Hashes(), [], []

    def send() -> None:
        try:
            with client.journaled(journal):
                receipts.append(token.transfer(parties.outsider.address, 1))
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    devnet.client.rpc("evm_setAutomine", [False])
    thread = threading.Thread(target=send)
    try:
        thread.start()
        deadline = time.monotonic() + 30
        while not (journal.hashes and client.tx_state(TxHash(journal.hashes[0])).pending):
            assert time.monotonic() < deadline, "the transaction never reached the pool"
            time.sleep(0.05)
        devnet.client.rpc("anvil_dropTransaction", [journal.hashes[0]])
        dropped_at = time.monotonic()
        assert not client.tx_state(TxHash(journal.hashes[0])).known
        while not client.tx_state(TxHash(journal.hashes[0])).pending:
            assert time.monotonic() - dropped_at < 10, "the dropped transaction was not sent again"
            time.sleep(0.05)
        resent_s = time.monotonic() - dropped_at
        devnet.chain.mine(1)
        thread.join(30)
    finally:
        devnet.client.rpc("evm_setAutomine", [True])
    assert not errors and not thread.is_alive()
    assert resent_s < 5.0  # DROP_CHECK_S is 1 s; the re-price delay is 60
    (receipt,) = receipts
    assert receipt.tx_hash == journal.hashes[0] and len(journal.hashes) == 1  # the same bytes, not a replacement
    assert token.balance_of(parties.outsider.address) == balance + 1


def test_a_node_that_drips_its_answer_is_abandoned_at_the_call_deadline() -> None:
    """A node (or a proxy) that answers 200 and then sends a byte every 0.2 s: each read is quick, so
    requests' per-read timeout never fires; the session's deadline for the whole response does, the call
    is retried and then raised as transient, within the attempts' deadlines."""
    stop = threading.Event()

    class Drip(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while not stop.wait(0.2):
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ChainClient(f"http://127.0.0.1:{server.server_address[1]}", timeout=1.0, retry=FAST)
        started = time.monotonic()
        with pytest.raises(TransientRPCError):
            client.head()
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
    assert elapsed < FAST.attempts * 1.0 + 3.0, f"{elapsed:.1f} s for {FAST.attempts} attempts of 1 s each"
