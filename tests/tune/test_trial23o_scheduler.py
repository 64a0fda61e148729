"""Hyperband decisions for reports that jump over rung levels (trial 23o).

- A report that jumps over several levels records its value at each of them, also when the lower
  rung stops the trial in that report: the later decisions at the higher levels see it (a trial
  stopped at level 1 by a report at step 5 was missing from level 3's pool, and a later trial there
  was stopped where the documented rule continues it). The journal and a resume keep it; a journal
  written before (without those records) still resumes.
- A trial whose only report is at ``max_resource`` is ``completed``, reason ``reached
  max_resource=M``, ``rung`` ``s_max - bracket`` (its reason said a rung stopped it, rung 1).
- A trial completed at ``max_resource`` by the report that also reaches ``max_total_resource`` has
  the reason ``reached max_resource=M`` (it named the criterion).
- A trial that returns without reporting is charged ``max_resource`` (documented), rung 0.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tripwire.tune import Continuous, Hyperband, HyperbandPlan, HyperbandScheduler, RandomSearch, Tuner
from tripwire.tune._journal import Journal


# ---- trainables (module level: the workers import them) ---------------------------------------
def train_every_5(params: dict[str, Any], trial: Any) -> float:
    """Reports every 5 steps (not rung levels), the last one at ``max_resource``."""
    x, v = float(params["x"]), math.nan
    for step in [*range(5, trial.max_resource, 5), trial.max_resource]:
        v = x + 0.001 * step
        if trial.report(step=step, value=v):
            break
    return v


def train_final_only(params: dict[str, Any], trial: Any) -> float:
    """One report, at ``max_resource`` (every rung jumped over)."""
    trial.report(step=trial.max_resource, value=float(params["x"]))
    return float(params["x"])


def train_every_step(params: dict[str, Any], trial: Any) -> float:
    v = math.nan
    for step in range(1, trial.max_resource + 1):
        v = float(params["x"]) + 0.001 * step
        if trial.report(step=step, value=v):
            break
    return v


def train_silent(params: dict[str, Any], trial: Any) -> float:
    return float(params["x"])  # never reports


# ---- a reference implementation of docs/tune.md's "Decision rule" -------------------------------
def _replay(path: Path, plan: HyperbandPlan, mode: str = "max") -> list[str]:
    """Every report of the journal, in write order, through the documented rule (shared rungs,
    promote_best): the decisions that differ from the journal's."""
    con = sqlite3.connect(path)
    try:
        bracket = dict(con.execute("SELECT number, bracket FROM trials"))
        rows = con.execute("SELECT trial, step, value, stop FROM reports ORDER BY rowid").fetchall()
    finally:
        con.close()
    eta = plan.reduction_factor
    levels = [plan.min_resource * eta ** j for j in range(plan.s_max)]
    pools: dict[int, list[float]] = {j: [] for j in range(len(levels))}
    seen: dict[int, set[int]] = {}
    better = (lambda u, v: u > v) if mode == "max" else (lambda u, v: u < v)
    diffs = []
    for t, step, value, stop in rows:
        v = math.nan if value is None else value
        expected = step >= plan.max_resource
        for j, level in enumerate(levels):
            if step >= level and j not in seen.setdefault(t, set()):
                seen[t].add(j)
                pools[j].append(v)
                if j >= bracket[t]:
                    n, k = len(pools[j]), max(1, len(pools[j]) // eta)
                    nb = n if math.isnan(v) else sum(1 for u in pools[j] if not math.isnan(u) and better(u, v))
                    expected = expected or nb >= k
        if bool(stop) != expected:
            diffs.append(f"trial {t} step {step}: journal stop={bool(stop)}, rule {expected}")
    return diffs


def _bracket0(s: HyperbandScheduler, count: int) -> list[int]:
    return [n for n in range(200) if s.bracket(n) == 0][:count]


# ---- 1. a report that jumps over levels records its value at each ------------------------------
@pytest.mark.parametrize("rung_system", ["shared", "per_bracket"])
def test_a_stop_at_the_lower_rung_still_records_the_value_at_the_higher_levels(rung_system: str) -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=0, rung_system=rung_system)  # levels 1, 3, 9
    a, b, c = _bracket0(s, 3)
    assert not s.on_report(a, 5, 0.9).stop
    d = s.on_report(b, 5, 0.1)                      # stopped at level 1, jumped over level 3 too
    assert d.stop and d.rung == 0 and "rung at resource 1: value 0.1 has 1 better of 2" in d.reason
    assert d.records == ((0, 0, 0.1), (0, 1, 0.1))  # recorded at both levels it reached
    assert s.rung_reached(b) == 1                   # stopped at its first rung: 1 rung reached
    assert sorted((r[2], r[3]) for r in s.records() if r[1] == 1) == [(a, 0.9), (b, 0.1)]
    # the state keeps it, and restores it exactly
    r = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=0, rung_system=rung_system)
    r.load_state_dict(s.state_dict())
    assert r.state_dict() == s.state_dict() and r.rung_reached(b) == 1
    assert r.on_report(c, 5, 0.5) == s.on_report(c, 5, 0.5)
    s.end(b)
    assert s.rung_reached(b) == 0 and str(b) not in s.state_dict()["stopped"]


def test_a_later_decision_at_the_higher_level_sees_the_jumped_value() -> None:
    s = HyperbandScheduler(HyperbandPlan(1, 27, 3), "max", seed=0)
    b0 = _bracket0(s, 3)
    b1 = [n for n in range(200) if s.bracket(n) == 1][:3]
    assert [s.on_report(n, 5, v).stop for n, v in zip(b0, [0.9, 0.1, 0.05])] == [False, True, True]
    # level 3 holds 0.9, 0.1, 0.05; bracket 1 decides there first
    assert [s.on_report(n, 3, v).stop for n, v in zip(b1, [0.8, 0.7])] == [True, True]
    d = s.on_report(b1[2], 3, 0.85)   # n = 6, k = 2: one better (0.9), continues
    assert not d.stop and d.reason == "bracket 1: passed the rung at resource 3", d.reason


def test_tuner_with_reports_every_5_steps_decides_by_the_documented_rule(tmp_path: Path) -> None:
    plan = HyperbandPlan(1, 27, 3)
    journal = tmp_path / "jumpy.db"
    r = Tuner(train_every_5, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 27, 3), max_jobs=25, seed=3,
              journal=journal).fit()
    assert _replay(journal, plan) == []           # trial 11 was stopped at level 9 against the rule
    df = r.dataframe()
    stopped = df[df.status == "stopped"]
    # a trial stopped at level 1 by its step-5 report: recorded at levels 1 and 3, 1 rung reached
    low = stopped[(stopped.bracket == 0) & (stopped.resource == 5)]
    assert len(low) and (low.rung == 1).all()
    with Journal(journal, readonly=True) as j:
        rungs = j.rung_records()
        state = j.load_scheduler_state()
    for n in low.number:
        assert {(b, i) for b, i, t, _ in rungs if t == n} == {(0, 0), (0, 1)}
    assert [tuple(x) for x in state["records"]] == rungs
    done = df[df.status == "completed"]
    assert (done.reason == "reached max_resource=27").all() and (done.rung == plan.s_max - done.bracket).all()


def test_resume_keeps_the_jumped_records_and_a_journal_written_before_still_resumes(tmp_path: Path) -> None:
    plan = HyperbandPlan(1, 27, 3)
    space = {"x": Continuous(0.0, 1.0)}
    whole = tmp_path / "whole.db"
    ref = Tuner(train_every_5, space, strategy=Hyperband(1, 27, 3), max_jobs=20, seed=3, journal=whole).fit()
    part = tmp_path / "part.db"
    Tuner(train_every_5, space, strategy=Hyperband(1, 27, 3), max_jobs=10, seed=3, journal=part).fit()
    old = tmp_path / "old.db"
    old.write_bytes(part.read_bytes())
    res = Tuner.resume(part, max_jobs=20).fit()       # deterministic: as the job run in one go
    key = [(t.number, t.status, t.resource, t.rung, t.reason) for t in ref.trials]
    assert [(t.number, t.status, t.resource, t.rung, t.reason) for t in res.trials] == key
    assert _replay(part, plan) == []
    # a journal written before trial 23o: a trial stopped at a rung by a report that jumped over
    # higher levels has no value there, and the scheduler snapshot has no "stopped" key
    con = sqlite3.connect(old)
    deleted = 0
    with con:
        stops = con.execute("SELECT trial, reason FROM reports WHERE stop=1 AND reason LIKE '%rung at resource%'")
        for t, reason in stops.fetchall():
            level = int(reason.split("rung at resource ")[1].split(":")[0])
            b = con.execute("SELECT bracket FROM trials WHERE number=?", (t,)).fetchone()[0]
            rung = [1, 3, 9].index(level) - b
            deleted += con.execute("DELETE FROM rungs WHERE trial=? AND rung>?", (t, rung)).rowcount
        state = json.loads(con.execute("SELECT state FROM scheduler").fetchone()[0])
        state.pop("stopped", None)
        con.execute("UPDATE scheduler SET state=?", (json.dumps(state),))
    con.close()
    assert deleted > 0
    res_old = Tuner.resume(old, max_jobs=20).fit()
    assert [t.number for t in res_old.trials] == list(range(20))
    assert all(t.status in ("completed", "stopped") for t in res_old.trials)
    assert [(t.status, t.reason) for t in res_old.trials[:10]] == [(t.status, t.reason) for t in ref.trials[:10]]


# ---- 2. a trial whose only report is at max_resource -------------------------------------------
def test_a_single_report_at_max_resource_completes_with_every_rung_reached() -> None:
    plan = HyperbandPlan(1, 27, 3)
    s = HyperbandScheduler(plan, "max", seed=0)
    a, b = _bracket0(s, 2)
    s.on_report(a, 1, 0.9)
    d = s.on_report(b, 27, 0.1)                     # would stop at level 1
    assert d.stop and d.reason == "reached max_resource=27" and d.rung == plan.s_max - 1
    assert d.records == ((0, 0, 0.1), (0, 1, 0.1), (0, 2, 0.1))
    assert s.rung_reached(b) == plan.s_max


def test_tuner_final_only_reports_are_completed_at_max_resource(tmp_path: Path) -> None:
    plan = HyperbandPlan(1, 27, 3)
    journal = tmp_path / "final.db"
    r = Tuner(train_final_only, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 27, 3), max_jobs=6, seed=0,
              journal=journal).fit()
    for t in r.trials:   # trials 2 and 5 said "bracket 1, rung at resource 3: ..." with rung 1
        assert (t.status, t.resource, t.reason, t.rung) == \
            ("completed", 27, "reached max_resource=27", plan.s_max - t.bracket), t
    with Journal(journal, readonly=True) as j:
        levels = {}
        for b, i, t, _ in j.rung_records():
            levels.setdefault(t, set()).add(b + i)
    assert levels == {t.number: {0, 1, 2} for t in r.trials}   # every level, whatever the bracket
    assert _replay(journal, plan) == []


# ---- 3. completed at max_resource by the report that reaches a completion criterion ------------
def test_the_report_that_reaches_max_total_resource_at_max_resource_completes_the_trial(tmp_path: Path) -> None:
    r = Tuner(train_every_step, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=5), max_jobs=10,
              max_total_resource=10, seed=7, journal=tmp_path / "t.db").fit()
    assert r.halt == "max_total_resource=10 reached"
    # trial 1 said 'tuning job complete: max_total_resource=10 reached' (status completed)
    assert [(t.status, t.resource, t.reason) for t in r.trials] == [("completed", 5, "reached max_resource=5")] * 2
    with Journal(tmp_path / "t.db", readonly=True) as j:
        last = j.reports(1)[-1]
    assert last[1:2] == (5,) and last[4] is True and last[5] == "reached max_resource=5"


def test_a_trial_cut_short_by_the_criterion_below_max_resource_is_still_stopped_with_its_reason(
        tmp_path: Path) -> None:
    r = Tuner(train_every_step, {"x": Continuous(0.0, 1.0)}, strategy=RandomSearch(max_resource=5), max_jobs=10,
              max_total_resource=7, seed=7, journal=tmp_path / "t.db").fit()
    assert [(t.status, t.resource, t.reason) for t in r.trials] == [
        ("completed", 5, "reached max_resource=5"),
        ("stopped", 2, "tuning job complete: max_total_resource=7 reached")]


# ---- 4. a trial that never reports -------------------------------------------------------------
def test_a_trial_that_never_reports_is_charged_max_resource_and_reached_no_rung(tmp_path: Path) -> None:
    r = Tuner(train_silent, {"x": Continuous(0.0, 1.0)}, strategy=Hyperband(1, 27, 3), max_jobs=4, seed=0,
              journal=tmp_path / "s.db").fit()
    df = r.dataframe()
    assert (df.status == "completed").all() and (df.resource == 27).all() and (df.rung == 0).all()
    assert (df.reason == "completed").all()
    assert r.resource_used == int(df.resource.sum()) == 4 * 27 == r.resource_without_early_stopping
