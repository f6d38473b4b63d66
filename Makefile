# `make demo` and `make test` each create or refresh .venv, then do their job.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test unit integration bench lint clean airflow browser peers

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,airflow]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tandem explain q1 --rate 20000 --exhaustive
	$(BIN)/tandem run q1 --rate 2000 --duration 360

airflow: $(STAMP)
	$(BIN)/tandem airflow

# The browser test drives Debian's Chromium (Playwright cannot download browsers here).
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium for the browser test"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "make test: the browser test needs Chromium: run 'sudo apt-get install chromium' and try again"; \
	    exit 1; \
	  fi; }

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

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

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(FLINK) .tandem .airflow .pytest_cache .hypothesis
