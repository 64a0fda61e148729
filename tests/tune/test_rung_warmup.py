"""``Hyperband(rung_warmup=...)``: ``"promote_best"`` (default, ``k = max(1, floor(n/eta))``) and
``"strict"`` (``k = floor(n/eta)``: a rung promotes nothing until it holds ``eta`` values);
decisions on hand-made values, state, validation, the strategy dict."""

from __future__ import annotations

from pathlib import Path

import pytest

from tripwire.tune import Hyperband, HyperbandPlan, HyperbandScheduler
from tripwire.tune._errors import ConfigError
from tripwire.tune._scheduler import rank_decision
from tripwire.tune._strategy import strategy_from_dict


def _sched(warmup: str, mode: str = "max") -> HyperbandScheduler:
    # levels 1, 3 (max 9): bracket 0 decides at 1 and 3
    return HyperbandScheduler(HyperbandPlan(1, 9, 3), mode, seed=0, rung_warmup=warmup)


def _bracket0(s: HyperbandScheduler, count: int) -> list[int]:
    return [n for n in range(500) if s.bracket(n) == 0][:count]


def test_validation_names_the_parameter_and_the_accepted_values() -> None:
    with pytest.raises(ConfigError, match=r"rung_warmup='lazy' is not one of 'promote_best', 'strict'"):
        _sched("lazy")
    with pytest.raises(ConfigError, match=r"rung_warmup='lazy'"):
        Hyperband(1, 27, 3, rung_warmup="lazy")
    with pytest.raises(ConfigError, match=r"rung_warmup=None is not one of"):
        strategy_from_dict({"type": "hyperband", "max_resource": 27, "rung_warmup": None})


def test_default_and_the_strategy_dict() -> None:
    hb = Hyperband(1, 27, 3)
    assert hb.rung_warmup == "promote_best" and hb.scheduler("max", 0).rung_warmup == "promote_best"
    # a journal written before the option existed has no key: it ran (and resumes with) "promote_best"
    assert "rung_warmup" not in hb.to_dict() and strategy_from_dict(hb.to_dict()) == hb
    st = Hyperband(1, 27, 3, rung_warmup="strict", rung_system="per_bracket")
    assert st.to_dict()["rung_warmup"] == "strict" and strategy_from_dict(st.to_dict()) == st
    assert "rung_warmup='strict'" in repr(st)
    sched = st.scheduler("min", 1)
    assert sched.rung_warmup == "strict" and sched.rung_system == "per_bracket"


def test_rank_rule_by_hand() -> None:
    # n = 1, 2: promote_best keeps the best (k = 1), strict keeps nothing (k = 0)
    assert rank_decision([0.5], 0.5, 3) == (True, 0, 1, 1)
    assert rank_decision([0.5], 0.5, 3, strict=True) == (False, 0, 1, 0)
    assert rank_decision([0.4, 0.5], 0.5, 3, strict=True) == (False, 0, 2, 0)
    # n = 3: both k = 1
    assert rank_decision([0.4, 0.5, 0.6], 0.6, 3, strict=True) == (True, 0, 3, 1)
    assert rank_decision([0.4, 0.5, 0.6], 0.5, 3, strict=True) == (False, 1, 3, 1)
    # n = 7, eta = 3: k = 2 in both; n = 3, eta = 4: strict k = 0
    assert rank_decision([1, 2, 3, 4, 5, 6, 7], 6, 3, strict=True) == (True, 1, 7, 2)
    assert rank_decision([1, 2, 3], 3, 4, strict=True) == (False, 0, 3, 0)
    assert rank_decision([0.5, 0.5, 0.5], 0.5, 3, strict=True)[0] is True   # ties favour the newcomer


def test_strict_sequence_against_promote_best() -> None:
    values = [0.5, 0.4, 0.6, 0.55, 0.58, 0.59, 0.7]
    old, new = _sched("promote_best"), _sched("strict")
    t = _bracket0(new, 7)
    assert t == _bracket0(old, 7)
    # promote_best: n=1 k=1 go; n=2 k=1 (0.4 < 0.5) stop; 0.6 best of 3 go; 0.55, 0.58 stop (k=1); n=6 k=2:
    # 0.59 has 1 better, go; 0.7 best, go
    assert [old.on_report(n, 1, v).stop for n, v in zip(t, values)] == [False, True, False, True, True, False, False]
    # strict: n=1, n=2: k=0, stop; then as above (k = floor(n/3) >= 1 from n=3)
    got = [new.on_report(n, 1, v) for n, v in zip(t, values)]
    assert [d.stop for d in got] == [True, True, False, True, True, False, False]
    assert "has 0 better of 1 (continue needs < 0 = 1//3)" in got[0].reason and got[0].rung == 0
    assert "has 7 better of 8 (continue needs < 2 = max(1, 8//3))" in old.on_report(_bracket0(old, 8)[7], 1, 0.1).reason


def test_strict_mode_min_and_the_second_rung() -> None:
    s = _sched("strict", "min")
    t = _bracket0(s, 4)
    assert [s.on_report(n, 1, v).stop for n, v in zip(t, [0.3, 0.2, 0.1, 0.4])] == [True, True, False, True]
    # t[2] alone at level 3: n=1, k=0 -> stopped; never stopped before min_resource, always at max_resource
    d = s.on_report(t[2], 3, 0.05)
    assert d.stop and d.rung == 1 and "has 0 better of 1" in d.reason


def test_state_round_trip_and_legacy_states() -> None:
    s = _sched("strict")
    t = _bracket0(s, 4)
    for n, v in zip(t, [0.5, 0.4, 0.6, 0.55]):
        s.on_report(n, 1, v)
    state = s.state_dict()
    assert state["rung_warmup"] == "strict"
    r = _sched("strict")
    r.load_state_dict(state)
    assert r.records() == s.records() and r.state_dict() == state
    with pytest.raises(ConfigError, match=r"state rung_warmup='strict' does not match rung_warmup='promote_best'"):
        _sched("promote_best").load_state_dict(state)
    # a state without the key (older journals, the Tuner's rebuild from the rungs table) loads into either
    legacy = {k: v for k, v in state.items() if k != "rung_warmup"}
    for warmup in ("promote_best", "strict"):
        x = _sched(warmup)
        x.load_state_dict(legacy)
        assert x.records() == s.records()


def test_real_tuner_run_and_resume_keep_the_rule(tmp_path: Path) -> None:
    import tune_trainables as tt   # importable by module name in the worker processes

    from tripwire.tune import Continuous, Tuner

    seed = next(s for s in range(100) if HyperbandPlan(1, 9, 3).bracket_of(s, 0) == 0)
    runs = {}
    for warmup in ("promote_best", "strict"):
        journal = tmp_path / f"{warmup}.db"
        runs[warmup] = Tuner(tt.train_curve, {"x": Continuous(0.0, 1.0)}, objective="objective",
                             strategy=Hyperband(1, 9, 3, rung_warmup=warmup), max_jobs=4, max_parallel_jobs=1,
                             seed=seed, journal=str(journal)).fit()
    # one worker: trial 0 (bracket 0) is alone at level 1; promote_best lets it go on, strict stops it there
    first = {w: r.trials[0] for w, r in runs.items()}
    assert first["promote_best"].resource > 1
    assert first["strict"].status == "stopped" and first["strict"].resource == 1
    assert "has 0 better of 1 (continue needs < 0 = 1//3)" in first["strict"].reason
    resumed = Tuner.resume(tmp_path / "strict.db", max_jobs=5)
    assert resumed.strategy.rung_warmup == "strict"
    assert [t.number for t in resumed.fit().trials] == list(range(5))
