# `make demo` and `make test` each create or refresh .venv, then do their job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-matrices test-peers unit integration bench lint clean airflow system-packages peers

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,airflow,postgres]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tandem explain q1 --rate 20000 --exhaustive
	$(BIN)/tandem run q1 --rate 2000 --duration 360
	$(BIN)/tandem results q1 --windows 1 --limit 10

airflow: $(STAMP)
	$(BIN)/tandem airflow

# Debian's packages the integration tests drive: Chromium for the browser test (Playwright
# cannot download browsers here), PostgreSQL for Airflow's metadata and docker-compose to
# validate docker/compose.yaml (tests/test_docker.py).
system-packages:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v docker-compose >/dev/null || missing="$$missing docker-compose"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's$$missing for the integration tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "make test: the integration tests need Debian's$$missing: run 'sudo apt-get install$$missing' and try again"; \
	    exit 1; \
	  fi; fi

# The classes a Spark run loads, archived once for the tests' JVMs (AppCDS, tests/conftest.py).
# The JVM writes the archive as it exits, after the command: the recipe waits for it. The
# archive holds the class path it was made with, which the Spark home decides (a JVM on another
# class path ignores it).
JSA := $(VENV)/spark-classes.jsa
$(JSA): $(STAMP) rowstream/spark_home.py
	@echo "archiving the classes a Spark run loads, for the tests' JVMs (once, a minute or two)"
	@command -v pgrep >/dev/null || { echo "no pgrep (procps): the tests' JVMs start without an archive"; exit 0; }; \
	tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	  SPARK_SUBMIT_OPTS=-XX:ArchiveClassesAtExit=$$tmp/classes.jsa $(BIN)/tandem run q5 \
	    --rate 5 --duration 20 --batch 10 --store $$tmp/t.duckdb >$$tmp/run.log 2>&1 \
	    || { cat $$tmp/run.log; exit 1; }; \
	  while pgrep -f "ArchiveClassesAtExit=$$tmp" >/dev/null; do sleep 1; done; \
	  if [ -s $$tmp/classes.jsa ]; then mv $$tmp/classes.jsa $@; \
	  else echo "the JVM wrote no archive: the tests' JVMs start without one"; fi

# Two test processes, each test module on one (with its shared session, cluster or Airflow).
# Most tests are Spark runs, and a Spark run leaves about a fifth of two cores idle (vmstat):
# the second process fills it. The peer's tests need `make peers` (850 MB): `make test` is the
# same suite on every machine, and `make test-peers` runs them. The slowest tests are listed at
# the end, against the target of 15 minutes for the whole suite. The checkout's modules are
# byte-compiled first, as pip compiles an installed package's: where PYTHONDONTWRITEBYTECODE is
# set, every process the tests start (a CLI command, a killed run, an Airflow task) would
# compile them again, about 0.3 s each for the CLI's.
test: $(STAMP) $(JSA) system-packages
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m compileall -q -x '/\.' .
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not peers" --durations=20

# Every placement of the integration tests' samples, not one per class (tests/matrix.py), and
# the optimiser's exhaustive check of J5 at every rate and overlap (tests/test_search.py).
test-matrices: $(STAMP) $(JSA) system-packages
	TANDEM_FULL_MATRICES=1 $(BIN)/python -m pytest -q tests/test_disorder.py tests/test_run.py \
	  tests/test_progress.py tests/test_migration_run.py tests/test_cluster.py tests/test_search.py

unit: $(STAMP)
	$(BIN)/python -m pytest -q -m "not integration"

bench: $(STAMP)
	$(BIN)/python bench/optimizer_bench.py

# Flink SQL, the benchmark's peer (bench/peers/flink.py): apache-flink pins py4j, pandas and
# pyarrow below what Spark 4 and DuckDB need, so it has a virtual environment of its own.
FLINK := .venv-flink
$(FLINK)/.installed:
	@test -x $(FLINK)/bin/python || $(PYTHON) -m venv $(FLINK)
	$(FLINK)/bin/python -m pip install --quiet 'apache-flink==2.3.0'
	@touch $@

peers: $(STAMP) $(FLINK)/.installed

test-peers: peers
	$(BIN)/python -m pytest -q -m peers

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(FLINK) .tandem .airflow .pytest_cache .hypothesis
