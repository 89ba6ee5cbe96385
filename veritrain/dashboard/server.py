"""`veritrain dashboard`: a read-only web server over the chain and the content store (aiohttp).

Routes: ``/`` (network), ``/job/{id}``, ``/multiparty/{id}``, ``/address/{address}``: one HTML shell
each, rendered in the browser by ``static/app.js`` from ``/api/network``, ``/api/job/{id}``,
``/api/multiparty/{id}``, ``/api/address/{address}``;
``/api/stream`` is a server-sent event stream that says ``{"head": N}`` whenever the index has
scanned a new block, and the pages re-fetch their JSON then (live, no reload). Every asset is
served from the package (``static/``: app.js, style.css and the vendored uPlot), never a CDN.
The index advances on one background task; chain reads run in worker threads (web3 is blocking).
"""

from __future__ import annotations

import asyncio
import html
import json
import logging
from pathlib import Path
from typing import Annotated, Any

import typer
from aiohttp import web
from eth_utils import is_address, to_checksum_address

from core.address_book import AddressBook
from core.chain import Address
from core.contracts import JobId, Protocol
from core.errors import ConfigError
from core.storage import ContentStore
from rolebase import cli as options
from rolebase.cli import console, open_store
from veritrain.dashboard.index import ChainIndex
from veritrain.dashboard.views import Views

log = logging.getLogger("veritrain.dashboard")

STATIC = Path(__file__).parent / "static"
_INDEX: web.AppKey[ChainIndex] = web.AppKey("index", ChainIndex)
_VIEWS: web.AppKey[Views] = web.AppKey("views", Views)
_HEAD: web.AppKey[asyncio.Condition] = web.AppKey("head", asyncio.Condition)
_POLL: web.AppKey[float] = web.AppKey("poll", float)
_TASK: web.AppKey[asyncio.Task[None]] = web.AppKey("task", asyncio.Task)

_SHELL = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>veritrain: {title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/uPlot.min.css"><link rel="stylesheet" href="/static/style.css">
</head><body data-page="{page}" data-key="{key}">
<header><a href="/">veritrain</a> <span id="head"></span> <span id="live" title="live updates">&#9679;</span></header>
<main id="main"><p>loading...</p></main>
<script src="/static/uPlot.iife.min.js"></script><script src="/static/app.js"></script>
</body></html>
"""


def make_app(protocol: Protocol, store: ContentStore | None, poll: float) -> web.Application:
    """The dashboard's aiohttp application over ``protocol`` and ``store`` (None: pages without specs, manifests, reports)."""
    index = ChainIndex(protocol)
    app = web.Application()
    app[_INDEX] = index
    app[_VIEWS] = Views(index, store)
    app[_HEAD] = asyncio.Condition()
    app[_POLL] = poll
    app.router.add_get("/", _network_page)
    app.router.add_get("/job/{id:[0-9]+}", _job_page)
    app.router.add_get("/address/{address}", _address_page)
    app.router.add_get("/multiparty/{id:[0-9]+}", _multiparty_page)
    app.router.add_get("/api/network", _network_api)
    app.router.add_get("/api/job/{id:[0-9]+}", _job_api)
    app.router.add_get("/api/address/{address}", _address_api)
    app.router.add_get("/api/multiparty/{id:[0-9]+}", _multiparty_api)
    app.router.add_get("/api/stream", _stream)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)
    app.on_startup.append(_start_indexing)
    app.on_cleanup.append(_stop_indexing)
    return app


async def _start_indexing(app: web.Application) -> None:
    await asyncio.to_thread(app[_INDEX].advance)  # the first scan: pages are whole from the first request
    app[_TASK] = asyncio.create_task(_follow(app))


async def _stop_indexing(app: web.Application) -> None:
    app[_TASK].cancel()


async def _follow(app: web.Application) -> None:
    """Advance the index every ``poll`` seconds; wake the event streams when it moved."""
    index, head = app[_INDEX], app[_HEAD]
    while True:
        await asyncio.sleep(app[_POLL])
        try:
            moved = await asyncio.to_thread(index.advance)
        except Exception as exc:  # an RPC hiccup: logged, retried on the next tick; the pages keep the last scan
            log.warning("index not advanced: %s", exc)
            continue
        if moved:
            async with head:
                head.notify_all()


def _shell(page: str, title: str, key: str = "") -> web.Response:
    body = _SHELL.format(page=page, title=html.escape(title), key=html.escape(key))
    return web.Response(text=body, content_type="text/html", headers={"Cache-Control": "no-store"})


def _account(request: web.Request) -> Address:
    given = request.match_info["address"]
    if not is_address(given):
        raise web.HTTPNotFound(text=f"{given[:64]!r} is not an address")
    return Address(to_checksum_address(given))


async def _network_page(request: web.Request) -> web.Response:
    return _shell("network", "network")


async def _job_page(request: web.Request) -> web.Response:
    return _shell("job", f"job {request.match_info['id']}", request.match_info["id"])


async def _multiparty_page(request: web.Request) -> web.Response:
    return _shell("multiparty", f"multi-party job {request.match_info['id']}", request.match_info["id"])


async def _address_page(request: web.Request) -> web.Response:
    account = _account(request)
    return _shell("address", account, account)


def _json(value: Any) -> web.Response:
    return web.json_response(value, dumps=lambda v: json.dumps(v, default=str))


async def _network_api(request: web.Request) -> web.Response:
    state = request.query.get("state")
    return _json(await asyncio.to_thread(request.app[_VIEWS].network, state.upper() if state else None))


async def _job_api(request: web.Request) -> web.Response:
    page = await asyncio.to_thread(request.app[_VIEWS].job, JobId(int(request.match_info["id"])))
    if page is None:
        raise web.HTTPNotFound(text=f"no job {request.match_info['id']} on chain (yet)")
    return _json(page)


async def _multiparty_api(request: web.Request) -> web.Response:
    page = await asyncio.to_thread(request.app[_VIEWS].multiparty, int(request.match_info["id"]))
    if page is None:
        raise web.HTTPNotFound(text=f"no multi-party job {request.match_info['id']} on chain (yet)")
    return _json(page)


async def _address_api(request: web.Request) -> web.Response:
    return _json(await asyncio.to_thread(request.app[_VIEWS].address, _account(request)))


async def _stream(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the head block now, then each time the index moves."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
    await response.prepare(request)
    index, head = request.app[_INDEX], request.app[_HEAD]
    while True:
        await response.write(f"data: {json.dumps({'head': index.head})}\n\n".encode())
        async with head:
            try:
                await asyncio.wait_for(head.wait(), timeout=15)
            except TimeoutError:
                pass  # a keep-alive: the same head again


def dashboard(
    rpc: options.Rpc = None,
    chain_id: options.ChainId = None,
    book_dir: options.BookDir = None,
    data_dir: options.DataDir = None,
    store_dir: options.StoreDir = None,
    ipfs_api: options.IpfsApi = None,
    host: Annotated[str, typer.Option(help="address to listen on (127.0.0.1: this machine only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8080,
    poll: Annotated[float, typer.Option(help="seconds between scans of new blocks")] = 1.0,
) -> None:
    """Serve a read-only, live web dashboard of the network, its jobs and its accounts.

    Built from the chain and the content store alone (specs, manifests, reports); it sends no transaction and holds no key. Pages update live, without a reload.

    Pages: / (jobs by state, multi-party jobs, staked solvers, verifiers and whistleblowers, the jackpot, recent slashes), /job/ID (timeline with gas, spec, training curve, verification, disputes move by move, the model's CID), /multiparty/ID (rounds, each slot's contribution, games and pay, each party's totals, the per-round curve), /address/ADDRESS (stakes, earnings plot).

    Examples:

      veritrain dashboard --rpc-url http://127.0.0.1:8545 --store-dir store/

      veritrain dashboard --ipfs-api http://127.0.0.1:5001 --port 9000
    """
    if not 0 < port < 65536:
        raise ConfigError(f"--port {port} is not a TCP port")
    if not 0.05 <= poll <= 60:
        raise ConfigError(f"--poll {poll} must be in 0.05..60 seconds")
    settings = options.settings(rpc_url=rpc, chain_id=chain_id, address_book_dir=book_dir, data_dir=data_dir)
    client = options.client(settings)
    protocol = Protocol.connect(client, AddressBook.for_chain(settings.address_book_dir, client))
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    console.print(f"dashboard of chain {client.chain_id} on http://{host}:{port}/ (Ctrl-C stops it)", highlight=False)
    # open event streams never end by themselves: a stop waits 1 s for them, then cancels them
    web.run_app(make_app(protocol, store, poll), host=host, port=port, print=None, access_log=None, shutdown_timeout=1.0)
