"""Tuning benchmark (evaluation protocol, section 3): tripwire Hyperband (random and TPE/BOHB-style
sampler) vs full-budget random search vs Optuna's HyperbandPruner (random and TPE samplers), at
equal resource, over several seeds, on two objective families; plus the scheduler's time per decision
at 10,000 trials, warm worker reuse vs a fresh process per trial, and a real run with real processes.

    python benchmarks/tuning.py            # full: 20 seeds per family
    python benchmarks/tuning.py --quick    # smoke run (< 40 s)

Prints the figures and writes ``benchmarks/results/tuning.json``.

How every method sees the same objective (Syne Tune's "simulator backend" idea): a trial's value
after ``u`` resource units is a function of its configuration only, looked up in a table, and each
unit costs a known time on a simulated clock. Every method runs on ``--workers`` asynchronous
simulated workers driven by an event queue:

- tripwire runs through its real :class:`Tuner` (journal, scheduler, completion criteria), with an
  executor that plays the table instead of training (:class:`SimExecutor`);
- Optuna runs in ask/tell mode on the same event queue, ``trial.report`` each unit,
  ``trial.should_prune()`` with ``HyperbandPruner(min_resource, max_resource, reduction_factor)``.

A job "at 1/3 of the resource" gets ``max_total_resource`` = 1/3 of what random search used: no
trial starts once it is spent and the running trials stop at their next report (the Tuner's own
rule; Optuna's loop applies the same one). The best objective counts every ended trial's last
value, stopped trials included (a stopped trial is still a trained model), for every method.

Objective families:

1. ``xgboost``: the real objective of protocol section 4. XGBoost (``hist``, ``nthread=1``) on a
   generated imbalanced binary set (about 11% positives), validation AUC; the 7 hyperparameters of
   the SageMaker experiment: the resource (``num_round``; 1 unit = 5 boosting rounds, ``min_resource
   1``, ``max_resource 30`` = 150 rounds), ``eta`` 0-1, ``min_child_weight`` 1-10, ``alpha`` 0-2,
   ``max_depth`` 1-10, ``colsample_bylevel`` 0-1, ``colsample_bytree`` 0-1; 30 jobs of random
   search, 4 parallel workers. The table is filled lazily with real XGBoost training (each
   configuration trained once, unit by unit, as far as some method needs it) and cached on disk;
   the clock charges each unit the time its rounds really took.
2. ``simulated``: a harder synthetic family where learning curves cross: a configuration ``c``
   has a final value ``f(c)`` and a speed ``k(c)``; after ``r`` units its value is
   ``f - (f - 0.5) exp(-k r)`` plus evaluation noise (sd 0.002, a function of ``c`` and ``r``).
   Low learning rates learn slowly but end higher, so early stopping can be wrong.
   ``max_resource 81``, 60 jobs of random search; each unit costs one tick.

Also printed per family (added with the rung-system study; the objectives are unchanged):

- ``curves``: on random search's own configurations, the Spearman correlation of the value at
  each rung level with the final value, the share of the final top 10% that rank in the top
  ``1/eta`` at that level (chance ``1/eta``), and the "1-Epoch" baseline of Egele et al. (2023,
  2024: 1 unit for every configuration, the top ``K`` trained to ``max_resource``, at 1/3 of
  random's resource). On published learning-curve benchmarks (LCBench among them) that baseline
  loses almost nothing; the numbers say how far this family's early values mislead.
- ``more_seeds``: random search, tripwire Hyperband (both rung systems) and Optuna's
  HyperbandPruner (random sampler) on further seeds (``--more-seeds-simulated``, default 80;
  ``--more-seeds-xgboost``, default 20). tripwire's and Optuna's configurations differ, so their
  difference has the spread of a best-of-N maximum, which 20 seeds do not resolve.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import heapq
import json
import math
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tripwire.tune import (Continuous, Hyperband, HyperbandPlan, HyperbandScheduler, Integer, LocalExecutor,
                           RandomSearch, Space, Tuner)
from tripwire.tune._executor import Executor, Failed, Finished, Report, TrialSpec

ETA = 3


# ---- objective families -------------------------------------------------------------------------
def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


class XGBoostTable:
    """Real XGBoost learning curves, trained lazily and cached (see the module docstring)."""

    name = "xgboost"
    max_resource = 30
    rounds_per_unit = 5
    space = Space({"eta": Continuous(0.0, 1.0), "min_child_weight": Continuous(1.0, 10.0),
                   "alpha": Continuous(0.0, 2.0), "max_depth": Integer(1, 10),
                   "colsample_bylevel": Continuous(0.0, 1.0), "colsample_bytree": Continuous(0.0, 1.0)})

    def __init__(self, rows: int, cache: Path | None) -> None:
        import xgboost as xgb
        from sklearn.datasets import make_classification

        self.rows = rows
        X, y = make_classification(n_samples=rows, n_features=20, n_informative=8, n_redundant=4,
                                   weights=[0.89], flip_y=0.05, class_sep=0.8, random_state=0)
        cut = rows * 7 // 10
        self.positives = float(y.mean())
        self._xgb = xgb
        self._dtrain = xgb.DMatrix(X[:cut], label=y[:cut])
        self._dvalid = xgb.DMatrix(X[cut:], label=y[cut:])
        self._curves: dict[str, tuple[list[float], list[float]]] = {}   # key -> (auc per unit, s per unit)
        self._boosters: OrderedDict[str, Any] = OrderedDict()
        self.cache = cache
        self.rounds_trained = 0
        self.train_seconds = 0.0
        if cache is not None and cache.exists():
            with gzip.open(cache, "rb") as fh:
                stored = pickle.load(fh)
            if stored.get("rows") == rows and stored.get("version") == 1:
                self._curves = stored["curves"]

    def save(self) -> None:
        if self.cache is not None:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(self.cache, "wb") as fh:
                pickle.dump({"rows": self.rows, "version": 1, "curves": self._curves}, fh)

    def _params(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"objective": "binary:logistic", "eval_metric": "auc", "tree_method": "hist", "max_bin": 64,
                "nthread": 1, "seed": 0, "verbosity": 0, "eta": p["eta"], "min_child_weight": p["min_child_weight"],
                "alpha": p["alpha"], "max_depth": p["max_depth"], "colsample_bylevel": p["colsample_bylevel"],
                "colsample_bytree": p["colsample_bytree"]}

    def _extend(self, key: str, p: dict[str, Any], unit: int) -> None:
        aucs, secs = self._curves.setdefault(key, ([], []))
        bst = self._boosters.pop(key, None)
        if bst is None or bst.num_boosted_rounds() != len(aucs) * self.rounds_per_unit:
            bst = self._xgb.Booster(self._params(p), [self._dtrain, self._dvalid])
            for i in range(len(aucs) * self.rounds_per_unit):  # rebuild the prefix (same trees: same seed)
                bst.update(self._dtrain, i)
        while len(aucs) < unit:
            t0 = time.perf_counter()
            start = bst.num_boosted_rounds()
            for i in range(start, start + self.rounds_per_unit):
                bst.update(self._dtrain, i)
            msg = bst.eval_set([(self._dvalid, "valid")], start + self.rounds_per_unit - 1)
            dt = time.perf_counter() - t0
            aucs.append(float(msg.rsplit(":", 1)[1]))
            secs.append(dt)
            self.rounds_trained += self.rounds_per_unit
            self.train_seconds += dt
        self._boosters[key] = bst
        while len(self._boosters) > 64:
            self._boosters.popitem(last=False)

    def value(self, p: dict[str, Any], unit: int) -> float:
        key = _key(p)
        curve = self._curves.get(key)
        if curve is None or len(curve[0]) < unit:
            self._extend(key, p, unit)
            curve = self._curves[key]
        return curve[0][unit - 1]

    def cost(self, p: dict[str, Any], unit: int) -> float:
        self.value(p, unit)
        return self._curves[_key(p)][1][unit - 1]


class SimulatedCurves:
    """Crossing synthetic learning curves (see the module docstring)."""

    name = "simulated"
    max_resource = 81
    space = Space({"lr": Continuous(1e-4, 1.0, scale="log"), "depth": Integer(1, 10),
                   "subsample": Continuous(0.5, 1.0), "reg": Continuous(1e-3, 10.0, scale="log")})

    @staticmethod
    def final(p: dict[str, Any]) -> float:
        lr = math.log10(p["lr"])
        return (0.95 - 0.06 * (lr + 1.7) ** 2 - 0.004 * (p["depth"] - 6) ** 2 - 0.12 * (1 - p["subsample"]) ** 2
                - 0.01 * math.log10(p["reg"]) ** 2)

    def value(self, p: dict[str, Any], unit: int) -> float:
        f = self.final(p)
        k = 0.12 * math.sqrt(p["lr"] / 0.02) + 0.01
        digest = hashlib.blake2b(f"{_key(p)}|{unit}".encode(), digest_size=8).digest()
        noise = float(np.random.default_rng(int.from_bytes(digest, "little")).normal(0, 0.002))
        return f - (f - 0.5) * math.exp(-k * unit) + noise

    def cost(self, p: dict[str, Any], unit: int) -> float:
        return 1.0


# ---- the simulated cluster ----------------------------------------------------------------------
class Trace:
    """What one job did on the simulated clock: ``(time, resource consumed so far, best so far)`` at
    each trial end, and its totals."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.consumed = 0
        self.best = -math.inf
        self.points: list[tuple[float, int, float]] = []
        self.trials = 0
        self.records: list[tuple[int, int | None, int]] = []   # (trial, bracket, resource) of a tripwire job

    def ended(self, value: float | None) -> None:
        if value is not None and not math.isnan(value):
            self.best = max(self.best, value)
        self.points.append((self.clock, self.consumed, self.best))

    def best_at(self, resource: int) -> float:
        best = -math.inf
        for _t, used, b in self.points:
            if used > resource:
                break
            best = b
        return best

    def resource_to_reach(self, target: float) -> int | None:
        return next((used for _t, used, b in self.points if b >= target), None)

    def summary(self) -> dict[str, Any]:
        step = max(1, len(self.points) // 60)
        return {"best": self.best, "resource": self.consumed, "sim_wall": self.clock, "trials": self.trials,
                "anytime": [[round(t, 3), u, b] for t, u, b in self.points[::step] + self.points[-1:]]}


class SimExecutor(Executor):
    """Plays an objective table on ``n`` simulated asynchronous workers for the real :class:`Tuner`."""

    def __init__(self, objective: Any) -> None:
        self.objective = objective
        self.trace = Trace()
        self._queue: list[tuple[float, int, str]] = []     # (time, trial, "report"|"finish")
        self._state: dict[int, list[Any]] = {}             # trial -> [params, unit, last value]
        self._n = 1

    def start(self, train: Callable[..., Any], setup: Callable[[], Any] | None, n_workers: int) -> None:
        self._n = n_workers

    def free_slots(self) -> int:
        return self._n - len(self._state)

    def submit(self, spec: TrialSpec) -> None:
        self._state[spec.number] = [spec.params, 0, None]
        self.trace.trials += 1
        heapq.heappush(self._queue, (self.trace.clock + self.objective.cost(spec.params, 1), spec.number, "report"))

    def poll(self, timeout: float) -> list[Any]:
        if not self._queue:
            return []
        when, number, kind = heapq.heappop(self._queue)
        self.trace.clock = max(self.trace.clock, when)
        st = self._state[number]
        if kind == "finish":
            del self._state[number]
            self.trace.ended(st[2])
            return [Finished(number, None, 0.0)]
        st[1] += 1
        self.trace.consumed += 1
        st[2] = self.objective.value(st[0], st[1])
        return [Report(number, st[1], st[2])]

    def reply(self, number: int, stop: bool, reason: str) -> None:
        st = self._state.get(number)
        if st is None:
            return
        if stop or st[1] >= self.objective.max_resource:
            heapq.heappush(self._queue, (self.trace.clock, number, "finish"))
        else:
            heapq.heappush(self._queue, (self.trace.clock + self.objective.cost(st[0], st[1] + 1), number, "report"))

    def cancel(self, number: int, reason: str) -> Failed | None:
        return None

    def shutdown(self) -> None:
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "simulated"}


def _never_called(params: dict[str, Any], trial: Any) -> None:  # the SimExecutor plays the table instead
    raise AssertionError("not called")


def run_tripwire(objective: Any, strategy: Any, seed: int, workers: int, tmp: Path, max_jobs: int | None = None,
                 budget: int | None = None) -> Trace:
    ex = SimExecutor(objective)
    journal = tmp / f"sim-{objective.name}-{seed}-{time.perf_counter_ns()}.db"
    res = Tuner(_never_called, objective.space, objective="value", mode="max", strategy=strategy,
                max_jobs=max_jobs if max_jobs is not None else 100_000, max_total_resource=budget,
                max_parallel_jobs=workers, seed=seed, journal=str(journal), executor=ex).fit()
    ex.trace.records = [(t.number, t.bracket, t.resource) for t in res.trials]
    journal.unlink(missing_ok=True)
    for suffix in ("-wal", "-shm"):
        Path(str(journal) + suffix).unlink(missing_ok=True)
    return ex.trace


def _optuna_distributions(space: Space) -> dict[str, Any]:
    import optuna

    out: dict[str, Any] = {}
    for name, p in space.ranges.items():
        log = p._resolved == "log"  # type: ignore[attr-defined]
        out[name] = (optuna.distributions.IntDistribution(int(p.low), int(p.high), log=log) if isinstance(p, Integer)
                     else optuna.distributions.FloatDistribution(p.low, p.high, log=log))  # type: ignore[attr-defined]
    return out


def run_optuna(objective: Any, seed: int, workers: int, budget: int, sampler: str) -> Trace | None:
    """Optuna (ask/tell) with ``HyperbandPruner`` on the same simulated asynchronous workers."""
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    smp = (optuna.samplers.TPESampler(seed=seed) if sampler == "tpe" else optuna.samplers.RandomSampler(seed=seed))
    # a fixed study name: HyperbandPruner assigns brackets from a hash of the study name and trial number
    study = optuna.create_study(study_name=f"bench-{objective.name}-{seed}", direction="maximize", sampler=smp,
                                pruner=optuna.pruners.HyperbandPruner(
        min_resource=1, max_resource=objective.max_resource, reduction_factor=ETA))
    dists = _optuna_distributions(objective.space)
    trace = Trace()
    queue: list[tuple[float, int]] = []
    running: dict[int, list[Any]] = {}   # number -> [trial, params, unit, value]
    while True:
        while len(running) < workers and trace.consumed < budget:
            t = study.ask(dists)
            params = {k: (int(v) if isinstance(dists[k], optuna.distributions.IntDistribution) else float(v))
                      for k, v in t.params.items()}
            running[t.number] = [t, params, 0, None]
            trace.trials += 1
            heapq.heappush(queue, (trace.clock + objective.cost(params, 1), t.number))
        if not queue:
            return trace
        when, number = heapq.heappop(queue)
        trace.clock = max(trace.clock, when)
        st = running[number]
        st[2] += 1
        trace.consumed += 1
        st[3] = objective.value(st[1], st[2])
        st[0].report(st[3], st[2])
        if st[2] >= objective.max_resource:
            study.tell(st[0], st[3])
        elif trace.consumed >= budget or st[0].should_prune():
            study.tell(st[0], state=optuna.trial.TrialState.PRUNED)
        else:
            heapq.heappush(queue, (trace.clock + objective.cost(st[1], st[2] + 1), number))
            continue
        del running[number]
        trace.ended(st[3])


# ---- the comparison -----------------------------------------------------------------------------
def _t975(df: int) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (scipy when present)."""
    try:
        from scipy.stats import t
        return float(t.ppf(0.975, df))
    except ImportError:  # pragma: no cover - scikit-learn brings scipy
        return 1.96


def _stats(xs: list[float]) -> dict[str, float]:
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    mean, se = statistics.fmean(xs), sd / math.sqrt(len(xs))
    half = _t975(len(xs) - 1) * se if len(xs) > 1 else 0.0
    return {"mean": mean, "sd": sd, "se": se, "ci95": [mean - half, mean + half], "min": min(xs), "max": max(xs),
            "median": statistics.median(xs)}


METHODS = ("tripwire_hyperband", "tripwire_hyperband_tpe", "optuna_random_hyperband", "optuna_tpe_hyperband")


def compare(objective: Any, seeds: int, n_random: int, workers: int, tmp: Path, optuna_ok: bool) -> dict[str, Any]:
    R = objective.max_resource
    full = n_random * R
    third = full // 3
    rows = []
    t_start = time.perf_counter()
    for seed in range(seeds):
        row: dict[str, Any] = {"seed": seed}
        rs = run_tripwire(objective, RandomSearch(R), seed, workers, tmp, max_jobs=n_random)
        row["random_full"] = rs.summary()
        finals = [objective.value(objective.space.sample(seed, t), R) for t in range(n_random)]
        for name, sampler in (("tripwire_hyperband", "random"), ("tripwire_hyperband_tpe", "tpe")):
            strat = Hyperband(1, R, ETA, sampler=sampler)
            tr = run_tripwire(objective, strat, seed, workers, tmp, budget=third)
            row[name] = tr.summary()
            if sampler == "random":   # where the resource went, and what became of random's best configuration
                row[name]["diagnosis"] = _diagnosis(tr, finals, R)
            whole = run_tripwire(objective, strat, seed, workers, tmp, budget=full)
            row[name]["at_full_budget"] = whole.best
            reach = whole.resource_to_reach(rs.best)
            row[name]["resource_to_match_random"] = reach
        if optuna_ok:
            for name, sampler in (("optuna_random_hyperband", "random"), ("optuna_tpe_hyperband", "tpe")):
                tr = run_optuna(objective, seed, workers, third, sampler)
                row[name] = tr.summary() if tr is not None else None
        rows.append(row)
        print(f"  ({objective.name} seed {seed}: random {rs.best:.4f}, "
              + ", ".join(f"{m} {row[m]['best']:.4f}" for m in METHODS if row.get(m)) + ")", file=sys.stderr)
        if isinstance(objective, XGBoostTable):
            objective.save()
    out: dict[str, Any] = {"family": objective.name, "seeds": seeds, "workers": workers, "max_resource": R,
                           "reduction_factor": ETA, "random_trials": n_random, "random_resource": full,
                           "third_budget": third, "seconds": time.perf_counter() - t_start}
    rb = [r["random_full"]["best"] for r in rows]
    out["random_full"] = {**_stats(rb), "resource": _stats([r["random_full"]["resource"] for r in rows]),
                          "sim_wall": _stats([r["random_full"]["sim_wall"] for r in rows])}
    for m in METHODS:
        if any(r.get(m) is None for r in rows):
            continue
        best = [r[m]["best"] for r in rows]
        diff = [b - a for a, b in zip(rb, best)]
        entry: dict[str, Any] = {**_stats(best), "resource": _stats([r[m]["resource"] for r in rows]),
                                 "sim_wall": _stats([r[m]["sim_wall"] for r in rows]),
                                 "trials": _stats([r[m]["trials"] for r in rows]),
                                 "minus_random": _stats(diff),
                                 "seeds_ge_random": sum(d >= 0 for d in diff),
                                 "seeds_gt_random": sum(d > 0 for d in diff)}
        if m.startswith("tripwire"):
            reach = [r[m]["resource_to_match_random"] for r in rows]
            entry["at_full_budget"] = _stats([r[m]["at_full_budget"] for r in rows])
            entry["median_fraction_to_match_random"] = statistics.median(
                [x / full if x is not None else math.inf for x in reach])
            entry["seeds_matching_random_within_third"] = sum(x is not None and x <= third for x in reach)
        out[m] = entry
    for m in ("tripwire_hyperband", "tripwire_hyperband_tpe"):
        for o in ("optuna_random_hyperband", "optuna_tpe_hyperband"):
            if m in out and o in out:
                d = [r[m]["best"] - r[o]["best"] for r in rows]
                out[m][f"minus_{o}"] = {**_stats(d), "seeds_ge": sum(x >= 0 for x in d),
                                        "seeds_gt": sum(x > 0 for x in d)}
    if "tripwire_hyperband" in out:
        out["tripwire_hyperband"]["diagnosis"] = _diagnosis_summary(rows, R, n_random)
    out["rows"] = rows
    return out


def _diagnosis(trace: Trace, finals: list[float], R: int) -> dict[str, Any]:
    """A Hyperband job at 1/3 (same seed, hence the same configuration sequence as random search):
    trials started, resource per bracket, the resource of the trials that ran to ``R``, and the
    resource at which random search's best configuration (its trial number) was stopped."""
    spent: dict[str, int] = {}
    for _n, b, used in trace.records:
        spent[str(b)] = spent.get(str(b), 0) + used
    fate = {n: used for n, _b, used in trace.records}
    best = int(np.argmax(finals))
    return {"trials": len(trace.records), "bracket_resource": spent,
            "full_runs_resource": sum(u for _n, _b, u in trace.records if u >= R),
            "random_best_resource": fate.get(best)}


def _diagnosis_summary(rows: list[dict[str, Any]], R: int, n_random: int) -> dict[str, Any]:
    ds = [r["tripwire_hyperband"]["diagnosis"] for r in rows]
    total = sum(sum(d["bracket_resource"].values()) for d in ds)
    shares: dict[str, float] = {}
    for d in ds:
        for b, u in d["bracket_resource"].items():
            shares[b] = shares.get(b, 0.0) + u / total
    fates = [d["random_best_resource"] for d in ds]
    return {"trials": statistics.fmean(d["trials"] for d in ds), "random_trials": n_random,
            "bracket_share": dict(sorted(shares.items())),
            "full_runs_share": sum(d["full_runs_resource"] for d in ds) / total,
            "random_best_not_sampled": sum(f is None for f in fates),
            "random_best_stopped_at_1": sum(f is not None and f <= 1 for f in fates),
            "random_best_stopped_below_max": sum(f is not None and f < R for f in fates)}


def _ranks(xs: list[float]) -> np.ndarray:
    return np.argsort(np.argsort(np.asarray(xs), kind="stable"), kind="stable").astype(float)


def curve_diagnostics(objective: Any, seeds: int, n_random: int) -> dict[str, Any]:
    """How much a rung level tells about the final value, on random search's own configurations
    (the first ``n_random`` of each seed): per rung level ``L`` of ``Hyperband(1, R, eta)``, the
    Spearman correlation of the value at ``L`` with the value at ``R``, and the share of the top 10%
    (by final value) that rank in the top ``1/eta`` at ``L`` (chance: ``1/eta``; what a rung must
    keep for early stopping to find the best). And the "1-Epoch" baseline of Egele et al. (2023,
    2024): train every configuration for 1 unit, keep the top ``K`` to ``R`` with ``K`` set so the
    resource is 1/3 of random search's, best minus random's (paired, mean and se over seeds);
    on published learning-curve benchmarks (LCBench among them) it loses almost nothing."""
    R = objective.max_resource
    plan = HyperbandPlan(1, R, ETA)
    levels = sorted({lvl for b in range(plan.n_brackets) for lvl in plan.rungs(b)})
    per_level: dict[int, dict[str, list[float]]] = {lvl: {"spearman": [], "top10_kept": []} for lvl in levels}
    third = n_random * R // 3
    k_keep = max(0, (third - n_random) // (R - 1))
    one_epoch: list[float] = []
    for seed in range(seeds):
        configs = [objective.space.sample(seed, t) for t in range(n_random)]
        final = [objective.value(p, R) for p in configs]
        top = np.argsort(final)[::-1][:max(1, n_random // 10)]
        for lvl in levels:
            at = [objective.value(p, lvl) for p in configs]
            ra, rf = _ranks(at), _ranks(final)
            per_level[lvl]["spearman"].append(float(np.corrcoef(ra, rf)[0, 1]))
            cut = n_random - n_random // ETA     # ranks >= cut: the top 1/eta at this level
            per_level[lvl]["top10_kept"].append(float(np.mean(ra[top] >= cut)))
        at1 = [objective.value(p, 1) for p in configs]
        kept = np.argsort(at1)[::-1][:k_keep]
        one_epoch.append(max([final[i] for i in kept] + at1) - max(final))
    return {"levels": {str(lvl): {k: statistics.fmean(v) for k, v in d.items()} for lvl, d in per_level.items()},
            "chance_top_kept": 1 / ETA, "one_epoch_keep": k_keep, "one_epoch_minus_random": _stats(one_epoch)}


def print_diagnostics(name: str, d: dict[str, Any]) -> None:
    parts = [f"L={lvl}: Spearman {v['spearman']:.2f}, top-10% kept {v['top10_kept']:.2f}"
             for lvl, v in d["levels"].items()]
    o = d["one_epoch_minus_random"]
    print(f"  [{name} curves] value at a rung level vs the final value on random search's configurations "
          f"(top-10% kept: share of the final top 10% in the top 1/{ETA} at L; chance {d['chance_top_kept']:.2f}): "
          + "; ".join(parts) + f". 1-Epoch baseline (1 unit each, keep the top {d['one_epoch_keep']}) at 1/3: "
          f"{o['mean']:+.4f} +- {o['se']:.4f} vs random")


def more_seeds(objective: Any, first: int, count: int, n_random: int, workers: int, tmp: Path,
               optuna_ok: bool) -> dict[str, Any]:
    """The fast methods (random search, tripwire Hyperband with the random sampler and each rung
    system, Optuna's HyperbandPruner with the random sampler) on ``count`` further seeds: tripwire's and Optuna's
    samplers draw different configurations, so their difference has the seed-to-seed spread of a
    best-of-N maximum; 20 seeds do not resolve it."""
    R = objective.max_resource
    third = n_random * R // 3
    rnd, hb, pb, st, op = [], [], [], [], []
    for seed in range(first, first + count):
        rnd.append(run_tripwire(objective, RandomSearch(R), seed, workers, tmp, max_jobs=n_random).best)
        hb.append(run_tripwire(objective, Hyperband(1, R, ETA), seed, workers, tmp, budget=third).best)
        pb.append(run_tripwire(objective, Hyperband(1, R, ETA, rung_system="per_bracket"), seed, workers, tmp,
                               budget=third).best)
        st.append(run_tripwire(objective, Hyperband(1, R, ETA, rung_warmup="strict"), seed, workers, tmp,
                               budget=third).best)
        if optuna_ok:
            tr = run_optuna(objective, seed, workers, third, "random")
            op.append(tr.best if tr is not None else math.nan)
    out: dict[str, Any] = {"seeds": [first, first + count - 1], "tripwire_hyperband_minus_random":
                           _stats([b - a for a, b in zip(rnd, hb)]),
                           "tripwire_hyperband_per_bracket_minus_random": _stats([b - a for a, b in zip(rnd, pb)]),
                           "per_bracket_minus_shared": _stats([b - a for a, b in zip(hb, pb)]),
                           "tripwire_hyperband_strict_minus_random": _stats([b - a for a, b in zip(rnd, st)]),
                           "strict_minus_promote_best": _stats([b - a for a, b in zip(hb, st)])}
    if op:
        out["optuna_random_hyperband_minus_random"] = _stats([b - a for a, b in zip(rnd, op)])
        out["tripwire_hyperband_minus_optuna_random_hyperband"] = _stats([b - a for a, b in zip(op, hb)])
    return out


def _fmt(x: dict[str, Any]) -> str:
    return f"{x['mean']:+.4f} +- {x['se']:.4f} [{x['ci95'][0]:+.4f}, {x['ci95'][1]:+.4f}]"


def print_more(name: str, m: dict[str, Any]) -> None:
    line = (f"  [{name}, seeds {m['seeds'][0]}-{m['seeds'][1]}, fast methods] tripwire_hyperband minus random "
            f"{_fmt(m['tripwire_hyperband_minus_random'])}; with rung_system='per_bracket' "
            f"{_fmt(m['tripwire_hyperband_per_bracket_minus_random'])} (per_bracket minus shared "
            f"{_fmt(m['per_bracket_minus_shared'])}); with rung_warmup='strict' "
            f"{_fmt(m['tripwire_hyperband_strict_minus_random'])} (strict minus promote_best "
            f"{_fmt(m['strict_minus_promote_best'])})")
    if "optuna_random_hyperband_minus_random" in m:
        line += (f"; optuna_random_hyperband minus random {_fmt(m['optuna_random_hyperband_minus_random'])}; "
                 f"tripwire minus optuna_random {_fmt(m['tripwire_hyperband_minus_optuna_random_hyperband'])}")
    print(line + " (mean +- se [95% CI])")


def print_family(res: dict[str, Any], unit: str) -> None:
    R, full, third = res["max_resource"], res["random_resource"], res["third_budget"]
    print(f"[{res['family']}] {res['seeds']} seeds, max_resource={R} {unit}, eta={ETA}, {res['workers']} async "
          f"workers ({res['seconds']:.1f} s)")
    rf = res["random_full"]
    print(f"  random search, full budget ({res['random_trials']} trials x {R} = {full}): best {rf['mean']:.4f} "
          f"+- {rf['sd']:.4f} (mean +- sd over seeds); simulated wall {rf['sim_wall']['mean']:.1f}")
    for m in METHODS:
        if m not in res:
            continue
        e = res[m]
        line = (f"  {m} at 1/3 ({third}; used {e['resource']['mean']:.0f}): best {e['mean']:.4f} +- {e['sd']:.4f}; "
                f"minus random {e['minus_random']['mean']:+.4f} +- {e['minus_random']['se']:.4f} (paired, mean +- se; "
                f"95% CI [{e['minus_random']['ci95'][0]:+.4f}, {e['minus_random']['ci95'][1]:+.4f}]; "
                f"median {e['minus_random']['median']:+.4f}), "
                f">= random in {e['seeds_ge_random']}/{res['seeds']} (> in {e['seeds_gt_random']}); "
                f"{e['trials']['mean']:.0f} trials; "
                f"simulated wall {e['sim_wall']['mean']:.1f}")
        print(line)
        if m.startswith("tripwire"):
            extra = [f"with the full {full}: best {e['at_full_budget']['mean']:.4f}",
                     f"reaches random's best within 1/3 in {e['seeds_matching_random_within_third']}/{res['seeds']} "
                     f"seeds, median resource to match it {e['median_fraction_to_match_random']:.0%} of random's"]
            for o in ("optuna_random_hyperband", "optuna_tpe_hyperband"):
                k = f"minus_{o}"
                if k in e:
                    extra.append(f"minus {o} {e[k]['mean']:+.4f} +- {e[k]['se']:.4f} "
                                 f"(95% CI [{e[k]['ci95'][0]:+.4f}, {e[k]['ci95'][1]:+.4f}]; median "
                                 f"{e[k]['median']:+.4f}; >= in {e[k]['seeds_ge']}/{res['seeds']})")
            print("      " + "; ".join(extra))
    for line in verdicts(res):
        print("  " + line)
    dg = res.get("tripwire_hyperband", {}).get("diagnosis")
    if dg:
        print("  " + _diagnosis_line(dg, res))


def _diagnosis_line(dg: dict[str, Any], res: dict[str, Any]) -> str:
    shares = ", ".join(f"{b}: {v:.0%}" for b, v in dg["bracket_share"].items())
    n = res["seeds"]
    return (f"Where tripwire_hyperband's 1/3 went (mean over seeds): {dg['trials']:.1f} trials started (random search: "
            f"{dg['random_trials']}; same configuration sequence); resource by bracket {shares}; trials run to "
            f"max_resource took {dg['full_runs_share']:.0%}. Random search's best configuration was stopped below "
            f"max_resource in {dg['random_best_stopped_below_max']}/{n} seeds ({dg['random_best_stopped_at_1']} at "
            f"the first level), never started in {dg['random_best_not_sampled']}/{n}.")


def verdicts(res: dict[str, Any]) -> list[str]:
    """The two goals, stated per tripwire method, as point estimates and with their 95% intervals."""
    out = []
    for m in ("tripwire_hyperband", "tripwire_hyperband_tpe"):
        if m not in res:
            continue
        e, d = res[m], res[m]["minus_random"]
        frac = e["median_fraction_to_match_random"]
        met = d["mean"] >= 0 and frac <= 1 / 3
        out.append(f"goal 1 [{m}]: {'MET' if met else 'NOT MET'} as a point estimate (mean best at 1/3 minus "
                   f"random's {d['mean']:+.4f}, median resource to match random {frac:.3f} of random's); 95% CI "
                   f"[{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]: "
                   + ("no difference shown" if d["ci95"][0] <= 0 <= d["ci95"][1] else
                      "worse than random" if d["ci95"][1] < 0 else "better than random"))
        for o in ("optuna_random_hyperband", "optuna_tpe_hyperband"):
            k = f"minus_{o}"
            if k in e:
                x = e[k]
                out.append(f"goal 2 [{m} vs {o}]: {'MET' if x['mean'] >= 0 else 'NOT MET'} as a point estimate "
                           f"({x['mean']:+.4f}); 95% CI [{x['ci95'][0]:+.4f}, {x['ci95'][1]:+.4f}]: "
                           + ("no difference shown" if x["ci95"][0] <= 0 <= x["ci95"][1] else
                              "worse" if x["ci95"][1] < 0 else "better"))
    return out


# ---- scheduler time per decision ----------------------------------------------------------------
def decision_time(n_trials: int, max_resource: int = 81, workers: int = 8) -> dict[str, Any]:
    """``HyperbandScheduler.on_report`` timed over a job of ``n_trials`` trials (synthetic values)."""
    sched = HyperbandScheduler(HyperbandPlan(1, max_resource, ETA), "max", 12345)
    rng = np.random.default_rng(0)
    quality = rng.random(n_trials)
    timings: list[int] = []
    slots: list[list[int] | None] = [None] * workers
    nxt = ended = 0
    while ended < n_trials:
        for w in range(workers):
            if slots[w] is None and nxt < n_trials:
                slots[w] = [nxt, 0]
                nxt += 1
            s = slots[w]
            if s is None:
                continue
            s[1] += 1
            v = float(quality[s[0]] * (1 - math.exp(-s[1] / 10)))
            t0 = time.perf_counter_ns()
            d = sched.on_report(s[0], s[1], v)
            timings.append(time.perf_counter_ns() - t0)
            if d.stop:
                sched.end(s[0])
                slots[w] = None
                ended += 1
    arr = np.array(timings) / 1e3
    tail = arr[-max(1, len(arr) // 10):]
    return {"trials": n_trials, "decisions": int(arr.size), "mean_us": float(arr.mean()),
            "p99_us": float(np.percentile(arr, 99)), "max_us": float(arr.max()),
            "mean_us_last_10pct": float(tail.mean())}


# ---- real processes -----------------------------------------------------------------------------
def bench_setup() -> dict[str, Any]:
    """Per-worker data load: import XGBoost and scikit-learn, make the imbalanced set."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    n = int(os.environ.get("TRIPWIRE_BENCH_ROWS", "4000"))
    X, y = make_classification(n_samples=n, n_features=20, n_informative=8, n_redundant=4, weights=[0.89],
                               flip_y=0.05, class_sep=0.8, random_state=0)
    cut = n * 7 // 10
    return {"dtrain": xgb.DMatrix(X[:cut], label=y[:cut]), "dvalid": xgb.DMatrix(X[cut:], label=y[cut:])}


def train_noop(params: dict[str, Any], trial: Any) -> float:
    trial.report(step=1, value=float(params["eta"]))
    return float(params["eta"])


def train_xgb(params: dict[str, Any], trial: Any) -> None:
    """Real XGBoost; reports validation AUC every 5 rounds (1 resource unit), stops when told."""
    import xgboost as xgb

    ctx = trial.context

    class Report(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            if (epoch + 1) % 5:
                return False
            return bool(trial.report(step=(epoch + 1) // 5, value=float(evals_log["valid"]["auc"][-1])))

    xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "tree_method": "hist", "max_bin": 64,
               "nthread": 1, "seed": 0, **params}, ctx["dtrain"], num_boost_round=5 * trial.max_resource,
              evals=[(ctx["dvalid"], "valid")], callbacks=[Report()], verbose_eval=False)
    return None  # the last reported AUC is the objective


def warm_vs_fresh(trials: int, tmp: Path, heavy: bool = True) -> dict[str, Any]:
    """``heavy``: each worker's ``setup`` imports XGBoost and scikit-learn and builds the data (the
    real case); without it (``--quick``) a worker only imports tripwire."""
    out: dict[str, Any] = {"setup": "xgboost+sklearn+data" if heavy else "none"}
    for name, reuse in (("warm", True), ("fresh", False)):
        ex = LocalExecutor(reuse_workers=reuse)
        t0 = time.perf_counter()
        Tuner(train_noop, {"eta": Continuous(0.01, 1.0)}, strategy=RandomSearch(1), max_jobs=trials,
              max_parallel_jobs=2, seed=0, setup=bench_setup if heavy else None, executor=ex,
              journal=str(tmp / f"{name}.db")).fit()
        wall = time.perf_counter() - t0
        out[name] = {"wall_s": wall, "per_trial_s": wall / trials, "worker_starts": ex.worker_starts,
                     "mean_worker_startup_s": statistics.fmean(ex.startup_seconds)}
    out["trials"] = trials
    out["startup_ratio"] = out["fresh"]["per_trial_s"] / out["warm"]["per_trial_s"]
    # steady state: a warm worker's cost per trial once the pool is up, against a fresh worker's start-up
    steady = max(1e-6, (out["warm"]["wall_s"] - out["warm"]["mean_worker_startup_s"]) / trials)
    out["warm"]["steady_per_trial_s"] = steady
    out["startup_vs_steady_ratio"] = out["fresh"]["mean_worker_startup_s"] / steady
    return out


def real_run(n_random: int, workers: int, seed: int, tmp: Path, samplers: tuple[str, ...]) -> dict[str, Any]:
    """The xgboost family with real worker processes: wall time with ``workers`` parallel trials."""
    space = XGBoostTable.space
    out: dict[str, Any] = {"workers": workers, "seed": seed, "cpus": os.cpu_count()}
    t0 = time.perf_counter()
    rs = Tuner(train_xgb, space, objective="auc", strategy=RandomSearch(30), max_jobs=n_random,
               max_parallel_jobs=workers, seed=seed, setup=bench_setup, journal=str(tmp / f"real-rs{seed}.db")).fit()
    out["random_full"] = {"best": rs.best.value, "resource": rs.resource_used, "trials": len(rs.trials),
                          "wall_s": time.perf_counter() - t0, "trials_wall_s": _trials_wall(rs)}
    for sampler in samplers:
        t0 = time.perf_counter()
        hb = Tuner(train_xgb, space, objective="auc", strategy=Hyperband(1, 30, ETA, sampler=sampler),
                   max_jobs=100_000, max_total_resource=rs.resource_used // 3, max_parallel_jobs=workers, seed=seed,
                   setup=bench_setup, journal=str(tmp / f"real-hb-{sampler}{seed}.db")).fit()
        out[f"hyperband_{sampler}"] = {"best": hb.best.value, "resource": hb.resource_used, "trials": len(hb.trials),
                                       "wall_s": time.perf_counter() - t0, "trials_wall_s": _trials_wall(hb)}
    return out


def _trials_wall(result: Any) -> float:
    """From the first trial's start to the last trial's end (the worker pool's start-up excluded)."""
    return max(t.ended for t in result.trials) - min(t.started for t in result.trials)


def add_diagnostics(res: dict[str, Any], name: str, objective: Any, seeds: list[int], n_random: int, more: int,
                    workers: int, tmp: Path, optuna_ok: bool) -> None:
    """A family's learning-curve diagnostics and, when ``more`` > 0, its extra seeds (into ``res``)."""
    res["curves"] = curve_diagnostics(objective, seeds, n_random)
    print_diagnostics(name, res["curves"])
    if more > 0:
        res["more_seeds"] = more_seeds(objective, seeds, more, n_random, workers, tmp, optuna_ok)
        print_more(name, res["more_seeds"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run (< 40 s)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per family (default 20; quick 1)")
    ap.add_argument("--workers", type=int, default=4, help="parallel workers (default 4)")
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "tripwire-bench-xgb-curves-{rows}.pkl.gz"),
                    help="the XGBoost curve table (filled lazily, reused by later runs); 'none' to disable")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "tuning.json"))
    ap.add_argument("--docs", default=str(Path(__file__).parent.parent / "docs" / "benchmarks.md"),
                    help="markdown file whose tuning section a full run rewrites; 'none' to skip")
    ap.add_argument("--no-real", action="store_true", help="skip the run with real worker processes")
    ap.add_argument("--more-seeds-simulated", type=int, default=None,
                    help="further seeds for the fast methods on the simulated family (default 80; quick 1)")
    ap.add_argument("--more-seeds-xgboost", type=int, default=None,
                    help="further seeds for the fast methods on the xgboost family (default 20; quick 0)")
    args = ap.parse_args(argv)
    q = args.quick
    seeds = args.seeds or (1 if q else 20)
    rows = 1500 if q else 4000
    os.environ["TRIPWIRE_BENCH_ROWS"] = str(rows)
    tmp = Path(tempfile.mkdtemp(prefix="tripwire-bench-"))
    try:  # (the journals of every method and seed: removed after the run, also when it fails)
        return _run(args, seeds, rows, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args: argparse.Namespace, seeds: int, rows: int, tmp: Path) -> int:
    q = args.quick
    try:
        import optuna
        optuna_ok, optuna_version = True, optuna.__version__
    except ImportError:
        optuna_ok, optuna_version = False, None
    results: dict[str, Any] = {"quick": q, "python": sys.version.split()[0], "optuna": optuna_version,
                               "command": "python benchmarks/tuning.py" + (" --quick" if q else "")
                               + (f" --seeds {args.seeds}" if args.seeds else "")
                               + (f" --workers {args.workers}" if args.workers != 4 else "")
                               + (" --no-real" if args.no_real else "")
                               + (f" --more-seeds-simulated {args.more_seeds_simulated}"
                                  if args.more_seeds_simulated is not None else "")
                               + (f" --more-seeds-xgboost {args.more_seeds_xgboost}"
                                  if args.more_seeds_xgboost is not None else "")}
    if not optuna_ok:
        print("Optuna is not installed: the Optuna comparison and sampler='tpe' are skipped "
              "(pip install -r benchmarks/requirements-tuning.txt)")

    cache = None if args.cache == "none" else Path(args.cache.format(rows=rows))
    table = XGBoostTable(rows, cache)
    xg = compare(table, seeds, 10 if q else 30, args.workers, tmp, optuna_ok)
    xg["positives"] = table.positives
    xg["rows_in_data"] = rows
    xg["xgboost_rounds_trained_now"] = table.rounds_trained
    xg["xgboost_train_seconds_now"] = table.train_seconds
    table.save()
    results["xgboost"] = xg
    print_family(xg, "units of 5 rounds")
    more_x = args.more_seeds_xgboost if args.more_seeds_xgboost is not None else (0 if q else 20)
    add_diagnostics(xg, "xgboost", table, seeds, 10 if q else 30, more_x, args.workers, tmp, optuna_ok)
    xg["xgboost_rounds_trained_now"] = table.rounds_trained
    xg["xgboost_train_seconds_now"] = table.train_seconds
    table.save()
    print(f"  (data: {rows} rows, {table.positives:.1%} positives; {table.rounds_trained} XGBoost rounds trained "
          f"for this run in {table.train_seconds:.1f} s, the rest from the cache)")

    simulated = SimulatedCurves()
    sim = compare(simulated, seeds, 20 if q else 60, args.workers, tmp, optuna_ok)
    results["simulated"] = sim
    print_family(sim, "units")
    more_s = args.more_seeds_simulated if args.more_seeds_simulated is not None else (1 if q else 80)
    add_diagnostics(sim, "simulated", simulated, seeds, 20 if q else 60, more_s, args.workers, tmp, optuna_ok)

    dt = decision_time(10_000)
    results["decision_time"] = dt
    print(f"[scheduler] {dt['trials']} trials, {dt['decisions']} decisions: mean {dt['mean_us']:.2f} us, "
          f"p99 {dt['p99_us']:.2f} us, max {dt['max_us']:.1f} us, last 10% mean {dt['mean_us_last_10pct']:.2f} us "
          f"(goal < 1000 us)")

    wf = warm_vs_fresh(4 if q else 16, tmp, heavy=not q)
    results["warm_vs_fresh"] = wf
    what = "setup imports xgboost+sklearn and builds the data" if not q else "no setup (quick)"
    print(f"[workers] {wf['trials']} trials, 2 workers, {what}: "
          f"warm {wf['warm']['per_trial_s'] * 1e3:.0f} ms/trial, fresh process per trial "
          f"{wf['fresh']['per_trial_s'] * 1e3:.0f} ms/trial -> start-up ratio {wf['startup_ratio']:.1f}x "
          f"(pool start-up amortized over {wf['trials']} trials); a fresh worker's start-up "
          f"{wf['fresh']['mean_worker_startup_s'] * 1e3:.0f} ms vs {wf['warm']['steady_per_trial_s'] * 1e3:.0f} ms per "
          f"trial on a warm worker -> {wf['startup_vs_steady_ratio']:.0f}x")

    samplers = ("random", "tpe") if optuna_ok else ("random",)
    if q:  # real processes are exercised by the warm/fresh comparison above; the real run takes minutes
        print("[real processes, xgboost] skipped with --quick")
        return _write(results, args.out)
    if args.no_real:
        print("[real processes, xgboost] skipped with --no-real")
        return _finish(results, args)
    rr = real_run(30, args.workers, 0, tmp, samplers)
    results["real"] = rr
    parts = [f"random {rr['random_full']['best']:.4f} with {rr['random_full']['resource']} units in "
             f"{rr['random_full']['wall_s']:.1f} s ({rr['random_full']['trials_wall_s']:.1f} s from first trial start "
             f"to last trial end)"]
    for s in samplers:
        if f"hyperband_{s}" in rr:
            h = rr[f"hyperband_{s}"]
            parts.append(f"Hyperband sampler={s} {h['best']:.4f} with {h['resource']} units ({h['trials']} trials) "
                         f"in {h['wall_s']:.1f} s ({h['trials_wall_s']:.1f} s)")
    print(f"[real processes, xgboost, seed 0, {rr['workers']} workers on {rr['cpus']} CPUs] " + "; ".join(parts))
    return _finish(results, args)


def _finish(results: dict[str, Any], args: argparse.Namespace) -> int:
    if args.docs != "none":
        write_docs(results, Path(args.docs))
        print(f"wrote the tuning section of {args.docs}")
    return _write(results, args.out)


GOAL_NOTE = ("On the goals' definition: the verdicts read \"the same best objective\" and \"no worse\" "
             "literally, as a mean paired difference >= 0 over seeds (point estimate). With seed-to-seed noise "
             "of this size a 95% CI that holds 0 shows no difference either way; a statistical reading would "
             "need a non-inferiority margin delta (met when the CI's lower bound is above -delta), which the "
             "protocol does not set. Both figures are given above.")


def docs_section(results: dict[str, Any]) -> str:
    """The tuning section of ``docs/benchmarks.md`` (between ``<!-- tuning:start/end -->``)."""
    lines = ["<!-- tuning:start -->", "## Tuning quality and cost", "",
             f"`{results['command']}` (written by the script; Python {results['python']}, Optuna "
             f"{results['optuna']}). Protocol: evaluation.md section 3 and the docstring of `benchmarks/tuning.py`; "
             "every method runs on the same tabulated objective and simulated asynchronous workers. Differences "
             "are paired by seed (tripwire's random search and Hyperband share the seed, hence the same "
             "configuration sequence; Optuna's samplers draw their own); 95% CI: Student's t over seeds.", ""]
    for fam, unit in (("xgboost", "units of 5 boosting rounds"), ("simulated", "units")):
        res = results.get(fam)
        if res is None:
            continue
        rf = res["random_full"]
        lines += [f"### {fam} ({res['seeds']} seeds, max_resource {res['max_resource']} {unit}, eta "
                  f"{res['reduction_factor']}, {res['workers']} workers)", "",
                  f"Random search, full budget ({res['random_trials']} trials, {res['random_resource']} units): best "
                  f"{rf['mean']:.4f} +- {rf['sd']:.4f} (mean +- sd). Others at 1/3 of it ({res['third_budget']} units):",
                  "", "| method | best (mean) | minus random: mean +- se | 95% CI | median | >= random (> random) "
                  "| median resource to match random |", "|---|---|---|---|---|---|---|"]
        for m in METHODS:
            if m not in res:
                continue
            e, d = res[m], res[m]["minus_random"]
            frac = e.get("median_fraction_to_match_random")
            lines.append(f"| {m} | {e['mean']:.4f} | {d['mean']:+.4f} +- {d['se']:.4f} | [{d['ci95'][0]:+.4f}, "
                         f"{d['ci95'][1]:+.4f}] | {d['median']:+.4f} | {e['seeds_ge_random']}/{res['seeds']} "
                         f"({e['seeds_gt_random']}) | " + (f"{frac:.3f}" if frac is not None else "-") + " |")
        lines += ["", "Against Optuna's HyperbandPruner at equal resource (tripwire minus Optuna, paired by seed):", "",
                  "| tripwire | Optuna | mean +- se | 95% CI | median | tripwire >= Optuna |", "|---|---|---|---|---|---|"]
        for m in ("tripwire_hyperband", "tripwire_hyperband_tpe"):
            for o in ("optuna_random_hyperband", "optuna_tpe_hyperband"):
                x = res.get(m, {}).get(f"minus_{o}")
                if x:
                    lines.append(f"| {m} | {o} | {x['mean']:+.4f} +- {x['se']:.4f} | [{x['ci95'][0]:+.4f}, "
                                 f"{x['ci95'][1]:+.4f}] | {x['median']:+.4f} | {x['seeds_ge']}/{res['seeds']} |")
        lines += [""] + [f"- {v}" for v in verdicts(res)] + [""]
        dg = res.get("tripwire_hyperband", {}).get("diagnosis")
        if dg:
            lines += [_diagnosis_line(dg, res), ""]
        cur = res.get("curves")
        if cur:
            lines += [f"Learning curves of this family, on random search's configurations (Spearman: the value "
                      f"at a rung level against the final value; top-10% kept: the share of the final top 10% "
                      f"that rank in the top 1/{ETA} at that level, chance {cur['chance_top_kept']:.2f}):", "",
                      "| level | Spearman | top-10% kept |", "|---|---|---|"]
            lines += [f"| {lvl} | {v['spearman']:.2f} | {v['top10_kept']:.2f} |" for lvl, v in cur["levels"].items()]
            o = cur["one_epoch_minus_random"]
            lines += ["", f"1-Epoch baseline (Egele et al.: 1 unit for each of random search's configurations, the "
                      f"top {cur['one_epoch_keep']} to max_resource, 1/3 of random's resource): "
                      f"{o['mean']:+.4f} +- {o['se']:.4f} against random (mean +- se).", ""]
        more = res.get("more_seeds")
        if more:
            lines += [f"Further seeds {more['seeds'][0]}-{more['seeds'][1]} for the fast methods (mean +- se "
                      "[95% CI]): tripwire_hyperband minus random "
                      f"{_fmt(more['tripwire_hyperband_minus_random'])}; with rung_system='per_bracket' "
                      f"{_fmt(more['tripwire_hyperband_per_bracket_minus_random'])} (per_bracket minus shared "
                      f"{_fmt(more['per_bracket_minus_shared'])}); with rung_warmup='strict' "
                      f"{_fmt(more['tripwire_hyperband_strict_minus_random'])} (strict minus promote_best "
                      f"{_fmt(more['strict_minus_promote_best'])})"
                      + (f"; optuna_random_hyperband minus random "
                         f"{_fmt(more['optuna_random_hyperband_minus_random'])}; tripwire_hyperband minus "
                         f"optuna_random_hyperband {_fmt(more['tripwire_hyperband_minus_optuna_random_hyperband'])}"
                         if "optuna_random_hyperband_minus_random" in more else "") + ".", ""]
    lines += [GOAL_NOTE, ""]
    dt, wf = results.get("decision_time"), results.get("warm_vs_fresh")
    if dt:
        lines.append(f"Scheduler: {dt['trials']} trials, {dt['decisions']} decisions, mean {dt['mean_us']:.1f} us, "
                     f"p99 {dt['p99_us']:.1f} us per decision (goal < 1000 us).")
    if wf:
        lines.append(f"Workers ({wf['trials']} trials, 2 workers, setup: {wf['setup']}): start-up ratio "
                     f"{wf['startup_ratio']:.1f}x fresh process per trial vs warm workers.")
    lines.append("<!-- tuning:end -->")
    return "\n".join(lines)


def write_docs(results: dict[str, Any], path: Path) -> None:
    """Replace (or append) the tuning section of ``path``."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    section = docs_section(results)
    a, b = text.find("<!-- tuning:start -->"), text.find("<!-- tuning:end -->")
    if a >= 0 and b > a:
        text = text[:a] + section + text[b + len("<!-- tuning:end -->"):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)


def _write(results: dict[str, Any], path: str) -> int:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=float))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
