"""Search-space validation and sampling; promotion/stopping decisions; the trial contract."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tripwire._errors import ConfigError, TripwireError
from tripwire.tune import (Categorical, Continuous, FIFOScheduler, GridSearch, Hyperband, HyperbandPlan,
                           HyperbandScheduler, Integer, RandomSearch, ReportError, Space, Trial,
                           TrialDetachedError)
from tripwire.tune._scheduler import rank_decision
from tripwire.tune._strategy import strategy_from_dict


# ---- space ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Continuous(0, 1, scale="log"), r"Continuous low: got 0 with scale='log'; accepted: a low > 0"),
        (lambda: Continuous(1, 1), r"Continuous low, high: got low=1, high=1; accepted: low < high"),
        (lambda: Continuous(0.5, 1.0, scale="reverse_log"),
         r"got low=0.5, high=1 with scale='reverse_log'; accepted: 0 <= low < high < 1"),
        (lambda: Continuous(0, 1, scale="cubic"), r"Continuous scale: got 'cubic'; accepted: 'auto', 'linear', 'log'"),
        (lambda: Continuous("a", 1), r"Continuous low: got 'a' \(str\); accepted: a real number"),
        (lambda: Continuous(0, math.inf), r"Continuous high: got inf; accepted: a finite real number"),
        (lambda: Integer(5, 1), r"Integer low, high: got low=5, high=1; accepted: low <= high"),
        (lambda: Integer(1.5, 4), r"Integer low: got 1.5 \(float\); accepted: an integer"),
        (lambda: Integer(1, 4, scale="reverse_log"), r"only for Continuous ranges"),
        (lambda: Categorical([]), r"Categorical values: got \[\]; accepted: a non-empty list"),
        (lambda: Categorical(["a", "a"]), r"holds 'a' twice"),
        (lambda: Categorical([object]), r"Categorical values\[0\]: got .*; accepted: str, int, float, bool or None"),
    ],
)
def test_range_validation(make, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make()


def test_space_from_dict_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match=r"space\['eta'\]: Continuous low: got 0 with scale='log'; accepted: a "
                                          r"low > 0"):
        Space.from_dict({"eta": {"type": "continuous", "low": 0, "high": 1, "scale": "log"}})
    with pytest.raises(ConfigError, match=r"space\['d'\]: range type: got 'float'; accepted: integer"):
        Space.from_dict({"d": {"type": "float", "low": 0, "high": 1}})
    with pytest.raises(ConfigError, match=r"range type: got 'continous'; did you mean 'continuous'\?; accepted: "
                                          r"integer, continuous, categorical"):
        Space.from_dict({"d": {"type": "continous", "low": 0, "high": 1}})
    with pytest.raises(ConfigError, match=r"space\['lr'\]=0.1 is not a range"):
        Space({"lr": 0.1})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"space\['x'\]: a Continuous range needs GridSearch\(num_points=N\)"):
        Space({"x": Continuous(0, 1)}).grid()


def test_a_python_list_or_tuple_in_the_space_points_to_categorical() -> None:
    from tripwire.tune import Tuner

    with pytest.raises(ConfigError, match=r"^space\['opt'\]=\['sgd', 'adam'\] is a list, not a range: use "
                                          r"Categorical\(\['sgd', 'adam'\]\) for a choice \(in YAML"):
        Tuner(lambda p, t: 0.0, space={"opt": ["sgd", "adam"]}, max_jobs=1)  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"space\['lr'\]=\(0.001, 0.1\) is a tuple, not a range: use "
                                          r"Categorical\(\[0.001, 0.1\]\) for a choice, or Continuous\(0.001, 0.1\)"):
        Space.from_dict({"lr": (1e-3, 1e-1)})
    with pytest.raises(ConfigError, match=r"Integer\(1, 5\) / Continuous\(1, 5\) for a range"):
        Space.from_dict({"n": [1, 5]})
    with pytest.raises(ConfigError, match=r"space\['lr'\]=0.1 is not a range: use Integer, Continuous or Categorical"):
        Space.from_dict({"lr": 0.1})
    # a YAML mapping without its type keeps the YAML wording
    with pytest.raises(ConfigError, match=r"space\['x'\]: range \{'low': 1\} must be a mapping with a 'type' key"):
        Space.from_dict({"x": {"low": 1}})


def test_rule_stopped_on_the_trial() -> None:
    trial = Trial(3, {"x": 1}, 1, 9)
    trial.rule_stopped("oscillating_loss", "loss  oscillates\n  a lot")
    trial.rule_stopped("overfit", "later")                       # the first call counts
    assert trial.stopped_by_rule == ("oscillating_loss", "loss oscillates a lot") and not trial.should_stop
    with pytest.raises(ReportError, match=r"rule='' must be a non-empty rule name"):
        trial.rule_stopped("", "x")
    detached = pickle.loads(pickle.dumps(Trial(4, {}, channel=_Echo())))
    detached._channel = "detached"
    with pytest.raises(TrialDetachedError, match="call rule_stopped from that process only"):
        detached.rule_stopped("overfit", "x")


class _Echo:
    picklable = True

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        return False, "go on"


def test_space_round_trip_and_determinism() -> None:
    space = Space({"eta": Continuous(0.01, 1, scale="log"), "depth": Integer(1, 10), "m": Continuous(0.5, 0.999,
                   scale="reverse_log"), "booster": Categorical(["gbtree", "dart"])})
    assert Space.from_dict(space.to_dict()) == space
    a = [space.sample(7, n) for n in range(50)]
    assert a == [space.sample(7, n) for n in range(50)]
    assert a != [space.sample(8, n) for n in range(50)]
    for p in a:
        assert 0.01 <= p["eta"] <= 1 and 1 <= p["depth"] <= 10 and 0.5 <= p["m"] <= 0.999
        assert p["booster"] in ("gbtree", "dart") and isinstance(p["depth"], int)


def test_scales_place_mass_where_they_should() -> None:
    rng = np.random.default_rng(0)
    log = [Continuous(0.001, 1, scale="log").sample(rng) for _ in range(4000)]
    assert 0.2 < np.mean(np.array(log) < 0.01) < 0.47   # a third of the log range lies below 0.01
    assert Continuous(0.001, 1)._resolved == "log" and Continuous(0, 1)._resolved == "linear"
    # a ratio of 100 exactly is log, also where binary floats put it a hair below (trial 19c: 7 / 0.07)
    assert Continuous(0.07, 7)._resolved == "log" and Continuous(0.06, 6)._resolved == "log"
    assert Continuous(0.0701, 7)._resolved == "linear"
    rev = [Continuous(0.9, 0.999, scale="reverse_log").sample(rng) for _ in range(4000)]
    assert np.mean(np.array(rev) > 0.99) > 0.4         # half the reverse-log range lies above 0.99
    ints = [Integer(1, 1000, scale="log").sample(rng) for _ in range(4000)]
    assert np.mean(np.array(ints) <= 10) > 0.25 and min(ints) >= 1 and max(ints) <= 1000


def test_grid() -> None:
    space = Space({"a": Integer(1, 3), "b": Categorical(["x", "y"]), "c": Continuous(1, 100, scale="log")})
    grid = space.grid(num_points=3)
    assert len(grid) == 18 == space.grid_size(3)
    assert grid[0] == {"a": 1, "b": "x", "c": pytest.approx(1.0)}
    assert [g["c"] for g in grid[:3]] == pytest.approx([1.0, 10.0, 100.0])
    # log grids print as the user wrote them: bounds exact, inner points to 12 significant digits
    assert Continuous(0.001, 1, scale="log").grid(4) == [0.001, 0.01, 0.1, 1.0]
    assert Continuous(0.0, 1.0).grid(5) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_strategy_config_round_trip() -> None:
    for s in (Hyperband(1, 27, 3), RandomSearch(10), GridSearch(5, 4)):
        assert strategy_from_dict(s.to_dict()) == s
    with pytest.raises(ConfigError, match=r"strategy type='bohb' is not one of random, grid, hyperband"):
        strategy_from_dict({"type": "bohb"})
    with pytest.raises(ConfigError, match=r"max_resource=2 must be >= min_resource=3"):
        Hyperband(min_resource=3, max_resource=2)


# ---- decisions --------------------------------------------------------------------------------
def test_rank_rule_pure() -> None:
    assert rank_decision([0.5], 0.5, 3) == (True, 0, 1, 1)
    assert rank_decision([0.4, 0.5], 0.4, 3) == (False, 1, 2, 1)
    assert rank_decision([0.4, 0.5, 0.55, 0.58, 0.59, 0.6], 0.59, 3) == (True, 1, 6, 2)
    assert rank_decision([0.5, 0.5], 0.5, 3)[0] is True  # ties go to the newcomer


def _bracket0(s: HyperbandScheduler, count: int) -> list[int]:
    return [n for n in range(500) if s.bracket(n) == 0][:count]


def test_promotion_and_stopping_sequence_max() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "max", seed=0)
    t = _bracket0(s, 7)
    stops = [s.on_report(n, 1, v).stop for n, v in zip(t, [0.5, 0.4, 0.6, 0.55, 0.58, 0.59, 0.7])]
    # n=1 k=1; n=2 k=1 (0.4 < 0.5); 0.6 best; 0.55 has 1 better, k=1; 0.58 idem; n=6 k=2 -> 0.59 2nd; best
    assert stops == [False, True, False, True, True, False, False]
    d = s.on_report(t[1], 2, 0.9)
    assert d.stop is False and "rung" in d.reason  # step 2 of a stopped trial: no rung between 1 and 3
    dec = s.on_report(t[0], 3, 0.3)   # rung 3: first value there
    assert not dec.stop and dec.rung == 1
    assert s.on_report(t[0], 9, 0.3).reason == "reached max_resource=9"


def test_min_mode_and_nan() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "min", seed=3)
    t = _bracket0(s, 3)
    assert not s.on_report(t[0], 1, 0.5).stop
    assert s.on_report(t[1], 1, 0.6).stop
    d = s.on_report(t[2], 1, float("nan"))
    assert d.stop and "NaN" in d.reason


def test_step_jumping_over_rungs_records_each() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=0)
    n = _bracket0(s, 1)[0]
    d = s.on_report(n, 10, 0.7)   # passes rungs 1, 3, 9 at once
    assert not d.stop and s.rung_reached(n) == 3
    assert [(r[1], r[2]) for r in s.records()] == [(0, n), (1, n), (2, n)]


def test_full_budget_bracket_never_stops_early() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "max", seed=0)
    n = next(k for k in range(500) if s.bracket(k) == s.plan.s_max)
    assert all(not s.on_report(n, step, -step).stop for step in range(1, 9))
    assert s.on_report(n, 9, 0.0).stop


def test_state_dict_round_trip_and_forget() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=5)
    t = _bracket0(s, 6)
    for i, n in enumerate(t):
        s.on_report(n, 1, 0.1 * i)
    s.add_prior(3, 0.95)
    r = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=5)
    r.load_state_dict(s.state_dict())
    assert r.state_dict() == s.state_dict()
    new = _bracket0(s, 8)[7]
    assert s.on_report(new, 1, 0.25) == r.on_report(new, 1, 0.25)
    s.forget(t[5])
    assert t[5] not in [rec[2] for rec in s.records()]
    with pytest.raises(ConfigError, match=r"does not match"):
        HyperbandScheduler(HyperbandPlan(1, 81, 3), "max").load_state_dict(s.state_dict())
    f = FIFOScheduler(5)
    f.load_state_dict(f.state_dict())
    assert f.on_report(0, 4, 0.0).stop is False and f.on_report(0, 5, 0.0).stop is True


def _in_bracket(s: HyperbandScheduler, bracket: int, count: int) -> list[int]:
    return [n for n in range(2000) if s.bracket(n) == bracket][:count]


def test_rungs_are_shared_by_all_brackets() -> None:
    # levels 1, 3, 9 (max 27): bracket 0 decides at 1, 3, 9; bracket 1 at 3, 9; bracket 2 at 9
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=0)
    b0, b1 = _in_bracket(s, 0, 3), _in_bracket(s, 1, 2)
    for n, v in zip(b0, [0.9, 0.8, 0.7]):
        s.on_report(n, 1, v)
    assert not s.on_report(b0[0], 3, 0.9).stop            # first value at level 3: continues
    # a bracket-1 trial's first rung is level 3; there it meets bracket 0's value: n=2, k=1, 1 better
    d = s.on_report(b1[0], 3, 0.85)
    assert d.stop and d.rung == 0 and "has 1 better of 2" in d.reason
    # per bracket it would have been alone at its rung (and continued); the best value continues
    assert not s.on_report(b1[1], 3, 0.95).stop


def test_pass_through_values_are_references_without_decisions() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=0)
    late, b0 = _in_bracket(s, 2, 1)[0], _in_bracket(s, 0, 2)
    d = s.on_report(late, 1, -5.0)             # below its first rung (9): recorded, never judged
    assert not d.stop and d.rung is None and d.reason == "below the first rung"
    assert d.records == ((2, -2, -5.0),)       # rung index relative to the bracket: level 1 * 3**(2-2)
    assert not s.on_report(late, 3, -4.0).stop and s.rung_reached(late) == 0
    # bracket 0's first trial now meets the reference at level 1: n=2, k=1, nothing better: continues
    assert not s.on_report(b0[0], 1, -4.5).stop
    # and is judged at level 3 against it: -4.0 is better, n=2, k=1 -> stop
    assert s.on_report(b0[0], 3, -4.2).stop
    assert (2, -1, late, -4.0) in s.records() and (0, 1, b0[0], -4.2) in s.records()
    # a report jumping levels records one value per level, and decides at the bracket's own rung
    d = s.on_report(b0[1], 10, 1.0)
    assert [r[:2] for r in d.records] == [(0, 0), (0, 1), (0, 2)] and not d.stop


def test_fewer_than_eta_values_and_ties() -> None:
    # while n < eta, k = 1: only a value nothing recorded beats continues; ties continue
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "max", seed=0)
    t = _in_bracket(s, 0, 5)
    # 0.5: n=1, k=1, 0 better; 0.5: n=2, k=1, a tie is not better; 0.4: n=3, k=1, 2 better;
    # 0.5: n=4, k=1, 0 better (ties); 0.6: n=5, k=1, 0 better
    assert [s.on_report(n, 1, v).stop for n, v in zip(t, [0.5, 0.5, 0.4, 0.5, 0.6])] == \
        [False, False, True, False, False]
    # n=6 >= 2 * eta: k=2, the third best stops and the second best continues
    extra = _in_bracket(s, 0, 7)[5:]
    assert s.on_report(extra[0], 1, 0.45).stop          # 5 better of 6
    assert not s.on_report(extra[1], 1, 0.55).stop      # 1 better of 7 (0.6), k=2


def test_state_keeps_references_and_reads_version_1() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=1)
    late, b1 = _in_bracket(s, 2, 1)[0], _in_bracket(s, 1, 1)[0]
    s.on_report(late, 3, 0.4)                    # references at levels 1 and 3
    s.on_report(b1, 3, 0.3)                      # reference at 1, judged at 3 against 0.4: stops
    state = s.state_dict()
    assert state["version"] == 2 and [late, 2, -2] in [[r[2], r[0], r[1]] for r in state["records"]]
    r = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=1)
    r.load_state_dict(state)
    assert r.state_dict() == state and r.rung_reached(b1) == 1 and r.rung_reached(late) == 0
    # a version-1 state (rungs per bracket, progress counted in the trial's own rungs) loads; the
    # journaled bracket is kept even where today's assignment differs
    old = {"type": "hyperband", "plan": {"min_resource": 1, "max_resource": 27, "reduction_factor": 3},
           "mode": "max", "seed": 1, "records": [[1, 0, 1000, 0.7], [1, 1, 1000, 0.8]], "priors": {},
           "progress": {"1000": 2}}
    v1 = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=1)
    v1.load_state_dict(old)
    assert v1.bracket(1000) == 1 and v1.rung_reached(1000) == 2
    assert v1.records() == [(1, 0, 1000, 0.7), (1, 1, 1000, 0.8)]
    with pytest.raises(ConfigError, match=r"names no level"):
        v1.load_state_dict({**old, "records": [[0, 5, 1, 0.1]]})


def test_warm_start_priors_raise_the_bar() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 9, 3), "max", seed=0)
    for _ in range(6):
        s.add_prior(1, 0.9)
    n = _bracket0(s, 1)[0]
    assert s.on_report(n, 1, 0.5).stop  # without priors the first trial at a rung always continues


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 5), eta=st.integers(2, 4), k=st.integers(0, 4), seed=st.integers(0, 10**6),
       values=st.lists(st.floats(-1e6, 1e6) | st.just(math.nan), min_size=1, max_size=40))
def test_never_before_min_always_at_max(m: int, eta: int, k: int, seed: int, values: list[float]) -> None:
    big = m * eta**k + (seed % 3)
    s = HyperbandScheduler(HyperbandPlan(m, big, eta), "max", seed=seed)
    for n, v in enumerate(values):
        for step in range(1, big + 1):
            d = s.on_report(n, step, v)
            if step < m:
                assert not d.stop
            if step == big:
                assert d.stop
            if d.stop:
                break


# ---- trial contract ---------------------------------------------------------------------------
class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int, float]] = []

    def report(self, number: int, step: int, value: float) -> tuple[bool, str]:
        self.calls.append((number, step, value))
        return step >= 3, "stop at 3" if step >= 3 else "go"


def test_trial_report_validation() -> None:
    t = Trial(4, {"x": 1}, 1, 10, channel=_Recorder())
    assert t.report(1, 0.5) is False
    with pytest.raises(ReportError, match=r"trial 4: duplicate step=1 after step=1"):
        t.report(1, 0.6)
    t.report(2, np.float32(0.7))
    with pytest.raises(ReportError, match=r"decreasing step=1 after step=2"):
        t.report(1, 0.6)
    with pytest.raises(ReportError, match=r"step=0 must be >= 1"):
        Trial(0, {}).report(0, 1.0)
    with pytest.raises(ReportError, match=r"step=1.5 must be a positive int"):
        t.report(1.5, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ReportError, match=r"value='high' must be a real number"):
        t.report(5, "high")  # type: ignore[arg-type]
    assert isinstance(ReportError("x"), (TripwireError, ValueError))
    assert t.report(3, 0.9) is True and t.should_stop and t.stop_reason == "stop at 3"


def test_trial_without_scheduler_stops_at_max() -> None:
    t = Trial(0, {}, 1, 3)
    assert [t.report(s, 0.1) for s in (1, 2, 3)] == [False, False, True]


def test_trial_copies_share_the_channel_in_process_and_detach_elsewhere() -> None:
    rec = _Recorder()
    t = Trial(1, {"x": 2}, 1, 10, channel=rec)
    c = copy.deepcopy(t)
    c.report(1, 0.1)
    assert rec.calls == [(1, 1, 0.1)]
    raw = pickle.dumps(t)
    import os
    import tripwire.tune._trial as mod

    original = mod.os.getpid
    try:
        mod.os.getpid = lambda: original() + 1  # pretend to unpickle in another process
        foreign = pickle.loads(raw)
    finally:
        mod.os.getpid = original
    with pytest.raises(TrialDetachedError, match=r"report from the process that runs it only"):
        foreign.report(2, 0.2)
    assert os.getpid() == original()
