# Two commands do all the set-up on a fresh machine (see README):
#   make demo   - the end-to-end demo on a local chain
#   make test   - every test: forge (unit, fuzz, invariant) and pytest
# Each installs what it needs, idempotently: a virtualenv from requirements.lock and the
# pinned npm toolchain from package-lock.json, redone only when those files change.

VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := node_modules/.bin
STAMPS := .stamps

.PHONY: setup demo test test-lint test-forge test-py build warm bench clean

setup: $(STAMPS)/venv $(STAMPS)/npm

# The dashboard's browser test drives Debian's chromium through its chromedriver (selenium, pinned in
# requirements.lock). Installed with apt-get where we are root and it is missing; elsewhere that test
# skips and says why.
$(STAMPS)/browser:
	@mkdir -p $(STAMPS)
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then echo "setup: chromium and chromedriver present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "setup 3/3: Debian's chromium and chromium-driver (apt-get) for the dashboard's browser test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null; \
	else echo "setup: no chromium and not root: the dashboard's browser test will skip"; fi
	@touch $@

$(STAMPS)/venv: requirements.lock pyproject.toml
	@mkdir -p $(STAMPS)
	@echo "setup 1/2: Python virtualenv from requirements.lock (torch, web3; a few minutes the first time)"
	test -x $(PY) || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $@

$(STAMPS)/npm: package.json package-lock.json
	@mkdir -p $(STAMPS)
	@echo "setup 2/2: npm toolchain from package-lock.json (solc, forge, anvil, cast, OpenZeppelin, js-ipfs), no install scripts"
	# `npm install --no-save` from the lock, not `npm ci`: npm 11 leaves the other platforms'
	# optional foundry binaries out of the lock and `npm ci` then refuses it as out of sync.
	# --ignore-scripts: js-ipfs's optional dependencies (electron, wrtc) ran install scripts that failed
	# quietly and left files in $$HOME and /tmp; foundry's binaries come as platform packages and
	# classic-level loads its prebuilds, so nothing needed runs a script.
	npm install --no-save --no-audit --no-fund --ignore-scripts --loglevel=error
	@touch $@

build: setup
	$(BIN)/forge build --offline
	$(PY) -m deploy.build

# The repro kernels compiled for this CPU into numba's cache (2.7 minutes of a core the first time,
# seconds after), before any daemon's first job or test needs them: on a fresh clone the suite's
# processes each compiled the kernels they met, side by side (one e2e test 121 s, 68 s warm).
warm: setup
	$(VENV)/bin/veritrain warm

demo: build warm
	$(VENV)/bin/veritrain demo

# Gas figures mean something only with --isolate (each call its own transaction): the gas suites
# run there, where they check the budgets and write snapshots/; everything else runs plainly.
test-forge: build
	$(BIN)/forge test --offline --no-match-contract 'Gas'
	$(BIN)/forge test --offline --isolate --match-contract 'Gas'


# Two pytest-xdist workers by default: the tests on a chain's wall-clock windows (role daemons, the dispute
# arena) stay on one worker, one after another (their windows are sized for that), and the other runs the
# rest at a lower CPU priority (tests/conftest.py). On 2 cores: 42 min against 66 in one process (README).
# PYTEST_WORKERS=0: one process.
PYTEST_WORKERS ?= 2
test-py: build warm $(STAMPS)/browser
	$(PY) -m pytest -n $(PYTEST_WORKERS)

# ruff and mypy (pinned in requirements.lock, configured in pyproject.toml): lint, formatting
# checked, and the types of every package (mypy's [tool.mypy] lists them).
test-lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: test-lint test-forge test-py


bench: build
	$(PY) -m bench

clean:
	rm -rf $(STAMPS) $(VENV) node_modules build cache
