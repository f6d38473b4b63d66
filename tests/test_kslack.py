"""The models that size a K-slack buffer (kslack/), held to simulations that share none of
their code: a SUM over windows thinned at random for Eq. (4.1), and a disordered stream whose
windows are built when its high-water mark less K passes their end for Eq. (3.4)–(4.2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kslack import coverage, manager
from kslack.adaptation import PdAdt, am_adt
from kslack.calibration import instant_recall
from kslack.delays import after_buffer, arrival_delays, coarse, coarse_micros, histogram
from kslack.manager import BufferManager, Policy, Recall, Requirement, joins_same_k, same_k
from kslack.measured import WindowCounts, measured, retrospect
from kslack.statistics import MOST_CHUNKS, StatisticsWindow
from rowstream.eventtime import watermark

RNG_SEED = 35


def test_delays_are_the_high_water_mark_less_the_timestamp_in_granules():
    # Ji's Example 3.2.1: timestamps 1, 4, 3, 5, 6, 8, 6 arrive in that order.
    delays = arrival_delays(np.array([1, 4, 3, 5, 6, 8, 6], dtype=float))
    assert delays.tolist() == [0, 0, 1, 0, 0, 0, 2]
    assert coarse(np.array([0.0, 0.004, 0.010, 0.0101, 0.05, 0.07])).tolist() == [
        0, 1, 1, 2, 5, 7]
    # Whole µs counted in integers give the same granules, up to delays of hours.
    edges = 10_000 * np.arange(1, 10**6, 997) + np.array([[-1], [0], [1]])
    micros = np.concatenate([np.arange(0, 200_001), np.arange(0, 10**10, 9_999_991),
                             edges.ravel()])
    assert (coarse_micros(micros) == coarse(micros / 1e6)).all()
    f = histogram(np.array([0.0, 0.0, 0.015, 0.03]))
    assert f.tolist() == [0.5, 0, 0.25, 0.25]
    # A buffer of two granules handles delays up to 20 ms; the 30-ms one is left 10 ms late.
    assert after_buffer(f, 2).tolist() == [0.75, 0.25]


def test_the_sum_threshold_meets_the_error_bound_with_the_stated_confidence():
    rng = np.random.default_rng(RNG_SEED)
    values = rng.gamma(2.0, 1.0, 400)  # one window's values
    total, max_error, delta = values.sum(), 0.05, 0.05
    threshold = coverage.sum_threshold(max_error, values.size, values.mean(), values.var(),
                                       delta)

    def exceeding(cvrg: float) -> float:
        """The share of 20,000 windows that hold each value with probability ``cvrg`` whose
        SUM is off by more than ``max_error``."""
        kept = rng.random((20_000, values.size)) < cvrg
        return float(np.mean(np.abs(total - kept @ values) / total > max_error))

    # The error is one-sided (a missing tuple only lowers a SUM of positive values), so at the
    # threshold the normal approximation puts δ/2 of the windows beyond it (3.4 % here, at
    # δ = 5 %: 400 skewed values are not quite normal), and never more than δ.
    assert 0.5 * delta / 2 < exceeding(threshold) <= delta
    assert exceeding(threshold - 0.02) > delta  # the least coverage: a little less fails
    assert coverage.sum_threshold(1.0, 400, 2.0, 2.0) == 0.0
    assert coverage.sum_threshold(0.05, 400, 0.0, 2.0) == 1.0
    # Eq. (4.1) holds at the threshold and fails just below it, for windows few and many.
    c = coverage.critical_value(delta)
    for tuples, error in [(3, 0.5), (400, 0.05), (400, 0.0001), (1e6, 0.01), (1e9, 0.001)]:
        spread = (values.var() + values.mean() ** 2) / (tuples * values.mean() ** 2)

        def bound(cvrg: float, spread: float = spread) -> float:
            return (1 - cvrg) + c * np.sqrt((cvrg - cvrg * cvrg) * spread)

        found = coverage.sum_threshold(error, tuples, values.mean(), values.var(), delta)
        assert bound(found) <= error * (1 + 1e-9) and bound(found - 1e-7 * (1 - found)) > error


def disordered(rate: float, seconds: float, late_share: float, mean_delay: float):
    """Timestamps in arrival order: ``rate`` tuples a second, a ``late_share`` of them
    arriving an exponential delay of ``mean_delay`` seconds after their time."""
    rng = np.random.default_rng(RNG_SEED)
    ts = np.sort(rng.uniform(0, seconds, int(rate * seconds)))
    late = rng.random(ts.size) < late_share
    arrival = ts + np.where(late, rng.exponential(mean_delay, ts.size), 0.0)
    return ts[np.argsort(arrival, kind="stable")]


def simulated_coverage(ts: np.ndarray, k: float, window: float, slide: float) -> float:
    """The mean coverage of the windows ending every ``slide`` seconds, each built when the
    high-water mark passes its end plus ``k`` (Eq. 3.1): a tuple is in it if it arrived before."""
    before = np.concatenate([[-np.inf], np.maximum.accumulate(ts)[:-1]])
    ends = np.arange(2 * window, ts.max() - 2 * window, slide)
    found = []
    for end in ends:
        inside = (ts > end - window) & (ts <= end)
        found.append(np.count_nonzero(inside & (before < end + k)) / np.count_nonzero(inside))
    return float(np.mean(found))


STREAM = dict(rate=2_000, seconds=40.0, late_share=0.3, mean_delay=0.05)


@pytest.mark.parametrize("k", [0.0, 0.02, 0.05, 0.1])
def test_the_expected_coverage_is_what_a_buffer_of_k_lets_into_the_windows(k):
    ts = disordered(**STREAM)
    f = histogram(arrival_delays(ts))
    model = coverage.expected(after_buffer(f, round(k / 0.010)), window=1.0)
    measured = simulated_coverage(ts, k, window=1.0, slide=0.1)
    # Eq. (3.5) counts a basic window's tuples delayed by at most the time since its end, so
    # it errs low, by at most the tuples delayed within one basic window more.
    assert model <= measured + 1e-3
    assert measured - model < 0.003


def test_am_adt_finds_the_least_k_whose_windows_meet_the_threshold():
    ts = disordered(**STREAM)
    delays = arrival_delays(ts)
    f, threshold = histogram(delays), 0.999

    def over_a_second(f_k):
        return coverage.expected(f_k, 1.0)

    kappa = am_adt(f, threshold, delays.max(), over_a_second)
    slots = round(kappa / 0.010)
    assert coverage.expected(after_buffer(f, slots), 1.0) >= threshold
    assert coverage.expected(after_buffer(f, slots - 1), 1.0) < threshold
    assert simulated_coverage(ts, kappa, window=1.0, slide=0.1) >= threshold
    assert kappa < delays.max() / 2  # far less than waiting for the latest tuple
    # A threshold no buffer reaches: K stops one granule past the largest delay seen.
    assert am_adt(f, 1.1, 0.2, over_a_second) == pytest.approx(0.21)
    # Where a late tuple misses every window, κ is the threshold's quantile of the delays.
    kappa = am_adt(f, 0.95, delays.max(), coverage.admitted)
    assert np.mean(delays <= kappa) >= 0.95 > np.mean(delays <= kappa - 0.010)


def test_pd_adt_moves_k_towards_the_threshold_from_both_sides():
    ts = disordered(**STREAM)
    max_delay, threshold = arrival_delays(ts).max(), 0.999

    def run(controller: PdAdt, k: float, intervals: int) -> list[tuple[float, float]]:
        steps = []
        for _ in range(intervals):
            measured = simulated_coverage(ts, k, 1.0, 0.1)
            steps.append((k, measured))
            k = controller.size(threshold, measured, max_delay)
            assert 0 <= k <= max_delay
        return steps

    # Below the threshold K grows, and with it the coverage. With Table 4.2's gains it grows
    # slowly here (0.03 s after 40 windows, where AM-adt's κ meets the threshold at once): the
    # errors are thousandths of coverage.
    rising = run(PdAdt(), 0.0, 40)
    assert all(b[0] > a[0] and b[1] >= a[1] for a, b in zip(rising, rising[1:], strict=False))
    # Above it, from a buffer as long as the largest delay, K shrinks.
    falling = run(PdAdt(alpha=1.0), max_delay, 20)
    assert falling[-1][0] < falling[1][0] <= max_delay


def test_the_counts_of_received_and_missing_tuples_give_each_windows_coverage():
    # Alg. 4.3's map, counted batch by batch as the tuples arrive, where a late tuple misses
    # every window it belongs to (Tandem quarantines it), against each window's tuples
    # counted directly: those not late over those it holds.
    ts, window, slide = disordered(**STREAM), 1.0, 0.1
    micros = np.round(ts * 1e6).astype(np.int64)
    late = np.random.default_rng(RNG_SEED).random(ts.size) < 0.1
    counts = WindowCounts(window, slide)
    for batch in np.array_split(np.arange(ts.size), 37):  # uneven batches
        counts.add(micros[batch], late[batch])
    for j in range(20, 380, 7):
        end = j * slide
        inside = (micros >= round((end - window) * 1e6)) & (micros < round(end * 1e6))
        want = np.count_nonzero(inside & ~late) / np.count_nonzero(inside)
        assert counts.coverage(end) == pytest.approx(want, abs=1e-12)
    # A tuple at a window's end belongs to the windows after it (docs/design.md, Semantics).
    edge = WindowCounts(window, slide)
    edge.add(np.array([5_000_000]), np.array([True]))
    assert edge.coverage(5.0) is None and edge.coverage(5.1) == 0.0
    assert edge.coverage(6.0) == 0.0 and edge.coverage(6.1) is None
    assert counts.coverage(-3.0) is None
    counts.purge(10.0)
    assert counts.first == 100 and counts.coverage(9.9) is None
    assert counts.coverage(10.0) is not None


def test_alg_4_3_reads_the_window_as_old_as_the_q_quantile_of_the_delays():
    counts = WindowCounts(window=1.0, slide=0.5)
    # Tuples at 0.2 and 0.7 arrive in time; one at 0.3 comes late and misses its windows,
    # those ending at 0.5 and 1.0.
    counts.add(np.array([200_000, 700_000, 300_000]), np.array([False, False, True]))
    lookback = retrospect(np.bincount(coarse(np.array([0.1, 0.2, 0.3, 0.4, 1.0]))), q=0.5)
    assert lookback == pytest.approx(0.3)
    # At a high-water mark of 1.35, the window to read ends at or before 1.05: the one at 1.0.
    assert measured(counts, 1.35, lookback) == pytest.approx(2 / 3)
    assert measured(counts, 0.85, lookback) == pytest.approx(0.5)  # the one at 0.5: 1 of 2
    assert measured(counts, 1.85, lookback) == 1.0  # the one at 1.5 holds 0.7 alone
    assert retrospect(np.zeros(3)) == 0.0


def delay_chunks(rng, chunks: int, mean_delay: float, size: int = 1_000) -> list[np.ndarray]:
    """Chunks of delays: 30 % of the tuples late by an exponential delay of that mean."""
    return [np.where(rng.random(size) < 0.3, rng.exponential(mean_delay, size), 0.0)
            for _ in range(chunks)]


def test_adwin_keeps_a_steady_streams_delays_and_drops_them_when_they_change():
    rng = np.random.default_rng(RNG_SEED)
    steady = StatisticsWindow()
    kept = delay_chunks(rng, 200, 0.05)
    assert sum(steady.add(d) for d in kept) == 0  # no change, no cut
    assert steady.histogram() == pytest.approx(histogram(np.concatenate(kept)))
    assert steady.max_delay() == max(d.max() for d in kept)
    # The delays quadruple after 100 chunks: the window comes to hold the new ones only.
    changing = StatisticsWindow()
    for d in delay_chunks(rng, 100, 0.05):
        changing.add(d)
    after = delay_chunks(rng, 50, 0.2)
    dropped = [changing.add(d) for d in after]
    # Every older chunk goes at once, within twenty of the new ones (its observations are the
    # units' mean delays: it waits for units, not tuples, to be sure), and no new one goes.
    assert sum(dropped[:20]) == 100 and sum(dropped) == 100 and max(dropped) == 100
    assert len(changing.chunks) == 50
    newer = histogram(np.concatenate(after[-len(changing.chunks):]))
    assert changing.histogram() == pytest.approx(newer)


def test_adwin_merges_its_oldest_chunks_beyond_its_bound():
    rng = np.random.default_rng(RNG_SEED)
    window = StatisticsWindow()
    for d in delay_chunks(rng, MOST_CHUNKS + 88, 0.05, size=100):
        window.add(d)
    assert len(window.chunks) == MOST_CHUNKS and window.tuples == (MOST_CHUNKS + 88) * 100


def judged_in_units(ts: np.ndarray, values: np.ndarray, policy: Policy, unit: int = 200,
                    resume_every: int | None = None):
    """A stream (``ts`` in arrival order, µs) landed in units of ``unit`` tuples, each judged
    against the watermark of the units before it, as the by-reference gateway judges files; the
    manager's state goes through JSON every ``resume_every`` units, as a resumed run reads it.
    Returns which tuples came late, and the decisions."""
    manager, late, decisions = BufferManager(policy), np.zeros(ts.size, bool), []
    for number, start in enumerate(range(0, ts.size, unit)):
        part = slice(start, start + unit)
        mark = manager.mark
        late[part] = False if mark is None else ts[part] <= mark
        decisions.append(manager.observe(ts[part], late[part], values[part]))
        if resume_every and number % resume_every == 0:
            manager = BufferManager.from_json(policy, json.loads(json.dumps(manager.to_json())))
    return late, decisions


def window_sums(ts: np.ndarray, values: np.ndarray, window: float, slide: float,
                ends: np.ndarray) -> np.ndarray:
    seconds = ts / 1e6
    return np.array([values[(seconds >= e - window) & (seconds < e)].sum() for e in ends])


REQUIRED = dict(window=1.0, slide=0.1, lateness=5.0)


def test_the_fixed_policy_is_todays_watermark():
    ts = np.round(disordered(**STREAM) * 1e6).astype(np.int64)
    late, decisions = judged_in_units(ts, np.ones(ts.size), Policy("fixed", **REQUIRED))
    for d in decisions:
        assert d.k == 5.0 and d.watermark == watermark(d.high_water, 5.0)


def test_the_baselines_wait_for_nothing_and_for_the_largest_delay_so_far():
    ts = np.round(disordered(**STREAM) * 1e6).astype(np.int64)
    late, decisions = judged_in_units(ts, np.ones(ts.size), Policy("none", **REQUIRED))
    # K = 0: a tuple at or before the high-water mark (in whole ms) of the units before is late.
    before = np.repeat(np.maximum.accumulate(ts.reshape(-1, 200).max(axis=1)), 200)
    before = np.concatenate([np.full(200, -1), before[:-200] // 1000 * 1000])
    assert {d.k for d in decisions} == {0.0} and (late == (ts <= before)).all()
    assert late.mean() > 0.1
    late, decisions = judged_in_units(ts, np.ones(ts.size), Policy("max", **REQUIRED))
    so_far = np.maximum.accumulate([arrival_delays(ts[:(d.unit + 1) * 200] / 1e6).max()
                                    for d in decisions])
    assert [d.k for d in decisions] == pytest.approx(so_far)
    assert late.mean() < 0.002  # only delays longer than any before come late


@pytest.mark.parametrize("method, least_phi", [("am", 0.95), ("pd", 0.85)])
def test_the_adaptive_policies_meet_the_error_bound_at_a_fraction_of_max_k_slack(method,
                                                                                 least_phi):
    # Ji's measure, Eq. (4.10): the share of window SUMs within ε_thr of the exact ones. AM-adt
    # sizes K for every window; PD-adt steers the coverage measured to the threshold, so
    # windows fall on both sides of it (Ji's Fig. 4.11 shows it below AM-adt too).
    rng = np.random.default_rng(RNG_SEED)
    ts = np.round(disordered(**STREAM) * 1e6).astype(np.int64)
    values = rng.gamma(2.0, 1.0, ts.size)
    requirement = Requirement(max_error=0.02, confidence=0.95)
    late, decisions = judged_in_units(ts, values, Policy(method, requirement, **REQUIRED),
                                      resume_every=7)
    ends = np.arange(12.0, 38.0, 0.1)  # after the warm-up, before the stream runs out
    exact = window_sums(ts, values, 1.0, 0.1, ends)
    found = window_sums(ts[~late], values[~late], 1.0, 0.1, ends)
    phi = np.mean(np.abs(exact - found) / exact <= requirement.max_error)
    assert phi >= least_phi
    adapted = [d for d in decisions if d.threshold is not None]
    if method == "pd":
        measured = [d.measured for d in adapted if d.measured is not None]
        assert abs(np.mean(measured) - adapted[-1].threshold) < 0.005
    k = np.mean([d.k for d in adapted])
    assert k < 0.5 * np.mean(np.maximum.accumulate(arrival_delays(ts / 1e6)))


def test_a_resumed_manager_decides_as_one_that_never_stopped():
    ts = np.round(disordered(**STREAM) * 1e6).astype(np.int64)
    values = np.random.default_rng(RNG_SEED).gamma(2.0, 1.0, ts.size)
    for method in ("am", "pd"):
        policy = Policy(method, Requirement(0.01), **REQUIRED)
        whole = judged_in_units(ts, values, policy)
        resumed = judged_in_units(ts, values, policy, resume_every=5)
        assert (whole[0] == resumed[0]).all()
        assert [(d.k, d.watermark) for d in whole[1]] == [(d.k, d.watermark) for d in resumed[1]]


def test_same_k_is_the_least_k_whose_streams_admitted_shares_meet_the_recall():
    """Ji's Same-K (Sec. 4.2.3) with AM-adt: one K for a join's streams, the least whose
    product of the streams' admitted shares meets Γ; below Γ^{1/2} for each stream where the
    other's share is more."""
    streams = [np.round(disordered(**STREAM) * 1e6).astype(np.int64),
               np.round(disordered(rate=500, seconds=40.0, late_share=0.5, mean_delay=0.2)
                        * 1e6).astype(np.int64)]
    policy = Policy("am", Recall(0.95), **REQUIRED)
    managers = []
    for ts in streams:
        manager = BufferManager(policy, joint=True)
        manager.observe(ts, np.zeros(ts.size, bool))
        managers.append(manager)
    k, _, _ = same_k(managers)
    delays = [arrival_delays(ts / 1e6) for ts in streams]

    def recall(k: float) -> float:
        return float(np.prod([np.mean(coarse(d) <= round(k / 0.010)) for d in delays]))

    assert recall(k) >= 0.95 > recall(k - 0.010)
    own = max(am_adt(histogram(d), 0.95 ** 0.5, d.max(), coverage.admitted) for d in delays)
    assert k < own  # one K waits less than each stream sized for Γ^{1/2}
    assert joins_same_k([policy, policy]) and not joins_same_k([policy, None])


def joined_in_units(streams: list[np.ndarray], policy: Policy, unit: int = 200,
                    resume_every: int | None = None):
    """Streams (``ts`` in arrival order, µs) landed in units of ``unit`` tuples and judged in
    the order Same-K judges them, the stream furthest behind first, each unit against its
    buffer's watermark, K after each the join's (``same_k``); the managers' state goes through
    JSON every ``resume_every`` units. Returns each stream's late tuples, K and Γ' per unit."""
    managers = [BufferManager(policy, joint=True) for _ in streams]
    late = [np.zeros(ts.size, bool) for ts in streams]
    taken, ks, targets = [0] * len(streams), [], []
    while any(taken[i] < ts.size for i, ts in enumerate(streams)):
        i = min((s for s, ts in enumerate(streams) if taken[s] < ts.size),
                key=lambda s: (managers[s].high_water is not None, managers[s].high_water or 0))
        part = slice(taken[i], taken[i] + unit)
        taken[i] += unit
        mark = managers[i].mark
        late[i][part] = False if mark is None else streams[i][part] <= mark
        managers[i].observe(streams[i][part], late[i][part])
        k, target, _ = same_k(managers)
        for m in managers:
            m.impose(k)
        ks.append(k)
        targets.append(target)
        if resume_every and len(ks) % resume_every == 0:
            managers = [BufferManager.from_json(policy, json.loads(json.dumps(m.to_json())))
                        for m in managers]
            for m in managers:
                m.joint = True
    return late, np.array(ks), targets


def test_same_k_makes_up_the_last_periods_recall(monkeypatch):
    """Eq. (4.9): the buffers reach for 2Γ − γ(P_meas), the recall that makes up what the last
    measurement period produced over or under Γ (``kslack.calibration``). Held to a join
    simulated apart: each window's results the product of its streams' tuples (EqSel's cross
    join), γ(P_meas) read every slide over the last 60 windows (Ji's P_meas / L_adt)."""
    assert instant_recall(0.95, 97, 100) == pytest.approx(0.93)  # a surplus of 2 points
    assert instant_recall(0.95, 85, 100) == 1.0 and instant_recall(0.95, 0, 0) == 0.95
    # Where the next period's true results are as many, the two periods meet Γ exactly.
    assert (97 + 100 * instant_recall(0.95, 97, 100)) / 200 == pytest.approx(0.95)
    streams = [np.round(disordered(**STREAM) * 1e6).astype(np.int64),
               np.round(disordered(rate=500, seconds=40.0, late_share=0.5, mean_delay=0.2)
                        * 1e6).astype(np.int64)]
    policy = Policy("am", Recall(0.95, period=6.0), **REQUIRED)
    late, ks, targets = joined_in_units(streams, policy)
    _, resumed, _ = joined_in_units(streams, policy, resume_every=7)
    assert (ks == resumed).all()
    ends = np.arange(1.0, 40.0, REQUIRED["slide"])

    def per_window(ts: np.ndarray) -> np.ndarray:
        seconds = ts / 1e6
        return np.array([((seconds >= e - REQUIRED["window"]) & (seconds < e)).sum()
                         for e in ends])

    true = per_window(streams[0]) * per_window(streams[1])
    produced = per_window(streams[0][~late[0]]) * per_window(streams[1][~late[1]])
    periods = [slice(j - 59, j + 1) for j in range(159, ends.size)]  # from the 16th second
    recall = np.array([produced[p].sum() / true[p].sum() for p in periods])
    assert np.mean(recall >= 0.95) >= 0.97  # Φ(Γ), Eq. (4.11)
    assert min(t for t in targets if t is not None) < 0.95  # it spent a surplus
    monkeypatch.setattr(manager, "instant_recall", lambda requirement, *_: requirement)
    _, uncalibrated, _ = joined_in_units(streams, policy)
    assert ks[ks.size // 3:].mean() < 0.95 * uncalibrated[ks.size // 3:].mean()


def test_am_adt_sizes_each_join_input_for_its_share_of_the_recall():
    """A join of two disordered streams' windows, each stream sized for Γ^{1/2} apart
    (``Recall``): a pair is produced iff both its tuples were admitted, so each window's
    recall is the product of its two admitted shares (every pair joins: Ji's cross join)."""
    requirement = Recall(0.95, inputs=2)
    assert requirement.share == pytest.approx(0.95 ** 0.5)
    streams = [np.round(disordered(**STREAM) * 1e6).astype(np.int64),
               np.round(disordered(rate=500, seconds=40.0, late_share=0.5, mean_delay=0.2)
                        * 1e6).astype(np.int64)]
    ends = np.arange(12.0, 38.0, 0.1)
    shares, ks = [], []
    for ts in streams:
        late, decisions = judged_in_units(ts, np.ones(ts.size),
                                          Policy("am", requirement, **REQUIRED), resume_every=7)
        shares.append(window_sums(ts[~late], np.ones((~late).sum()), 1.0, 0.1, ends)
                      / window_sums(ts, np.ones(ts.size), 1.0, 0.1, ends))
        adapted = [d.k for d in decisions if d.threshold is not None]
        assert {d.threshold for d in decisions if d.threshold is not None} == {
            requirement.share}
        assert np.mean(adapted) < 0.5 * np.mean(np.maximum.accumulate(arrival_delays(ts / 1e6)))
        ks.append(np.mean(adapted))
    recall = shares[0] * shares[1]
    # Ji's Φ(.99Γ), Eq. (4.11), over the windows, and the recall of the run as a whole.
    assert np.mean(recall >= 0.99 * requirement.min_recall) >= 0.95
    assert recall.mean() >= requirement.min_recall
    assert ks[1] > ks[0]  # the later stream waits longer
