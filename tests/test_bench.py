"""The benchmark's figures from measured points: maximum sustainable rate, optimiser accuracy,
prediction quality, and the plans it measures at a point."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarking.bench import (
    CHOICE,
    DUCKDB,
    NO_FEASIBILITY,
    PIPELINED,
    SPARK,
    Measured,
    Point,
    accuracy,
    max_rate,
    plans_at,
    points_from,
    prediction_share,
    ranked_points,
    summary,
)
from benchmarking.verify import placements
from optimizer.phase_two import ranked
from runtime.explain import explain
from tests.conftest import ROOT

SPARK_ONLY = {"a": "spark"}
DUCK_ONLY = {"a": "duckdb"}


def point(rate, spark, duck, chosen=DUCK_ONLY, predicted=None):
    """pure-Spark and pure-DuckDB measured; the optimiser chose ``chosen``."""
    plans = []
    for placement, capacity in ((SPARK_ONLY, spark), (DUCK_ONLY, duck)):
        roles = [SPARK if placement == SPARK_ONLY else DUCKDB]
        if placement == chosen:
            roles += [CHOICE, NO_FEASIBILITY, PIPELINED]
        plans.append(Measured(placement, roles, rate, predicted or capacity, capacity))
    return Point("q1", rate, plans)


def test_max_rate_is_the_largest_rate_a_plan_kept_up_with():
    points = [point(1000, 1500, 9000), point(2000, 1900, 9000), point(5000, None, 6000),
              point(10_000, None, 8000)]
    assert max_rate(points, SPARK) == 1000
    assert max_rate(points, DUCKDB) == 5000
    assert max_rate(points, CHOICE) == 5000


def test_accuracy_counts_choices_within_ten_percent_of_the_best():
    points = [point(1000, 1000, 950, chosen=DUCK_ONLY),   # 95 % of the best: accurate
              point(2000, 2000, 1700, chosen=DUCK_ONLY),  # 85 %: not
              point(5000, 500, 6000, chosen=SPARK_ONLY),  # the worse plan: not
              point(10_000, 10, 7000, chosen=DUCK_ONLY)]
    assert accuracy(points) == 0.5


def test_ranked_points_are_those_where_more_than_one_plan_kept_up():
    points = [point(900, 1000, 950, chosen=DUCK_ONLY),    # both kept up, 95 %: accurate
              point(1500, 2100, 1700, chosen=DUCK_ONLY),  # both kept up, 81 %: not
              point(5000, 500, 6000, chosen=DUCK_ONLY)]   # one plan kept up: no ranking
    assert ranked_points(points) == (1, 2)
    assert summary(points)["overall"]["optimizer_accuracy_ranked"] == 0.5


def test_the_rivals_are_the_plans_ranked_next_after_the_choice():
    query, rate = "q3", 20_000
    plans = plans_at(query, rate, others=0, rivals=2)
    rivals = {r.split(":")[0]: p for p, roles, _ in plans for r in roles if r.startswith("rival")}
    assert sorted(rivals) == ["rival 2", "rival 3"]
    # Every placement of the space ranked from scratch (physical.plan_cost), apart from explain.
    o = explain(query, rate=rate).optimization
    order = sorted(ranked(o.logical, p, o.model, o.objective)
                   for p in placements(query, "all", rate=rate))
    chosen = next(p for p, roles, _ in plans if CHOICE in roles)
    got = [ranked(o.logical, p, o.model, o.objective)
           for p in (chosen, rivals["rival 2"], rivals["rival 3"])]
    assert got == order[:3]


def test_prediction_share_leaves_out_bounds_and_carried_figures():
    p = point(1000, 1000, 3000, predicted=1400)  # within 1.5x: 1000 yes, 3000 no
    bound = Measured(SPARK_ONLY, ["other"], 1000, 10, 100, bound=True)
    carried = Measured(SPARK_ONLY, ["other"], 2000, 10, 100, carried_from=1000)
    p.plans += [bound, carried]
    assert prediction_share([p]) == (1, 2)


def test_summary_gives_ratios_of_max_rates():
    points = [point(1000, 1500, 9000), point(2000, 1000, 9000), point(5000, None, 6000)]
    figures = summary(points)["queries"]["q1"]
    assert figures["max_rate"][CHOICE] == 5000 and figures["ratio_vs_spark"] == 5.0
    assert figures["ratio_vs_duckdb"] == 1.0


def test_capacity_ratios_come_from_the_highest_rate_both_plans_were_measured_at():
    points = [point(1000, 1500, 9000), point(2000, 1000, 8000), point(5000, 1000, 6000)]
    points[2].plans[0].carried_from = 2000  # pure-Spark fell short at 2000: not measured again
    figures = summary(points)["queries"]["q1"]
    assert figures["capacity_ratio_rate_vs_spark"] == 2000
    assert figures["capacity_ratio_vs_spark"] == 8.0


def test_plans_at_a_point_are_distinct_and_hold_every_role():
    plans = plans_at("q1", 2000, others=2)
    specs = [tuple(sorted(p.items())) for p, _, _ in plans]
    assert len(specs) == len(set(specs))
    roles = [r for _, rs, _ in plans for r in rs]
    for role in (SPARK, DUCKDB, CHOICE, NO_FEASIBILITY, PIPELINED):
        assert roles.count(role) == 1
    assert sum(1 for _, rs, _ in plans if rs[0].startswith("other")) == 2
    assert {"spark"} == set(next(p for p, rs, _ in plans if SPARK in rs).values())


def test_bench_json_gives_back_its_points():
    points = [point(1000, 1500, 9000), point(2000, None, 9000)]
    again = points_from(summary(points))
    assert summary(again) == summary(points)


def test_the_report_gives_the_figures_of_bench_json_and_the_notes_beside_it(tmp_path):
    from benchmarking.report import write  # matplotlib: only this test needs it

    points = [point(1000, 1500, 9000), point(2000, 1000, 8000)]
    out = tmp_path / "2026-01-01"
    out.mkdir()
    (out / "notes.md").write_text("## Where the figures fall short\n\nA cause.\n")
    report = write(points, out, "tandem bench", "profile.toml", 3.0, "buckets").read_text()
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["command"] == "tandem bench" and data["spark_design"] == "buckets"
    assert points_from(data)[1].plans[0].capacity == 1000
    assert "optimiser / pure-Spark 8.0x at 2,000 tuples/s" in report
    assert "A cause." in report and (out / "q1.png").stat().st_size > 0
    assert "## Targets" not in report  # no targets.toml beside the results


def test_the_report_checks_the_targets_beside_the_results(tmp_path):
    from benchmarking.report import write

    shutil.copy(ROOT / "bench" / "results" / "targets.toml", tmp_path)
    with open(tmp_path / "targets.toml", "a") as targets:
        targets.write('\n[[target]]\nfigure = "max_rate"\nqueries = ["q1"]\nat_least = 2000\n'
                      'says = "{query} keeps up with 2,000"\n')
    report = write([point(1000, 1500, 9000), point(2000, 1000, 8000)], tmp_path / "2026-01-01",
                   "tandem bench", "profile.toml", 3.0, "buckets").read_text()
    rows = report.split("## Targets")[1].split("\n\n")[1].splitlines()[2:]
    # The project's five targets that a Q1-only sweep has figures for, and the one added.
    assert len(rows) == 6 and rows[0].startswith("| Q1: optimiser's max rate ≥ 20x")
    assert rows[-1] == "| Q1 keeps up with 2,000 | 2,000 | yes |"
    assert rows[2] == "| Q1: optimiser's plan sustains ≥ 250,000 tuples/s (issue 15) | 2,000 | **no** |"


def test_a_sweep_keeps_the_peers_figures_and_its_report_shows_them(tmp_path):
    from benchmarking.report import write

    flink = {"q1": {"exact": {"q1": True, "q1-expert": True}, "max_rate": [15000.0, 16500.0],
                    "formulation": "q1-expert",
                    "tandem": {"tandem": [1.1e6, 1.2e6], "tandem-parquet": [1.5e6, None]},
                    "ratio": {"csv": 1.1e6 / 15000, "best": 1.5e6 / 15000}},
             "q5": {"exact": {"q5": True}, "max_rate": [1.26e6, None], "formulation": "q5",
                    "tandem": {}, "ratio": {"csv": None, "best": None}}}
    (tmp_path / "bench.json").write_text(json.dumps({"queries": {}, "peers": {"flink": flink}}))
    out = tmp_path / "2026-01-01"
    report = write([point(1000, 1500, 9000)], out, "tandem bench", "profile.toml", 3.0,
                   "buckets").read_text()
    assert json.loads((tmp_path / "bench.json").read_text())["peers"]["flink"] == flink
    assert ("| Q1 | 15,000 (16,500) (q1-expert) | 1,100,000 (1,200,000) | "
            "1,500,000 (none fell behind) | 73.3x | 100.0x |") in report
    assert "Q5" not in report  # not a query of this sweep


def test_bisection_narrows_each_roles_max_rate_to_within_ten_percent(monkeypatch):
    """The sweep over a doubling grid brackets each plan's capacity within 2x; bisection must
    bring pure-Spark, pure-DuckDB and the optimiser's plan within 10 % of it (here a fixed
    capacity per placement, so that the true maximum sustainable rate is known)."""
    import benchmarking.bench as bench
    from benchmarking.measure import Capacity

    def true_capacity(placement: dict) -> float:
        engines = set(placement.values())
        return 1_500.0 if engines == {"spark"} else 7_000.0 if engines == {"duckdb"} else 12_345.0

    def fake(plan, rate, **_):
        return Capacity(round(true_capacity(plan.optimization.plan.placement) * 10), 10.0, 10,
                        False)

    monkeypatch.setattr(bench, "capacity", fake)
    monkeypatch.setattr(bench, "warmup_stream", lambda rate, warmup: [])
    points = bench.sweep(["q5"], [1_000, 2_000], others=0, measure=1.0)
    for role in (SPARK, DUCKDB, CHOICE):
        [truth] = {true_capacity(m.placement) for p in points for m in p.plans
                   if role in m.roles}
        lo, hi = bench.bracket(points, role)
        assert lo == max_rate(points, role) and lo <= truth < hi <= 1.1 * lo, (role, lo, hi)
    assert any(p.probe for p in points) and accuracy(points) > 0
    assert summary(points_from(summary(points))) == summary(points)


def test_next_rate_brackets_a_peers_max_rate_within_ten_percent_in_few_runs():
    """A peer's runs are long, so its search steps to the capacity it measured. Whether the
    capacity stays flat with the rate (Flink's), falls with it from a fixed cost per micro-batch
    (Tandem's: rate / (0.4 s + rate / 500k)), or collapses past a limit (a job that fails), the
    search must stop with the true maximum rate between the largest rate kept up with and the
    smallest fallen behind at, within 10 % of each other, starting far from it."""
    from benchmarking.bench import next_rate

    systems = {"flat": lambda r: 1_450.0,
               "fixed cost": lambda r: r / (0.4 + r / 500_000),
               "collapses": lambda r: 0.0 if r > 170_000 else 183_000.0}
    truths = {"flat": 1_450.0, "fixed cost": 300_000.0, "collapses": 170_000.0}
    for name, system in systems.items():
        for start in (truths[name] / 7, truths[name] * 3):
            tried, rate = [], start
            while rate is not None:
                tried.append((rate, system(rate), system(rate) >= rate))
                rate = next_rate(tried)
            lo = max(r for r, _, kept in tried if kept)
            hi = min(r for r, _, kept in tried if not kept and r > lo)
            assert lo <= truths[name] < hi <= 1.1 * lo, (name, start, tried)
            assert len(tried) <= 8, (name, start, tried)


def _scaling():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "scaling.py"
    spec = importlib.util.spec_from_file_location("scaling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_scaling_stops_a_search_only_where_a_batch_costs_a_second_before_its_tuples():
    fixed_cost = _scaling().fixed_cost

    def steps(fixed: float, per_tuple: float, rates: list[float]):
        # seconds per 1-second batch = fixed + per_tuple * rate; capacity = rate / that
        return [(r, r / (fixed + per_tuple * r), fixed + per_tuple * r <= 1) for r in rates]

    assert abs(fixed_cost(steps(2.25, 0.015, [28, 14, 7, 3.5])) - 2.25) < 1e-6
    assert fixed_cost(steps(0.8, 8.5e-6, [40_000, 34_800, 31_600])) is None  # keeps up lower
    assert fixed_cost(steps(2.25, 0.015, [28, 14])) is None  # two steps fit no line
    kept_once = steps(2.25, 0.015, [28, 14, 7]) + [(3.5, 4.0, True)]
    assert fixed_cost(kept_once) is None
    # Behind at close rates, one step slowed by noise: no fixed cost can be told from that.
    assert fixed_cost([(83_000, 79_115, False), (75_500, 74_738, False),
                       (68_600, 53_574, False)]) is None


def test_the_flink_comparison_takes_the_best_formulation_and_both_ratios():
    import sys

    sys.path.insert(0, str(ROOT / "bench" / "peers"))
    import flink

    def steps(*found: tuple[float, bool]) -> list[dict]:
        return [{"rate": rate, "tuples_per_second": rate, "sustained": kept}
                for rate, kept in found]

    report = {name: flink.with_figures({"exactness": {"exact": True}} | entry) for name, entry in {
        "q1": {"flink": steps((800, False), (734, True))},
        "q1-expert": {"flink": [step | {"at": at} for step, at in zip(
            steps((15000, True), (16500, False)),
            ["2026-11-28T23:40:00+00:00", "2026-11-29T00:05:00+00:00"], strict=True)]},
        "q5": {"flink": steps((1.26e6, True)), "tandem": steps((3e6, True), (3.3e6, False)),
               "tandem-parquet": steps((4e6, True), (4.4e6, False))}}.items()}
    compared = flink.comparison(report)
    assert compared["q1"]["formulation"] == "q1-expert"
    assert compared["q1"]["max_rate"] == (15000, 16500)
    assert compared["q1"]["ratio"] == {"csv": None, "best": None}  # Tandem not measured
    assert compared["q5"]["max_rate"] == (1.26e6, None)
    assert compared["q5"]["ratio"] == pytest.approx({"csv": 3e6 / 1.26e6, "best": 4e6 / 1.26e6})
    # The day of a query's last step, over its formulations: steps without times give none.
    assert (compared["q1"]["measured"], compared["q5"]["measured"]) == ("2026-11-29", None)


def test_a_plan_that_runs_out_of_memory_fails_its_point_and_the_sweep_goes_on(monkeypatch,
                                                                            tmp_path):
    """Pure-Spark's window state outgrew the JVM's heap at 250k tuples/s (2026-11-28): the
    sweep records the error, carries it to the higher rates and measures the other plans."""
    import benchmarking.bench as bench
    from benchmarking.measure import Capacity
    from benchmarking.report import write
    from optimizer.errors import TandemError

    def fake(plan, rate, **_):
        if set(plan.optimization.plan.placement.values()) == {"spark"}:
            raise TandemError("the Spark query failed: StreamingQueryException: Java heap space"
                              " (details in /tmp/x/spark.log; `--resume` continues)")
        return Capacity(round(rate * 20), 10.0, 10, False)

    monkeypatch.setattr(bench, "capacity", fake)
    monkeypatch.setattr(bench, "warmup_stream", lambda rate, warmup: [])
    points = bench.sweep(["q5"], [1_000, 2_000], others=0, measure=1.0, extend=False,
                         precision=None)
    spark = [p.role(SPARK) for p in points]
    assert [m.failed for m in spark] == ["the Spark query failed: StreamingQueryException: "
                                         "Java heap space"] * 2
    assert [m.carried_from for m in spark] == [None, 1_000] and max_rate(points, SPARK) == 0
    assert max_rate(points, DUCKDB) == 2_000 and len(points) == 2
    report = write(points, tmp_path / "day", "tandem bench", "none", 1.0, "buckets",
                   latest=False).read_text()
    assert "| 1,000 | failed |" in report and "| 2,000 | (failed at 1,000) |" in report
    assert "Q5 at 1,000 tuples/s, pure-Spark: the Spark query failed" in report


def test_a_plan_that_hands_window_rows_to_spark_warms_up_in_batches_that_fit():
    """Q2 with its DB-ops on duckdb-partitioned hands each window_end's 5-minute window to
    Spark's executors: warmed up in the minute-long batches of the other plans, it killed
    Spark's JVM at 20,000 tuples/s (2026-11-29)."""
    from benchmarking.measure import HANDOVER_ROWS, WARMUP_SPAN, warmup_span
    from runtime.explain import explain

    window = 300  # seconds: Q2's windows
    for rate in (1_000, 20_000, 100_000):
        span = warmup_span(explain("q2", rate=rate, placement="duckdb-partitioned"), rate)
        assert span == 1 or span * rate * window <= HANDOVER_ROWS, (rate, span)
        assert span >= 1 and span == int(span)  # whole slides of 1 s
    assert warmup_span(explain("q2", rate=1_000, placement="duckdb-partitioned"), 1_000) > 1
    assert warmup_span(explain("q2", rate=20_000, placement="duckdb"), 20_000) == WARMUP_SPAN


def test_a_plan_the_model_expects_to_be_fast_is_measured_for_ten_wall_seconds(monkeypatch):
    """At 20k tuples/s, 20 one-second batches of a plan that keeps up 12 times over took 2-6 s
    and its capacity moved 3.6x between sweeps: the sweep measures a modelled plan for as many
    event seconds as it processes in MIN_WALL wall seconds at the predicted capacity (up to
    MEASURE_ROWS arrivals), and a plan the model does not price (pure-Spark's design) for the
    event seconds asked."""
    import benchmarking.bench as bench
    from benchmarking.measure import MEASURE_ROWS, MIN_WALL, Capacity

    asked = []

    def fake(plan, rate, *, measure, **_):
        asked.append((plan, rate, measure))
        return Capacity(round(rate * 2 * measure), measure / 2, 10, False)

    monkeypatch.setattr(bench, "capacity", fake)
    monkeypatch.setattr(bench, "warmup_stream", lambda rate, warmup: [])
    points = bench.sweep(["q5"], [2_000], others=1, measure=3.0, extend=False, precision=None)
    plans = points[0].plans
    assert len(asked) == len(plans) >= 3
    for m in plans:
        [measure] = [s for plan, rate, s in asked
                     if dict(plan.optimization.plan.placement) == m.placement]
        if m.predicted is None:
            assert SPARK in m.roles and measure == 3.0
        else:
            arrivals = measure * m.rate
            assert measure >= 3.0 and arrivals <= MEASURE_ROWS * (1 + 1e-9)
            assert arrivals / m.predicted >= MIN_WALL or arrivals == pytest.approx(MEASURE_ROWS)
    assert any(s > 3.0 for *_, s in asked)
