"""Calibration's fitting inverts the cost model: measurements made by a known profile give back
that profile's coefficients; its profile file loads as the optimiser reads profiles."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from benchmarking.calibrate import (
    BATCH_AGGREGATE_POINTS,
    BATCH_JOIN_POINTS,
    Fitted,
    _aggregate,
    _join_rows,
    _Model,
    _nnls,
    fit_error,
    fit_overlap,
    fit_two_regimes,
    write_profile,
)
from optimizer.profile import load_profile


def test_nnls_keeps_coefficients_non_negative():
    a = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    b = np.array([3.0, 2.0, 1.0])  # unconstrained: intercept 4, slope -1
    beta = _nnls(a, b)
    assert beta[1] == 0.0 and beta[0] == pytest.approx(2.0)


def test_fit_recovers_the_coefficients_that_made_the_measurements():
    model = _Model()
    truth = dict(model.values)
    truth[("spark", "holistic", "per_tuple")] = 3e-6
    truth[("spark", "holistic", "per_window_tuple")] = 4e-8
    truth[("spark", "holistic", "per_call")] = 0.05
    queries = [(_aggregate("MAX", size, "WHERE property = 1"), rate)
               for size, rate in ((10, 4000), (60, 4000), (10, 12000))]
    rows = [(model.utilization(sql, rate, "spark", truth),
             lambda v, sql=sql, rate=rate: model.utilization(sql, rate, "spark", v))
            for sql, rate in queries]
    for name in ("per_tuple", "per_window_tuple", "per_call"):
        model.values[("spark", "holistic", name)] = 0.0
    fitted = model.fit(("spark", "holistic"), ["per_tuple", "per_window_tuple", "per_call"], rows)
    for key, value in fitted.coefficients.items():
        assert value == pytest.approx(truth[key], rel=1e-6)
    assert fitted.error == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("function, points", [("batch_aggregate", BATCH_AGGREGATE_POINTS),
                                             ("batch_join", BATCH_JOIN_POINTS)])
def test_spark_s_batch_jobs_after_the_mig_are_told_apart_from_their_batches(function, points):
    # The plans calibrate measures give back both coefficients: the rows DuckDB hands Spark
    # vary apart from the batches.
    model = _Model()
    truth = dict(model.values)
    truth[("spark", function, "per_tuple")] = 3e-7
    truth[("spark", function, "per_call")] = 0.04
    rows = [(model.utilization(sql, rate, placement, truth),
             lambda v, sql=sql, rate=rate, placement=placement:
             model.utilization(sql, rate, placement, v))
            for sql, placement, _, rate in points]
    for name in ("per_tuple", "per_call"):
        model.values[("spark", function, name)] = 0.0
    fitted = model.fit(("spark", function), ["per_tuple", "per_call"], rows)
    for key, value in fitted.coefficients.items():
        assert value == pytest.approx(truth[key], rel=1e-6)


def test_one_batch_aggregation_point_hands_few_rows_a_batch():
    # Its fixed cost is measured where it weighs beside the rows: Q5's outer aggregate over the
    # plugs' sums, whose batch cost the per-row points left loose. (By reference a batch takes
    # four seconds, so the fixed cost is a third of that point's aggregation, and a thousandth
    # of the others'.)
    model = _Model()
    batch = ("spark", "batch_aggregate")
    base = {**model.values, (*batch, "per_tuple"): 0.0, (*batch, "per_call"): 0.0}
    shares = []
    for sql, placement, _, rate in BATCH_AGGREGATE_POINTS:
        def work(name, value, sql=sql, placement=placement, rate=rate):
            return (model.utilization(sql, rate, placement, {**base, (*batch, name): value})
                    - model.utilization(sql, rate, placement, base))
        # 10 ms a batch against 3 us a row, about what Spark costs here (after_mig.json)
        shares.append(work("per_call", 1e-2) / work("per_tuple", 3e-6))
    few_rows, *others = sorted(shares, reverse=True)
    assert few_rows > 0.2 and few_rows > 100 * max(others)


@pytest.mark.parametrize("engine", ["spark", "duckdb"])
def test_predictions_are_linear_in_the_coefficients(engine):
    """What the fit relies on: a prediction with coefficients a + b is the sum of the
    predictions with a and with b (Eq. 6.4-6.6 with the model's unit costs)."""
    model = _Model()
    rng = np.random.default_rng(7)
    a = {k: float(rng.uniform(0, 1e-6)) for k in model.keys}
    b = {k: float(rng.uniform(0, 1e-6)) for k in model.keys}
    both = {k: a[k] + b[k] for k in model.keys}
    sql = _join_rows(60)
    if engine == "spark":
        predict = lambda v: model.utilization(sql, 5000, "spark", v)  # noqa: E731
    else:
        predict = lambda v: model.db_evaluation(sql, 5000, v)  # noqa: E731
    assert predict(both) == pytest.approx(predict(a) + predict(b), rel=1e-9)
    assert predict(a) > 0


def test_the_move_out_keeps_its_fixed_cost_from_small_tables_and_its_row_cost_from_large():
    # Rows cost 4 us in small tables and 1.2 us in large ones (bench/results/after_mig.json's
    # kind): the fixed 0.13 s, and the large tables' 1.2 us.
    small = [(n, 0.13 + 4e-6 * n) for n in (1_000, 10_000, 50_000)]
    large = [(n, 0.13 + 1.2e-6 * n) for n in (1_000_000, 3_000_000)]
    assert fit_two_regimes(small, large) == pytest.approx((0.13, 1.2e-6))
    # Never below zero: a fixed cost under the small tables' noise, rows cheaper than nothing.
    assert fit_two_regimes([(1, 0.2), (2, 0.1)], [(10, 0.05)])[1] == 0.0
    assert fit_two_regimes([(1, 0.1), (2, 0.3)], large)[0] == 0.0


def test_fit_error_is_relative_to_the_mean_measurement():
    assert fit_error(np.array([1.0, 3.0]), np.array([2.0, 2.0])) == pytest.approx(0.5)


def test_overlap_fit_recovers_sigma_and_stays_within_0_and_1():
    sides = [(0.5, 0.4), (1.1, 0.9), (0.3, 0.05)]  # (larger, smaller)
    sigma, fitted = fit_overlap([(a + 0.3 * b, a, b) for a, b in sides])
    assert sigma == pytest.approx(0.3) and fitted.error == pytest.approx(0.0, abs=1e-12)
    assert fit_overlap([(a + 2 * b, a, b) for a, b in sides])[0] == 1.0  # worse than serial
    assert fit_overlap([(0.9 * a, a, b) for a, b in sides])[0] == 0.0  # better than the larger


def test_written_profile_loads_with_its_coefficients(tmp_path):
    model = _Model()
    model.values[("spark", "source", "per_call")] = 0.3
    profile = replace(model.profile(model.values, "calibrated here"), overlap=0.25,
                      overlap_reference=0.05)
    fits = {("spark", "source"): Fitted({("spark", "source", "per_call"): 0.3}, 0.12, 5)}
    write_profile(tmp_path / "p.toml", profile, fits)
    text = (tmp_path / "p.toml").read_text()
    loaded = load_profile(tmp_path / "p.toml")
    assert loaded.time_shared and loaded.coef("spark", "source", "per_call") == 0.3
    assert loaded.overlap == 0.25 and loaded.overlap_reference == 0.05
    assert "fit_error = 0.120" in text
    for engine, functions in profile.functions.items():
        for function, coefficients in functions.items():
            for name, value in coefficients.items():
                assert loaded.coef(engine, function, name) == pytest.approx(value, rel=1e-5)
