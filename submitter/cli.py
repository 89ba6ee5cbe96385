"""`veritrain submit`: post a training job, follow it, fetch the trained model, serve its content, cancel.

Registered in veritrain/cli.py with ``app.add_typer(submit_app, name="submit")``.
Bad input (a missing file, a malformed spec, an unknown job, a balance short of the
escrow, a wrong CID) ends in one line on stderr and a non-zero exit, before any
transaction is sent.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from core.agent import configure_logging
from core.cid import digest_to_cid
from core.config import Settings
from core.contracts import JobId, TokenAmount
from core.errors import AddressBookError, ChainError
from core.sealing import new_data_key
from core.storage import StorageError
from proofs.errors import ProofError
from proofs.spec import JobSpec, load_spec
from rolebase import cli as options
from rolebase.amounts import parse_tokens, show_tokens
from rolebase.capabilities import job_size
from rolebase.cli import Announce, IpfsApi, PeerCa, Peers, StoreDir, TlsCert, TlsKey, console, err_console, open_store, serve_store, serve_tls, show_time
from rolebase.gateways import AnnouncedGateways, announce_gateway, gateway_url
from rolebase.guarantee import guarantee, weaker_guarantee
from submitter import service
from submitter.curve import committed_curve, draw_curve, draw_lines, replay_checked
from submitter.datakeys import DataKeys
from submitter.errors import SubmitError
from submitter.sealed import MAX_READERS, Watch, seal_posted
from submitter.specfile import read_job
from submitter.timeline import job_timeline, readable_args

app = options.command_group("submit", "Post training jobs and get proven models back.")


@app.command()
@options.with_settings()
def post(
    settings: Settings,
    spec: Annotated[Path, typer.Argument(help="job spec JSON (docs/formats.md; `veritrain spec new` writes one)", show_default=False)],
    data: Annotated[Path | None, typer.Option("--data", help="dataset file to upload; its CID goes into the spec")] = None,
    init: Annotated[
        Path | None,
        typer.Option("--init", help="pretrained weights (safetensors, the model's parameters) to fine-tune from; uploaded, CID into the spec's init"),
    ] = None,
    reward: Annotated[str, typer.Option(help="solver reward, in VERI")] = "10",
    fee: Annotated[str, typer.Option(help="verifier fee, in VERI")] = "2",
    commit_window: Annotated[
        int | None, typer.Option(help="seconds the solver has from its claim to its commit [default: the market's maximum]", show_default=False)
    ] = None,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="check the spec and the data together, print the job's size and compute and how many staked solvers fit it; send and upload nothing",
        ),
    ] = False,
    allow_tolerance: Annotated[
        bool,
        typer.Option(
            "--allow-tolerance",
            help='post a spec with "numerics": "torch" or tolerance mode: a weaker guarantee (bit-exact only on the same hardware, '
            "or within windows a cheater may use), always fully replayed; refused without this flag",
        ),
    ] = False,
    sealed: Annotated[
        bool,
        typer.Option(
            "--sealed",
            help="seal the dataset (needs --data) under a new data key kept in <data-dir>/data-keys, upload only the sealed bytes, "
            "and seal the job with a key bond of reward + fee (docs/sealing.md); then run `veritrain submit watch JOB`",
        ),
    ] = False,
    json_out: options.Json = False,
) -> None:
    """Upload the dataset and the spec, escrow reward + fee + the jackpot tax, post the job; prints the job id.

    Before posting it reads the staked solvers' adverts (limits, device, speed) and says on stderr how many
    fit the job, or warns in one line that none does (the job is posted all the same). A spec with
    torch numerics or tolerance mode is a weaker guarantee (docs/proofs.md): it is posted only with
    --allow-tolerance, and says so.

    With --sealed the job's data is sealed (docs/sealing.md): the dataset is encrypted under a new data
    key, written to <data-dir>/data-keys/<sealed dataset CID> (0600) before anything is sent, only the
    sealed bytes are uploaded, and the job is sealed on chain straight after its post (a key bond of
    reward + fee, returned once the job settles). `veritrain submit watch JOB` then hands the key to the
    parties the chain entitles; if the seal fails after the post, `veritrain submit seal JOB` finishes it.

    Examples:

      veritrain submit post job.json --data dataset.safetensors --reward 10 --fee 2 --key-env SUBMITTER_KEY

      veritrain submit post job.json --ipfs-api http://127.0.0.1:5001 --keystore me.json --json

      veritrain submit post job.json --data dataset.safetensors --dry-run

      veritrain submit post job.json --data dataset.safetensors --init model3/weights.safetensors --key-env SUBMITTER_KEY

      veritrain submit post torch-job.json --data dataset.safetensors --allow-tolerance --key-env SUBMITTER_KEY

      veritrain submit post job.json --data private.safetensors --sealed --key-env SUBMITTER_KEY
    """
    if dry_run:
        draft = read_job(spec, data, open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir), init, new_data_key() if sealed else None)
        size = job_size(draft.spec)
        fit = _solver_fit(settings, draft.spec, commit_window)
        if json_out:
            print(json.dumps({"dataset_cid": draft.dataset_cid, **size, "solvers": fit.to_json() if fit else None, "guarantee": guarantee(draft.spec)}))
        else:
            console.print(
                f"spec and data fit: {draft.spec.model.kind}, {size['parameters']:,} parameters, {size['steps']:,} steps in {size['segments']} segments, "
                f"{size['examples_per_step']:,} examples per step; training about {size['train_flop'] / 1e9:,.1f} GFLOP (6 x parameters x examples x steps) "
                f"in about {size['memory_bytes'] / 2**30:,.1f} GiB of memory (estimated from the spec, docs/formats.md)",
                highlight=False,
            )
            if (weaker := weaker_guarantee(draft.spec)) is not None:
                console.print(f"{weaker}{'' if allow_tolerance else ' (posting it needs --allow-tolerance)'}", highlight=False)
        return
    amounts = parse_tokens(reward, "--reward"), parse_tokens(fee, "--fee")
    protocol = options.protocol(settings, signing=True)
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    keys = DataKeys.of(settings.data_dir) if sealed else None
    posted = service.post_job(protocol, store, spec, data, amounts[0], amounts[1], commit_window, init, allow_tolerance=allow_tolerance, data_keys=keys)
    err_console.print(posted.solvers.line(), highlight=False, soft_wrap=True)
    if posted.weaker is not None:
        err_console.print(posted.weaker, highlight=False, soft_wrap=True)
    if json_out:
        print(
            json.dumps(
                {
                    "job_id": posted.job_id,
                    "spec_cid": posted.spec_cid,
                    "dataset_cid": posted.dataset_cid,
                    "jackpot_tax": str(posted.tax),
                    "solvers": posted.solvers.to_json(),
                    "guarantee": posted.weaker or "exact",
                    "full_replay": posted.full_replay,
                    "sealed": posted.sealed,
                    "gas": {k: r.gas_used for k, r in posted.receipts.items()},
                }
            )
        )
        return
    console.print(f"posted job [bold]{posted.job_id}[/]  spec {posted.spec_cid}  dataset {posted.dataset_cid}  jackpot tax {show_tokens(posted.tax)} VERI")
    if posted.sealed:
        console.print(
            f"sealed: only the sealed dataset was uploaded, key bond {show_tokens(TokenAmount(amounts[0] + amounts[1]))} VERI; "
            f"hand its key to the parties the chain entitles with `veritrain submit watch {posted.job_id}`",
            highlight=False,
        )
    print(posted.job_id)


@app.command("list")
@options.with_settings(*options.CHAIN)
def list_(settings: Settings, json_out: options.Json = False) -> None:
    """List the market's jobs and their states.

    Examples:

      veritrain submit list

      veritrain submit list --json | jq '.[] | select(.state == "OPEN")'
    """
    jobs = service.list_jobs(options.protocol(settings, signing=False))
    if json_out:
        print(json.dumps([service.job_json(i, j) for i, j in jobs], indent=2))
        return
    table = Table("job", "state", "reward", "fee", "submitter", "solver", "verifier")
    for job_id, job in jobs:
        table.add_row(
            str(job_id), job.state.name, show_tokens(job.reward), show_tokens(job.verifier_fee), _short(job.submitter), _short(job.solver), _short(job.verifier)
        )
    console.print(table)


@app.command()
@options.with_settings(*options.CHAIN, "data_dir")
def show(
    settings: Settings,
    job: Annotated[int, typer.Argument(help="job id", show_default=False)],
    curve_png: Annotated[
        Path | None,
        typer.Option("--curve", help="also draw the training curve to this PNG file (800x450; the job's trace must be committed)", show_default=False),
    ] = None,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    json_out: options.Json = False,
) -> None:
    """Show one job, its timeline (every market event about it, with its gas) and, once its trace is
    committed, its training curve: each segment's mean training loss from the committed manifest,
    which verifiers check on every segment they replay, and the final model's held-out loss when the
    spec holds out a split; both are marked replay-checked once a verifier's report passed.

    Examples:

      veritrain submit show 3

      veritrain submit show 3 --json

      veritrain submit show 3 --curve curve.png
    """
    protocol = options.protocol(settings, signing=False)
    record = service.get_job(protocol, job)
    timeline = job_timeline(protocol, JobId(job))
    done = service.commitment(protocol, JobId(job), record)
    curve, unavailable, drawn, promise = None, None, None, None
    try:  # what the job's verification proves, from its spec (checked against its CID)
        promise = guarantee(load_spec(service.fetch_spec(protocol, open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir), job)))
    except (StorageError, ProofError, SubmitError) as exc:
        promise = f"unknown: the spec cannot be read: {exc}"
    if done is not None:  # a store is opened only when there is a manifest to read
        try:
            curve = committed_curve(open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir), done)
        except (StorageError, ProofError) as exc:
            if curve_png is not None:
                raise
            unavailable = f"the committed manifest cannot be read: {exc}"  # the timeline is still worth showing
    checked = replay_checked(record.state)
    checked_words = "committed and replay-checked" if checked else f"committed, not yet replay-checked: {record.state.name}"
    if curve_png is not None:
        if curve_png.is_dir() or not curve_png.parent.is_dir():
            raise SubmitError(f"--curve {curve_png}: give a file path in a directory that exists")
        if curve is None:
            raise SubmitError(f"job {job} is {record.state.name}: it has no committed trace, so no training curve to draw")
        draw_curve(curve, curve_png, title=f"job {job}: training curve (mean loss per segment, {checked_words})")
        drawn = f"wrote {curve_png} (the training curve, {len(curve.points)} segments)"
    if json_out:
        body = {
            "job": service.job_json(JobId(job), record),
            "guarantee": promise,
            "timeline": [e.to_json() for e in timeline],
            "curve": curve and curve.to_json() | {"replay_checked": checked},
        }
        print(json.dumps(body | ({"curve_unavailable": unavailable} if unavailable else {}), indent=2))
        return
    console.print(f"job [bold]{job}[/]: {record.state.name}  reward {show_tokens(record.reward)} VERI  fee {show_tokens(record.verifier_fee)} VERI")
    console.print(f"guarantee: {promise}", highlight=False)
    table = Table("block", "time", "event", "from", "gas", "details")
    for e in timeline:
        details = ", ".join(f"{k}={v}" for k, v in readable_args(e.args).items())
        table.add_row(str(e.block), show_time(e.timestamp), e.event, _short(e.sender), f"{e.gas_used:,}", details)
    console.print(table)
    if curve is not None:
        stride = curve.stride(_CURVE_ROWS)
        sampled = f", every {stride}th segment: --json has them all" if stride > 1 else ""
        points = Table("segment", "steps", "mean loss", title=f"training curve, {checked_words} (manifest {curve.manifest_cid}{sampled})")
        for p in curve.sampled(_CURVE_ROWS):
            points.add_row(str(p.segment), f"{p.first_step}-{p.last_step}", f"{p.loss:.6g}")
        console.print(points)
        if curve.held_out_loss is not None:
            console.print(
                f"held-out loss of the final model: [bold]{curve.held_out_loss:.6g}[/] ({'replay-checked' if checked else 'claimed by the solver, not yet checked'})"
            )
    elif unavailable:
        console.print(f"training curve: {unavailable}")
    if drawn:
        console.print(drawn)


@app.command()
@options.with_settings(*options.CHAIN, "data_dir")
def fetch(
    settings: Settings,
    job: Annotated[int, typer.Argument(help="job id", show_default=False)],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="file to write the trained model to (the final training checkpoint, safetensors, a sealed job's opened with the data key in --data-dir; `veritrain model export` gives a loadable module)",
            show_default=False,
        ),
    ] = None,
    spec: Annotated[Path | None, typer.Option("--spec", help="file to write the job's spec to (any job, posted or final)", show_default=False)] = None,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    peers: Peers = None,
    peer_ca: PeerCa = None,
) -> None:
    """Download a finalized job's model (--out) or any job's spec (--spec); every byte is checked against its CID on chain.

    Examples:

      veritrain submit fetch 3 --out model.safetensors

      veritrain submit fetch 3 --spec spec.json

      veritrain submit fetch 3 --out model.safetensors --peer http://10.0.0.3:8080   # a gateway besides those announced

      veritrain submit fetch 3 --out model.safetensors --peer-ca ca.pem   # https gateways certified by a private CA
    """
    if out is None and spec is None:
        raise typer.BadParameter("give --out FILE, --spec FILE, or both", param_hint="--out")
    protocol = options.protocol(settings, signing=False)
    store = open_store(
        store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir, peers=peers, discover=AnnouncedGateways(lambda: protocol), peer_ca=peer_ca
    )
    if spec is not None:
        spec.write_bytes(service.fetch_spec(protocol, store, job))
        console.print(f"wrote {spec} (the spec job {job} was posted with, CID verified)")
    if out is not None:
        cid, size = service.fetch_model(protocol, store, job, out, DataKeys.of(settings.data_dir))
        console.print(f"wrote {out} ({size:,} bytes, CID {cid} verified)")


@app.command()
@options.with_settings()
def serve(
    settings: Settings,
    address: Annotated[str, typer.Argument(help="HOST:PORT to listen on, e.g. 10.0.0.2:8080", show_default=False)],
    store_dir: StoreDir = None,
    announce: Announce = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
) -> None:
    """Serve this submitter's store (its specs and datasets) to solvers on other hosts until stopped (Ctrl-C):
    an IPFS trustless gateway of raw blocks, checked by the fetchers against the CIDs on chain; over HTTPS
    with --tls-cert and --tls-key. With a key
    it also announces http(s)://HOST:PORT on chain (StakeManager.announce), where solvers look for it, or
    --announce URL, the address other hosts reach it at (behind NAT, in a container); an address nobody
    else can reach (0.0.0.0 without --announce; loopback, or private without --announce, on a public
    chain) is refused.

    Keep it running until your jobs are final: a solver fetches the spec and dataset after its claim, and a
    verifier or whistleblower may fetch them again to replay.

    Examples:

      veritrain submit serve 10.0.0.2:8080 --key-env SUBMITTER_KEY

      veritrain submit serve 0.0.0.0:8080 --announce http://203.0.113.7:8080 --key-env SUBMITTER_KEY   # behind NAT

      veritrain submit serve 127.0.0.1:8080 --store-dir ./store

      veritrain submit serve 10.0.0.2:8443 --tls-cert cert.pem --tls-key key.pem --key-env SUBMITTER_KEY   # HTTPS
    """
    tls = serve_tls(address, tls_cert, tls_key)
    keyed = settings.keystore is not None or settings.key_env is not None
    if keyed:
        gateway_url(address, announce, settings.chain_id, tls=tls is not None)  # refused before anything starts
    gateway = serve_store(open_store(store_dir=store_dir, ipfs_api=None, data_dir=settings.data_dir), address, tls)
    try:
        if keyed:
            protocol, key = options.signing_protocol(settings)
            announce_gateway(protocol, key.address, gateway.address, announce, tls=tls is not None)
        console.print(f"serving {gateway.index.store.root} at {gateway.url}/ipfs/<cid>?format=raw (Ctrl-C stops)", highlight=False)
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        gateway.stop()


@app.command()
@options.with_settings(*options.CHAIN, *options.KEY)
def cancel(settings: Settings, job: Annotated[int, typer.Argument(help="job id", show_default=False)]) -> None:
    """Cancel an OPEN job you posted; the escrow comes back.

    Examples:

      veritrain submit cancel 3 --key-env SUBMITTER_KEY
    """
    receipt = service.cancel_job(options.protocol(settings, signing=True), job)
    console.print(f"job {job} cancelled (gas {receipt.gas_used:,})")


@app.command("seal")
@options.with_settings()
def seal_(
    settings: Settings, job: Annotated[int, typer.Argument(help="job id", show_default=False)], store_dir: StoreDir = None, ipfs_api: IpfsApi = None
) -> None:
    """Seal an OPEN job you posted with --sealed whose seal did not go through (the post succeeded, the
    seal failed): its data key is read from <data-dir>/data-keys by the spec's dataset CID, and the key
    bond (reward + fee) approved and escrowed. No honest solver claims a sealed spec's job before this.

    Examples:

      veritrain submit seal 3 --key-env SUBMITTER_KEY
    """
    protocol = options.protocol(settings, signing=True)
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    receipts = seal_posted(protocol, store, DataKeys.of(settings.data_dir), job)
    console.print(f"job {job} sealed (gas {sum(r.gas_used for r in receipts.values()):,}); now `veritrain submit watch {job}`", highlight=False)


@app.command()
@options.with_settings()
def watch(
    settings: Settings,
    jobs: Annotated[list[int], typer.Argument(help="ids of sealed jobs you posted", show_default=False)],
    poll: options.Poll = 5.0,
    max_readers: Annotated[
        int,
        typer.Option("--max-readers", help="most solvers that asked to read a job before its claim to wrap its key to (each may read and not claim)", min=1),
    ] = MAX_READERS,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    log_json: options.LogJson = False,
) -> None:
    """Hand the data key of your sealed jobs to the parties the chain entitles, until each job settled
    and its key bond came back (docs/sealing.md); logs one line per transaction, Ctrl-C stops.

    Every --poll seconds, for each job: wraps its key (once per registered key version) to the solvers
    that asked while it is OPEN (at most --max-readers before a claim: each reader may read the data and
    not claim), to its solver once claimed, to its drawn verifier, to whistleblowers that asked once it
    was VERIFIED and to the referees seated in its dispute games; answers an open demand for the key (a
    first one with a wrap, a second with the key itself, which makes the data public: unanswered, it
    forfeits the key bond). Once the job is FINALIZED, REFUNDED or CANCELLED it returns the key bond and
    claims it. Every decision is read from the chain, so a restart repeats nothing; keep it running while
    the jobs are live.

    Examples:

      veritrain submit watch 3 --key-env SUBMITTER_KEY

      veritrain submit watch 3 4 --poll 10 --max-readers 1 --key-env SUBMITTER_KEY --log-json
    """
    configure_logging(json_lines=log_json)
    protocol = options.protocol(settings, signing=True)
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    watcher = Watch(protocol, store, DataKeys.of(settings.data_dir), jobs, max_readers)
    logging.getLogger(__name__).info("watching sealed jobs", extra={"jobs": watcher.jobs})
    try:
        while watcher.jobs:
            watcher.tick()
            if watcher.jobs:
                time.sleep(poll)
    except KeyboardInterrupt:
        err_console.print(f"stopped; still live: jobs {', '.join(map(str, watcher.jobs))} (run watch again to go on)", highlight=False)
        return
    console.print("every watched job settled and its key bond came back", highlight=False)


def _solver_fit(settings: Settings, spec: JobSpec, commit_window: int | None) -> service.SolverFit | None:
    """``--dry-run``'s look at the staked solvers' adverts, printed as one line on stderr; None (and a
    line saying why) when no deployment answers: the spec and the data were checked all the same."""
    try:
        protocol = options.protocol(settings, signing=False)
        fit = service.solver_fit(protocol, spec, service.commit_window_of(protocol, commit_window))
    except (ChainError, AddressBookError) as exc:
        err_console.print(f"solvers not checked: {exc}", highlight=False, soft_wrap=True)
        return None
    err_console.print(fit.line(), highlight=False, soft_wrap=True)
    return fit


#: Rows of a training curve ``show`` prints (a longer curve is sampled evenly).
_CURVE_ROWS = 25


def _short(address: str) -> str:
    return "-" if int(address, 16) == 0 else f"{address[:6]}..{address[-4:]}"


@app.command("multiparty")
@options.with_settings()
def multiparty_(
    settings: Settings,
    spec: Annotated[Path, typer.Argument(help="the base job spec JSON (repro numerics): every party's inner steps follow it", show_default=False)],
    data: Annotated[Path, typer.Option("--data", help="dataset file; shards and G_0 are computed from it", show_default=False)],
    parties: Annotated[int, typer.Option(help="slots M: parties training each round", min=2, max=16)] = 4,
    quorum: Annotated[int, typer.Option(help="the fewest right contributions a round needs (Mmin); fewer end the job", min=1)] = 2,
    rounds: Annotated[int, typer.Option(help="rounds R", min=1)] = 10,
    inner_steps: Annotated[int, typer.Option(help="inner steps H per round and party", min=1)] = 25,
    outer_lr: Annotated[float, typer.Option(help="the outer Nesterov step's learning rate")] = 0.7,
    outer_momentum: Annotated[float, typer.Option(help="the outer Nesterov step's momentum")] = 0.9,
    block_size: Annotated[int, typer.Option(help="int8 compression: values per scale")] = 256,
    keep: Annotated[
        float | None,
        typer.Option(help="top-k: the fraction of each tensor's values a contribution sends, the rest fed back to the next round (default: every value, int8)"),
    ] = None,
    inner_reward: Annotated[str, typer.Option(help="each inner job's solver reward, in VERI (pays the trace)")] = "5",
    inner_fee: Annotated[str, typer.Option(help="each inner job's verifier fee, in VERI")] = "1",
    contribution_reward: Annotated[str, typer.Option(help="paid per accepted contribution, in VERI")] = "10",
    aggregator_fee: Annotated[str, typer.Option(help="paid to each round's aggregator, in VERI")] = "2",
    slot_bond: Annotated[
        str,
        typer.Option(
            help="a party's slot bond, in VERI (at least inner reward + inner fee + contribution reward: a wrong party loses more than its round pays)"
        ),
    ] = "20",
    work_window: Annotated[int, typer.Option(help="seconds from a round's opening to its contribution deadline", min=1)] = 600,
    verify_window: Annotated[int, typer.Option(help="seconds after the deadline a round waits for its inner jobs' verification", min=0)] = 1800,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    json_out: options.Json = False,
) -> None:
    """Post a multi-party job (DiLoCo-style, docs/multiparty.md): M parties train R rounds of H inner steps
    from each round's global model, every contribution and aggregate verified and disputable.

    It computes G_0 (the spec's seeded initialization), uploads the spec, the dataset, G_0 and the job's
    document, and escrows R x (M x (inner job escrow + contribution reward) + aggregator fee); what is
    not spent is credited back when the job ends (`veritrain claim`). Solvers run with --multiparty take
    the slots, each only when a round (H steps of the spec on the whole dataset) fits its advertised
    limits and measured speed within the work window: before posting, the command says on stderr how
    many staked solvers' adverts fit. Follow it with `veritrain submit multiparty-show JOB`.

    Examples:

      veritrain submit multiparty job.json --data tokens.safetensors --parties 4 --quorum 3 --rounds 10 --inner-steps 25 --key-env SUBMITTER_KEY

      veritrain submit multiparty job.json --data tokens.safetensors --contribution-reward 20 --slot-bond 40 --json

      veritrain submit multiparty job.json --data tokens.safetensors --keep 0.1   # top-10 % with error feedback
    """
    from proofs.diloco import MultipartyConfig
    from submitter.multiparty import MultipartyPay, post_multiparty

    try:
        cfg = MultipartyConfig(parties, rounds, inner_steps, outer_lr, outer_momentum, block_size, keep, quorum=quorum)
    except ProofError as exc:
        raise SubmitError(str(exc)) from None
    pay = MultipartyPay(
        parse_tokens(inner_reward, "--inner-reward"),
        parse_tokens(inner_fee, "--inner-fee"),
        parse_tokens(contribution_reward, "--contribution-reward"),
        parse_tokens(aggregator_fee, "--aggregator-fee"),
        parse_tokens(slot_bond, "--slot-bond"),
        work_window,
        verify_window,
    )
    protocol = options.protocol(settings, signing=True)
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    posted = post_multiparty(protocol, store, spec, data, cfg, pay)
    fit = posted.solvers
    err_console.print(fit.line().replace("this job", "a round of this job"), highlight=False, soft_wrap=True)
    if 0 < fit.fitting < cfg.parties:
        err_console.print(
            f"warning: fewer fitting solvers than the job's {cfg.parties} slots; a round with fewer than {cfg.quorum} right contributions ends the job",
            highlight=False,
            soft_wrap=True,
        )
    if json_out:
        print(
            json.dumps(
                {
                    "job_id": posted.job_id,
                    "document_cid": posted.document_cid,
                    "spec_cid": posted.spec_cid,
                    "global_cid": posted.global_cid,
                    "escrow": str(posted.escrow),
                    "solvers": fit.to_json(),
                    "gas": {k: r.gas_used for k, r in posted.receipts.items()},
                }
            )
        )
        return
    console.print(
        f"posted multi-party job [bold]{posted.job_id}[/]  document {posted.document_cid}  G_0 {posted.global_cid}  escrow {show_tokens(posted.escrow)} VERI"
    )
    print(posted.job_id)


@app.command("multiparty-show")
@options.with_settings(*options.CHAIN, "data_dir")
def multiparty_show(
    settings: Settings,
    job: Annotated[int, typer.Argument(help="multi-party job id", show_default=False)],
    curve_png: Annotated[
        Path | None,
        typer.Option("--curve", help="also draw each party's committed curve and each round's mean to this PNG file (800x450)", show_default=False),
    ] = None,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    json_out: options.Json = False,
) -> None:
    """A multi-party job: its round, phase and global model; each round's aggregate (who was paid, who
    was cut out) and each slot's party, inner job and its state, contribution, the dispute games on its
    inner trace and its pay; each party's totals (contributions accepted, games won and lost, VERI
    earned and slashed); and the per-round curve: each inner trace's committed per-segment mean
    training loss over the global step (round x H + step), and each round's mean over its included
    parties, marked replay-checked once the inner job's verifier passed it.

    Examples:

      veritrain submit multiparty-show 1

      veritrain submit multiparty-show 1 --json

      veritrain submit multiparty-show 1 --curve rounds.png
    """
    from submitter.multiparty_report import multiparty_report, read_facts

    if curve_png is not None and (curve_png.is_dir() or not curve_png.parent.is_dir()):
        raise SubmitError(f"--curve {curve_png}: give a file path in a directory that exists")
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    report = multiparty_report(read_facts(options.protocol(settings, signing=False), job), lambda done: committed_curve(store, done))
    drawn = None
    if curve_png is not None:
        curves = report.party_curves()
        if not curves:
            raise SubmitError(f"multi-party job {job} has no committed inner trace whose curve this store holds, so no curve to draw")
        lines: list[tuple[str | None, list[float], list[float]]] = [(_short(party), [x for x, _, _ in c], [y for _, y, _ in c]) for party, c in curves.items()]
        mean = report.mean_curve()
        if mean:
            lines.append(("mean of the included parties", [p.global_step for p in mean], [p.loss for p in mean]))
        draw_lines(lines, curve_png, title=f"multi-party job {job}: committed curves per party and each round's mean (x: round x H + step)")
        drawn = f"wrote {curve_png} ({len(curves)} parties' curves, {len(mean)} mean points)"
    if json_out:
        print(json.dumps(report.to_json(str)))
        return
    d = report.job
    console.print(
        f"multi-party job [bold]{job}[/]: round {d.round} of {d.rounds}, {d.phase.name.lower()}, global model {digest_to_cid(d.global_cid)}, "
        f"funds left {show_tokens(d.funds)} VERI; each accepted contribution pays {show_tokens(d.contribution_reward)} VERI",
        highlight=False,
    )
    rounds = Table("round", "aggregator", "paid slots", "cut out", "state hash", "mean loss (first - last segment)")
    for r in report.rounds:
        mean_words = f"{r.mean_curve[0].loss:.6g} - {r.mean_curve[-1].loss:.6g}{'' if r.mean_curve[-1].checked else ' (not checked)'}" if r.mean_curve else "-"
        rounds.add_row(
            str(r.round),
            _short(r.aggregator) if r.aggregator else "-",
            ", ".join(map(str, r.paid)) or "-",
            ", ".join(map(str, r.cut_out)) or "-",
            r.state_hash[:18] if r.state_hash else "(not final)",
            mean_words,
        )
    console.print(rounds)
    if report.rounds_not_shown:
        console.print(f"rounds 0 to {report.rounds_not_shown - 1} not listed (the totals count them)")
    slots = Table("round", "slot", "party", "inner job", "contribution", "aggregate", "games on its trace", "pay (VERI)", "curve (first - last segment)")
    for r in report.rounds:
        for s in r.slots:
            if s.party is None and s.inner_job is None:
                continue
            verdict = "paid" if s.included else "cut out" if s.cut_out else "-"
            games = ", ".join(f"#{g.game_id} {g.outcome}" for g in s.games) or "-"
            if s.curve is not None and s.curve.points:
                curve = f"{s.curve.points[0].loss:.6g} - {s.curve.points[-1].loss:.6g}" + ("" if s.curve_checked else " (not checked)")
            else:
                curve = s.curve_error or "-"
            inner = f"{s.inner_job} {s.inner_state.name}" if s.inner_job is not None and s.inner_state is not None else str(s.inner_job or "-")
            slots.add_row(
                str(r.round), str(s.slot), _short(s.party) if s.party else "vacant", inner, s.contribution or "-", verdict, games, show_tokens(s.pay), curve
            )
    console.print(slots)
    parties = Table(
        "party", "slots", "contributions", "accepted", "games won", "games lost", "earned (VERI)", "slashed (VERI)", title="each party, every round"
    )
    for t in report.parties:
        parties.add_row(
            _short(t.party),
            ", ".join(map(str, sorted(t.slots))),
            str(t.contributions),
            str(t.accepted),
            str(t.games_won),
            str(t.games_lost),
            show_tokens(t.earned),
            show_tokens(t.slashed),
        )
    console.print(parties)
    if drawn:
        console.print(drawn)
