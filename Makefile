# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: faults test-topologies run demo test test-spark lint dist smoke vendor-swagger-ui bench bench-peers bench-scale bench-spark bench-stacks bench-http example-spark system-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[server]'
	@touch $@

# PySpark ships as a ~450 MB sdist: its wheel is built once, outside the
# checkout, and installed from there (a new checkout or venv reuses it)
PYSPARK_VERSION := 4.3.0
WHEELS := $(HOME)/.cache/chronoq/wheels
PYSPARK_WHEEL := $(WHEELS)/pyspark-$(PYSPARK_VERSION)-py2.py3-none-any.whl

$(PYSPARK_WHEEL): | $(BIN)/python
	@mkdir -p $(WHEELS)
	$(BIN)/python -m pip wheel -q --no-deps 'pyspark==$(PYSPARK_VERSION)' -w $(WHEELS)

$(VENV)/.installed-dev: pyproject.toml $(PYSPARK_WHEEL) | $(BIN)/python
	$(BIN)/python -m pip install -q --find-links $(WHEELS) -e '.[dev,redis,spark,server]' \
	  'pyspark==$(PYSPARK_VERSION)'
	@touch $@ $(VENV)/.installed

## run: install into .venv and serve the HTTP API and the dashboard on 127.0.0.1:7070 (SQLite store)
run: $(VENV)/.installed
	$(BIN)/chronoq serve $(ARGS)

## demo: the live demo of on-time delivery, in the terminal
demo: $(VENV)/.installed
	$(BIN)/chronoq demo

# The suites spend most of their time waiting (for due times, leases, processes):
# three pytest processes, a test file each at a time, fill two cores.
# `make test PARALLEL=` runs them in one process.
PARALLEL ?= -n 3 --dist loadfile

## test: install what the tests need and run the suite (the Spark pipeline's has its own target)
test: $(VENV)/.installed-dev system-deps
	$(BIN)/python -m pytest $(PARALLEL) --ignore=tests/pipeline --ignore=tests/cluster \
	  --ignore=tests/faults --ignore=tests/bench/test_cluster_bench.py \
	  --ignore=tests/bench/test_scale_bench.py

## test-topologies: the conformance suite and the cluster tests on a real Redis Cluster (3 primaries, 3 replicas) and a Sentinel-managed primary, then the quick runs of the cluster and scale benchmarks, alone (CI runs them after make test)
test-topologies: $(VENV)/.installed-dev system-deps
	CHRONOQ_TOPOLOGIES=cluster,sentinel $(BIN)/python -m pytest $(PARALLEL) tests/conformance \
	  -k "redis-cluster or redis-sentinel"
	$(BIN)/python -m pytest $(PARALLEL) tests/cluster
	$(BIN)/python -m pytest tests/bench/test_cluster_bench.py tests/bench/test_scale_bench.py  # alone: they measure

## faults: fault-injection runs with a total-queue checker (kill -9, SIGSTOP, Redis crash, network cut, cluster failover and reshard, Sentinel failover)
faults: $(VENV)/.installed-dev system-deps
	$(BIN)/python -m pytest tests/faults

## test-spark: the Spark pipeline's tests (a local[2] Spark: slow; CI runs them after make test)
test-spark: $(VENV)/.installed-dev system-deps
	$(BIN)/python -m pytest tests/pipeline

## example-spark: the orders example (a million orders scheduled from Spark, a worker, export, analyze)
example-spark: $(VENV)/.installed-dev system-deps
	$(BIN)/python examples/orders/run.py $(ARGS)

## lint: ruff and mypy
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
WHEEL   := dist/chronoq-$(VERSION)-py3-none-any.whl

## dist: the sdist, then the wheel built from it (so the sdist is known to build), into dist/, and a check of what each holds
dist: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python tests/smoke/check_dist.py dist

# --docs: check the API reference page /docs too
SMOKE_ARGS ?= --docs

## smoke: the wheel as users install it: a new virtualenv outside the checkout, the wheel with [server,redis] (not editable), and tests/smoke/smoke.py run there, from outside the checkout
smoke: dist system-deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && set -e && \
	echo "smoke: a new virtualenv in $$tmp" && \
	$(PYTHON) -m venv "$$tmp/venv" && \
	"$$tmp/venv/bin/python" -m pip install -q '$(CURDIR)/$(WHEEL)[server,redis]' && \
	cd "$$tmp" && "$$tmp/venv/bin/python" -I '$(CURDIR)/tests/smoke/smoke.py' \
	  --checkout '$(CURDIR)' $(SMOKE_ARGS)

# Swagger UI, the API reference page at /docs: the npm package swagger-ui-dist,
# pinned by version and by the sha512 of its tarball (npm's "integrity"); only
# the files /docs serves and the package's licence files are kept, unchanged.
# npm runs here alone, never at build or run time. To update: set the version,
# run the target once (it fails and prints the new tarball's integrity), check
# the new version's licence, set the integrity, run it again, and update
# static/README.md (tests/server/test_docs_page.py checks it against the files).
SWAGGER_UI_VERSION   := 5.35.0
SWAGGER_UI_INTEGRITY := sha512-U06rpMtW9V3XPGOBeamTUSr0Z09jMX4IJuANpE/EZbAhw0G8CgwrzU4YmXkn/h0wCDNsXdGarTNNHC3sU8yVUQ==
DOCS_STATIC          := src/chronoq/server/docs_page/static

## vendor-swagger-ui: fetch the pinned swagger-ui-dist from the npm registry (npm pack), check its integrity, copy the files /docs serves into src/chronoq/server/docs_page/static/
vendor-swagger-ui:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && set -e && \
	tarball=swagger-ui-dist-$(SWAGGER_UI_VERSION).tgz && \
	( cd "$$tmp" && npm pack --silent 'swagger-ui-dist@$(SWAGGER_UI_VERSION)' >/dev/null ) && \
	got=$$($(PYTHON) -c 'import base64, hashlib, sys; \
	  print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' \
	  "$$tmp/$$tarball") && \
	if [ "$$got" != '$(SWAGGER_UI_INTEGRITY)' ]; then \
	  echo "vendor-swagger-ui: $$tarball has integrity $$got, not the pinned $(SWAGGER_UI_INTEGRITY):"; \
	  echo "  check the version and its licence, then set SWAGGER_UI_INTEGRITY in the Makefile"; \
	  exit 1; fi && \
	tar -xzf "$$tmp/$$tarball" -C "$$tmp" package/swagger-ui-bundle.js package/swagger-ui.css \
	  package/swagger-ui-bundle.js.LICENSE.txt package/LICENSE package/NOTICE package/package.json && \
	grep -q '"license": "Apache-2.0"' "$$tmp/package/package.json" || \
	  { echo "vendor-swagger-ui: the package's licence is no longer Apache-2.0: read it first"; exit 1; } && \
	mkdir -p $(DOCS_STATIC) && \
	cp "$$tmp/package/swagger-ui-bundle.js" "$$tmp/package/swagger-ui.css" \
	  "$$tmp/package/swagger-ui-bundle.js.LICENSE.txt" $(DOCS_STATIC)/ && \
	cp "$$tmp/package/LICENSE" $(DOCS_STATIC)/swagger-ui-LICENSE && \
	cp "$$tmp/package/NOTICE" $(DOCS_STATIC)/swagger-ui-NOTICE && \
	cd $(DOCS_STATIC) && sha256sum swagger-ui-bundle.js swagger-ui.css && \
	echo "vendor-swagger-ui: swagger-ui-dist $(SWAGGER_UI_VERSION) is in $(DOCS_STATIC)"

## bench: the SQLite, Redis and worker benchmarks (results in docs/benchmarks.md)
bench: $(VENV)/.installed-dev system-deps
	$(BIN)/python bench/sqlite.py
	$(BIN)/python bench/redis.py
	$(BIN)/python bench/worker.py

$(VENV)/.installed-bench: pyproject.toml $(PYSPARK_WHEEL) | $(BIN)/python
	$(BIN)/python -m pip install -q --find-links $(WHEELS) -e '.[dev,redis,spark,server,bench]' \
	  'pyspark==$(PYSPARK_VERSION)'
	@touch $@ $(VENV)/.installed-dev $(VENV)/.installed

## bench-scale: the Redis far tier at scale: memory per job per tier, 10 million jobs put (rate, AOF, restart), promotion of a bucket of a million jobs (rate, lag), a 100-million-job model, SQLite on disk (about 40 minutes; ARGS=--quick: 2; results in docs/benchmarks.md)
bench-scale: $(VENV)/.installed-dev system-deps
	$(BIN)/python bench/scale.py $(ARGS)

## bench-spark: the Spark pipeline (bulk scheduling, export, analyze; results in docs/benchmarks.md)
bench-spark: $(VENV)/.installed-dev system-deps
	$(BIN)/python bench/spark.py $(ARGS)

## bench-stacks: the candidate HTTP stacks for chronoq serve, next to a bare ASGI app (needs wrk)
bench-stacks: $(VENV)/.installed-bench
	@command -v wrk >/dev/null 2>&1 || { \
	  echo "installing wrk (Debian package)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
	$(BIN)/python bench/stacks/run.py $(ARGS)

## bench-http: chronoq serve on SQLite and Redis, next to a bare ASGI hello-world (needs wrk); ARGS=--versus: its pushes against ouqiang's Go server (OUQIANG_BIN=path to its binary)
bench-http: $(VENV)/.installed-bench system-deps
	@command -v wrk >/dev/null 2>&1 || { \
	  echo "installing wrk (Debian package)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
	$(BIN)/python bench/http/run.py $(ARGS)

## bench-peers: chronoq next to RQ, arq, huey, Dramatiq, Celery, SAQ and BullMQ (peers in bench/.venvs/; BullMQ needs node and npm)
bench-peers: $(VENV)/.installed-bench system-deps
	$(BIN)/python bench/peers/run.py $(ARGS)

# redis-server for the Redis backend's tests, a Java 17+ runtime for Spark and
# Chromium with its driver for the dashboard's browser test: Debian's packages
# when missing (nothing downloads a browser build)
system-deps:
	@command -v wrk >/dev/null 2>&1 || { \
	  echo "installing wrk (Debian package), the HTTP benchmark's load generator"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
	@{ command -v chromium && command -v chromedriver; } >/dev/null 2>&1 || { \
	  echo "installing chromium and chromium-driver (Debian packages)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    chromium chromium-driver; }
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server (Debian package)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	[ -n "$$v" ] && [ "$$v" -ge 17 ] || { \
	  echo "installing a Java runtime for Spark (Debian package openjdk-17-jre-headless)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openjdk-17-jre-headless; }

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache chronoq.db chronoq.db-wal chronoq.db-shm \
	  examples/orders/out
