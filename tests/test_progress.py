"""No run hangs: the watchdog stops a run that makes no progress, and a Q1-like query whose
micro-batches are shorter than, as long as or longer than its window finishes with the
reference's rows under every shape of placement."""

from __future__ import annotations

import shutil
import time

import polars as pl
import pytest

from benchmarking import reference
from benchmarking.verify import SMALL, placements
from columnar.store import ColumnarStore
from optimizer import load_catalog, load_profile, optimize
from optimizer.errors import TandemError
from runtime.run import Watchdog
from tests.conftest import QUERIES, query_sql
from tests.matrix import FULL, reduced, spec
from tests.test_reference import assert_same_rows
from workload.smart_plugs import SmartPlugs


def test_the_watchdog_stops_a_run_without_progress(tmp_path):
    watchdog = Watchdog(0.2, tmp_path / "spark.log")
    watchdog.check(reports=1, spark_batch=3, ended=False, final_end=None)
    time.sleep(0.1)
    watchdog.check(reports=2, spark_batch=3, ended=False, final_end=None)  # progress
    time.sleep(0.15)
    watchdog.check(reports=2, spark_batch=3, ended=False, final_end=None)  # 0.15 s: not yet
    time.sleep(0.1)
    with pytest.raises(TandemError, match="no micro-batch finished in 0 s .* batch 3"):
        watchdog.check(reports=2, spark_batch=3, ended=False, final_end=None)


def test_the_watchdog_stops_a_generated_stream_that_never_completes(tmp_path, monkeypatch):
    monkeypatch.setattr("runtime.run.ENDED_GRACE", 0.1)
    watchdog = Watchdog(60, tmp_path / "spark.log")
    watchdog.check(reports=1, spark_batch=1, ended=True, final_end="the end")
    time.sleep(0.15)
    with pytest.raises(TandemError, match="never completed up to its last window_end the end"):
        watchdog.check(reports=1, spark_batch=1, ended=True, final_end="the end")


# A Q1 with a 30-s window sliding by 5 s, over 60 s of event time at 3 tuples/s: two windows'
# length, which every span below (10 s), at (30 s) and above (50 s) the window cuts into
# micro-batches that windows straddle.
SHORT_Q1 = query_sql("q1").replace("INTERVAL '1' SECOND, INTERVAL '5' MINUTES",
                                   "INTERVAL '5' SECOND, INTERVAL '30' SECOND")
RATE, DURATION = 3, 60
SHAPES = [p for _, p in reduced([(str(QUERIES / "q1.sql"), spec(p))
                                 for p in placements(str(QUERIES / "q1.sql"), "5")])]


@pytest.fixture(scope="module")
def short_q1(tmp_path_factory):
    folder = tmp_path_factory.mktemp("short_q1")
    shutil.copy(QUERIES / "catalog.toml", folder)
    (folder / "q1_short.sql").write_text(SHORT_Q1)
    return folder / "q1_short.sql"


SPANS = (10, 30, 50)  # below, equal to and above the window
# Each span with every shape in `make test-matrices`; in `make test`, each shape with one span
# and each span with some shapes.
SPANNED = ([(p, s) for s in SPANS for p in SHAPES] if FULL
           else [(p, SPANS[i % len(SPANS)]) for i, p in enumerate(SHAPES)])


@pytest.mark.integration
@pytest.mark.parametrize(("placement", "span"), SPANNED)
def test_a_short_window_finishes_at_every_micro_batch_span(tmp_path, short_q1, placement, span):
    assert_short_q1_exact(tmp_path, short_q1, placement, span, DURATION)


@pytest.mark.integration
def test_the_last_window_completes_when_no_batch_heartbeat_lies_in_it(tmp_path, short_q1):
    # 200 s in 50-s micro-batches: the batches' heartbeats at 150 s and 200 s lie in the windows
    # ending 155-180 s and 205-230 s, none in the last one (200 s). Pure Spark's chained
    # operators then never passed it on, and the run stopped as "never completed".
    assert_short_q1_exact(tmp_path, short_q1, "spark", 50, 200)


def assert_short_q1_exact(tmp_path, short_q1, placement: str, span: float, duration: float):
    from runtime.run import run
    from runtime.spec import RunSpec

    summary = run(RunSpec(str(short_q1), placement=placement, rate=RATE, duration=duration,
                          batch=span, topology=SMALL, store=tmp_path / "t.duckdb",
                          stall_timeout=300))
    root = optimize(SHORT_Q1, load_catalog(QUERIES / "catalog.toml"), load_profile()).logical.root
    stream = {"plugs": pl.from_arrow(SmartPlugs(rate=RATE, **SMALL).between(0, duration))}
    with ColumnarStore(tmp_path / "t.duckdb") as store:
        got = pl.from_arrow(store.results("q1_short"))
    first, last = reference.window_ends(stream, root.slide)
    assert summary.window_ends == (last - first) // int(root.slide * 1e6) + 1
    assert_same_rows(got.select(root.columns), reference.evaluate(root, stream))
