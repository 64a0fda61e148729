"""``HyperbandScheduler(rung_system=...)``: ``"shared"`` (default) and ``"per_bracket"``: promotion and
stopping decisions on hand-made values, state, validation, journal compatibility."""

from __future__ import annotations

import pytest

from tripwire.tune import Hyperband, HyperbandPlan, HyperbandScheduler
from tripwire.tune._errors import ConfigError
from tripwire.tune._strategy import strategy_from_dict


def _sched(rung_system: str, seed: int = 0) -> HyperbandScheduler:
    # levels 1, 3, 9 (max 27): bracket 0 decides at 1, 3, 9; bracket 1 at 3, 9; bracket 2 at 9
    return HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=seed, rung_system=rung_system)


def _in_bracket(s: HyperbandScheduler, bracket: int, count: int) -> list[int]:
    return [n for n in range(2000) if s.bracket(n) == bracket][:count]


def test_validation_names_the_parameter_and_the_accepted_values() -> None:
    with pytest.raises(ConfigError, match=r"rung_system='pooled' is not one of 'per_bracket', 'shared'"):
        _sched("pooled")
    with pytest.raises(ConfigError, match=r"rung_system='pooled'"):
        Hyperband(1, 27, 3, rung_system="pooled")
    with pytest.raises(ConfigError, match=r"rung_system=3 is not one of"):
        strategy_from_dict({"type": "hyperband", "max_resource": 27, "rung_system": 3})


def test_unknown_yaml_keys_of_a_strategy_or_range_get_a_suggestion_and_the_accepted_keys() -> None:
    from tripwire.tune import Space

    with pytest.raises(ConfigError, match=r"strategy \(hyperband\)\.reduction_factr: unknown key 'reduction_factr'; "
                                          r"did you mean 'reduction_factor'\? \(accepted keys: max_resource, .*\)"):
        strategy_from_dict({"type": "hyperband", "max_resource": 27, "reduction_factr": 3})
    with pytest.raises(ConfigError, match=r"strategy=\{'name': 'random'\} has no 'type' key \(one of random, grid, "
                                          r"hyperband\): 'name' is no strategy key, say type: 'random'"):
        strategy_from_dict({"name": "random"})
    with pytest.raises(ConfigError, match=r"space\['c'\]: categorical range\.value: unknown key 'value'; "
                                          r"did you mean 'values'\? \(accepted keys: values\)"):
        Space.from_dict({"c": {"type": "categorical", "value": [1, 2]}})


def test_default_and_the_strategy_dict() -> None:
    hb = Hyperband(1, 27, 3)
    assert hb.rung_system == "shared" and hb.scheduler("max", 0).rung_system == "shared"
    # a journal written before the option existed has no key: it ran (and resumes with) "shared"
    assert "rung_system" not in hb.to_dict() and strategy_from_dict(hb.to_dict()) == hb
    pb = Hyperband(1, 27, 3, rung_system="per_bracket")
    assert pb.to_dict()["rung_system"] == "per_bracket" and strategy_from_dict(pb.to_dict()) == pb
    assert "rung_system='per_bracket'" in repr(pb) and pb.scheduler("min", 1).rung_system == "per_bracket"


def test_per_bracket_compares_only_within_the_bracket() -> None:
    s = _sched("per_bracket")
    b0, b1, late = _in_bracket(s, 0, 3), _in_bracket(s, 1, 2), _in_bracket(s, 2, 1)[0]
    for n, v in zip(b0, [0.9, 0.8, 0.7]):
        s.on_report(n, 1, v)
    assert not s.on_report(b0[0], 3, 0.9).stop
    # alone at its bracket's rung 3 (bracket 0's 0.9 is not compared): n=1, continues
    d = s.on_report(b1[0], 3, 0.85)
    assert not d.stop and d.rung == 0 and d.records == ((1, 0, 0.85),)
    # n=2 in bracket 1: k=1 and 0.85 is better -> stop
    d = s.on_report(b1[1], 3, 0.5)
    assert d.stop and d.rung == 0 and "has 1 better of 2" in d.reason
    # below its first rung a trial records nothing: no references in this rung system
    d = s.on_report(late, 3, -1.0)
    assert not d.stop and d.records == () and d.reason == "below the first rung" and s.rung_reached(late) == 0
    assert all(r[2] != late for r in s.records())
    # the same values in the shared system: bracket 1's trial meets bracket 0's survivor and stops
    sh = _sched("shared")
    for n, v in zip(b0, [0.9, 0.8, 0.7]):
        sh.on_report(n, 1, v)
    sh.on_report(b0[0], 3, 0.9)
    assert sh.on_report(b1[0], 3, 0.85).stop


def test_per_bracket_survivors_do_not_judge_other_brackets() -> None:
    # bracket 0's survivors at level 3 were selected at level 1; per bracket they judge only each
    # other, so a bracket-1 trial at its first rung meets bracket 1's own values only
    s = _sched("per_bracket")
    b0, b1 = _in_bracket(s, 0, 6), _in_bracket(s, 1, 3)
    for n, v in zip(b0, [0.6, 0.7, 0.8, 0.9, 0.95, 0.97]):
        assert not s.on_report(n, 1, v).stop          # each is the best so far at level 1
    for n, v in zip(b0, [0.6, 0.7, 0.8]):
        s.on_report(n, 3, v)
    # bracket 1: 0.5 first (continues), 0.55 best of 2 (continues), 0.52 has 1 better of 3, k=1: stop
    assert [s.on_report(n, 3, v).stop for n, v in zip(b1, [0.5, 0.55, 0.52])] == [False, False, True]
    # bracket 0 at level 3: 0.6, 0.7, 0.8 arrived in order, each the best so far, so all continued
    assert [r[3] for r in s.records() if r[0] == 0 and r[1] == 1] == [0.6, 0.7, 0.8]


def test_priors_join_both_rung_systems() -> None:
    for rs in ("per_bracket", "shared"):
        s = _sched(rs)
        for _ in range(6):
            s.add_prior(3, 0.9)
        n = _in_bracket(s, 1, 1)[0]
        assert s.on_report(n, 3, 0.5).stop, rs   # without priors the first value at a rung continues
        s2 = _sched(rs)
        n2 = _in_bracket(s2, 1, 1)[0]
        assert not s2.on_report(n2, 3, 0.5).stop, rs


@pytest.mark.parametrize("rs", ["per_bracket", "shared"])
def test_state_round_trip_per_rung_system(rs: str) -> None:
    s = _sched(rs, seed=3)
    for n in range(40):
        s.on_report(n, 1 + n % 10, (n * 37 % 11) / 10)
    s.add_prior(9, 0.55)
    state = s.state_dict()
    assert state["rung_system"] == rs
    r = _sched(rs, seed=3)
    r.load_state_dict(state)
    assert r.state_dict() == state
    for n in range(40, 60):
        assert s.on_report(n, 9, (n % 7) / 7) == r.on_report(n, 9, (n % 7) / 7)
    other = "shared" if rs == "per_bracket" else "per_bracket"
    with pytest.raises(ConfigError, match=r"state rung_system=.* does not match"):
        _sched(other, seed=3).load_state_dict(state)
    # a state saved before the key existed (shared) loads into either; per bracket drops the references
    legacy = {k: v for k, v in state.items() if k != "rung_system"}
    _sched(rs, seed=3).load_state_dict(legacy)


def test_forget_removes_a_trial_from_its_pool() -> None:
    for rs in ("per_bracket", "shared"):
        s = _sched(rs)
        b1 = _in_bracket(s, 1, 2)
        s.on_report(b1[0], 3, 0.9)
        s.forget(b1[0])
        assert not s.on_report(b1[1], 3, 0.5).stop, rs   # alone again: continues
        assert all(r[2] != b1[0] for r in s.records())
