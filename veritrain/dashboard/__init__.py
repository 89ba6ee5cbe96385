"""`veritrain dashboard`: a live, read-only web view of the network, its jobs and its accounts.

:mod:`veritrain.dashboard.index` follows the chain block by block, :mod:`veritrain.dashboard.views`
turns it into each page's JSON, :mod:`veritrain.dashboard.server` serves the pages (aiohttp) and
``static/`` their assets: ``app.js``, ``style.css`` and uPlot 1.6.32 (MIT, ``uPlot.LICENSE``), the
npm package's ``dist/uPlot.iife.min.js`` and ``dist/uPlot.min.css`` unchanged (docs/dashboard.md).
"""
