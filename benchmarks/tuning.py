"""Tuning benchmark (evaluation protocol section 3): tripwire Hyperband vs full-budget random search
vs Optuna's HyperbandPruner, the scheduler's time per decision at 10,000 trials, warm worker reuse vs
a fresh process per trial, and a real XGBoost tuning run.

    python benchmarks/tuning.py            # full: 20 seeds, Optuna if importable
    python benchmarks/tuning.py --quick    # smoke run (< 60 s)

Prints the figures and writes ``benchmarks/results/tuning.json``.

Simulated objective: a learning-curve model (Syne Tune's "simulator backend" idea). A
configuration ``c`` has a final value ``f(c)`` and a speed ``k(c)``; its value after ``r`` resource
units is ``f(c) - (f(c) - 0.5) * exp(-k(c) * r)`` plus Gaussian evaluation noise (sd 0.002). Low
learning rates learn slowly but end higher, so curves cross and early stopping can be wrong. Each
resource unit costs one tick of a simulated clock; tripwire runs on ``--workers`` simulated workers
(asynchronous), Optuna sequentially (its documented use of the pruner).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tripwire.tune import (Continuous, Hyperband, HyperbandPlan, HyperbandScheduler, Integer, LocalExecutor,
                           RandomSearch, Space, Tuner)

R_SIM, ETA = 81, 3
SPACE = Space({"lr": Continuous(1e-4, 1.0, scale="log"), "depth": Integer(1, 10),
               "subsample": Continuous(0.5, 1.0), "reg": Continuous(1e-3, 10.0, scale="log")})


# ---- simulated learning curves -----------------------------------------------------------------
def final_value(p: dict[str, Any]) -> float:
    lr = math.log10(p["lr"])
    return (0.95 - 0.06 * (lr + 1.7) ** 2 - 0.004 * (p["depth"] - 6) ** 2 - 0.12 * (1 - p["subsample"]) ** 2
            - 0.01 * math.log10(p["reg"]) ** 2)


def speed(p: dict[str, Any]) -> float:
    return 0.12 * math.sqrt(p["lr"] / 0.02) + 0.01


def curve_value(p: dict[str, Any], r: int, noise: float) -> float:
    f = final_value(p)
    return f - (f - 0.5) * math.exp(-speed(p) * r) + noise


class Noise:
    """Deterministic evaluation noise per (seed, trial, step)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, trial: int, step: int) -> float:
        return float(np.random.default_rng([self.seed, trial, step, 99]).normal(0, 0.002))


def run_random(seed: int, n_trials: int) -> list[tuple[int, float]]:
    """Full-budget random search: anytime curve [(resource, best)]."""
    noise, best, used, out = Noise(seed), -math.inf, 0, []
    for n in range(n_trials):
        p = SPACE.sample(seed, n)
        used += R_SIM
        best = max(best, curve_value(p, R_SIM, noise(n, R_SIM)))
        out.append((used, best))
    return out


def run_tripwire(seed: int, budget: int, workers: int, timings: list[int] | None = None,
                 max_trials: int | None = None) -> list[tuple[int, float]]:
    """Asynchronous Hyperband on ``workers`` simulated workers until ``budget`` resource is spent."""
    sched = HyperbandScheduler(HyperbandPlan(1, R_SIM, ETA), "max", seed)
    noise = Noise(seed)
    slots: list[list[Any] | None] = [None] * workers  # [number, params, step]
    nxt, used, best, out = 0, 0, -math.inf, []
    while True:
        for w in range(workers):
            if slots[w] is None and used < budget and (max_trials is None or nxt < max_trials):
                slots[w] = [nxt, SPACE.sample(seed, nxt), 0]
                nxt += 1
        if all(s is None for s in slots):
            return out
        for w in range(workers):
            s = slots[w]
            if s is None:
                continue
            if used >= budget:  # budget spent by another worker this tick: stop without a step
                sched.end(s[0])
                if s[2]:
                    best = max(best, curve_value(s[1], s[2], noise(s[0], s[2])))
                    out.append((used, best))
                slots[w] = None
                continue
            s[2] += 1
            used += 1
            v = curve_value(s[1], s[2], noise(s[0], s[2]))
            t0 = time.perf_counter_ns()
            d = sched.on_report(s[0], s[2], v)
            if timings is not None:
                timings.append(time.perf_counter_ns() - t0)
            if d.stop or used >= budget:
                sched.end(s[0])
                best = max(best, v)
                out.append((used, best))
                slots[w] = None


def run_optuna(seed: int, budget: int) -> list[tuple[int, float]] | None:
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    noise = Noise(seed)
    state = {"used": 0, "best": -math.inf, "out": []}

    def objective(trial: Any) -> float:
        p = {"depth": trial.suggest_int("depth", 1, 10), "lr": trial.suggest_float("lr", 1e-4, 1.0, log=True),
             "reg": trial.suggest_float("reg", 1e-3, 10.0, log=True),
             "subsample": trial.suggest_float("subsample", 0.5, 1.0)}
        v = 0.0
        for r in range(1, R_SIM + 1):
            state["used"] += 1
            v = curve_value(p, r, noise(trial.number, r))
            trial.report(v, r)
            if state["used"] >= budget or trial.should_prune():
                break
        state["best"] = max(state["best"], v)
        state["out"].append((state["used"], state["best"]))
        if state["used"] >= budget:
            trial.study.stop()
        return v

    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed),
                                pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=R_SIM,
                                                                      reduction_factor=ETA))
    study.optimize(objective, n_trials=100000)
    return state["out"]


def best_at(curve: list[tuple[int, float]], resource: int) -> float:
    best = -math.inf
    for used, b in curve:
        if used > resource:
            break
        best = b
    return best


def resource_to_reach(curve: list[tuple[int, float]], target: float) -> int | None:
    for used, b in curve:
        if b >= target:
            return used
    return None


def simulated_comparison(seeds: int, n_random: int, workers: int) -> dict[str, Any]:
    rs_budget = n_random * R_SIM
    budget = rs_budget // 3
    rows = []
    for seed in range(seeds):
        rs = run_random(seed, n_random)
        rs_best = rs[-1][1]
        hb_full = run_tripwire(seed, rs_budget, workers)
        hb = run_tripwire(seed, budget, workers)
        op = run_optuna(seed, budget)
        reach = resource_to_reach(hb_full, rs_best)
        rows.append({"seed": seed, "random_best": rs_best, "random_resource": rs_budget,
                     "tripwire_best_at_third": hb[-1][1], "tripwire_resource": hb[-1][0],
                     "tripwire_resource_to_match_random": reach,
                     "optuna_best_at_third": None if op is None else op[-1][1],
                     "optuna_resource": None if op is None else op[-1][0],
                     "tripwire_curve": hb_full[:: max(1, len(hb_full) // 40)]})
    ratios = [r["tripwire_resource_to_match_random"] / rs_budget if r["tripwire_resource_to_match_random"]
              else math.inf for r in rows]
    out: dict[str, Any] = {
        "seeds": seeds, "workers": workers, "max_resource": R_SIM, "reduction_factor": ETA,
        "random_trials": n_random, "random_resource": rs_budget, "third_budget": budget,
        "mean_random_best": statistics.fmean(r["random_best"] for r in rows),
        "mean_tripwire_best_at_third": statistics.fmean(r["tripwire_best_at_third"] for r in rows),
        "seeds_tripwire_at_third_ge_random": sum(r["tripwire_best_at_third"] >= r["random_best"] for r in rows),
        "median_resource_fraction_to_match_random": statistics.median(ratios),
        "rows": rows,
    }
    if rows[0]["optuna_best_at_third"] is not None:
        out["mean_optuna_best_at_third"] = statistics.fmean(r["optuna_best_at_third"] for r in rows)
        out["seeds_tripwire_ge_optuna"] = sum(r["tripwire_best_at_third"] >= r["optuna_best_at_third"]
                                              for r in rows)
    return out


def decision_time(n_trials: int) -> dict[str, Any]:
    """Time of ``HyperbandScheduler.on_report`` over a job of ``n_trials`` trials."""
    timings: list[int] = []
    curve = run_tripwire(12345, n_trials * R_SIM, 8, timings, max_trials=n_trials)
    sched_trials = len(curve)
    arr = np.array(timings) / 1e3
    tail = arr[-max(1, len(arr) // 10):]
    return {"trials": sched_trials, "decisions": int(arr.size), "mean_us": float(arr.mean()),
            "p99_us": float(np.percentile(arr, 99)), "max_us": float(arr.max()),
            "mean_us_last_10pct": float(tail.mean())}


# ---- real processes ----------------------------------------------------------------------------
def bench_setup() -> dict[str, Any]:
    """Per-worker data load: import XGBoost and scikit-learn, make an imbalanced set (~11% positives)."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    n = int(os.environ.get("TRIPWIRE_BENCH_ROWS", "4000"))
    X, y = make_classification(n_samples=n, n_features=20, n_informative=8, weights=[0.89], flip_y=0.03,
                               random_state=0)
    cut = n * 3 // 4
    return {"dtrain": xgb.DMatrix(X[:cut], label=y[:cut]), "dvalid": xgb.DMatrix(X[cut:], label=y[cut:]),
            "positives": float(y.mean())}


def train_noop(params: dict[str, Any], trial: Any) -> float:
    trial.report(step=1, value=float(params["eta"]))
    return float(params["eta"])


def train_xgb(params: dict[str, Any], trial: Any) -> float:
    import xgboost as xgb

    ctx = trial.context

    class Report(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            return bool(trial.report(step=epoch + 1, value=float(evals_log["valid"]["auc"][-1])))

    xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "nthread": 1, "eta": params["eta"],
               "max_depth": params["max_depth"], "subsample": params["subsample"],
               "min_child_weight": params["min_child_weight"]}, ctx["dtrain"], num_boost_round=trial.max_resource,
              evals=[(ctx["dvalid"], "valid")], callbacks=[Report()], verbose_eval=False)
    return None  # the last reported AUC is the objective


XGB_SPACE = {"eta": Continuous(0.01, 0.5, scale="log"), "max_depth": Integer(1, 8),
             "subsample": Continuous(0.5, 1.0), "min_child_weight": Continuous(1.0, 20.0, scale="log")}


def warm_vs_fresh(trials: int, tmp: Path) -> dict[str, Any]:
    out = {}
    for name, reuse in (("warm", True), ("fresh", False)):
        ex = LocalExecutor(reuse_workers=reuse)
        t0 = time.perf_counter()
        Tuner(train_noop, {"eta": Continuous(0.01, 1.0)}, strategy=RandomSearch(1), max_jobs=trials,
              max_parallel_jobs=2, seed=0, setup=bench_setup, executor=ex, journal=str(tmp / f"{name}.db")).fit()
        wall = time.perf_counter() - t0
        out[name] = {"wall_s": wall, "per_trial_s": wall / trials, "worker_starts": ex.worker_starts,
                     "mean_worker_startup_s": statistics.fmean(ex.startup_seconds)}
    out["trials"] = trials
    out["startup_ratio"] = out["fresh"]["per_trial_s"] / out["warm"]["per_trial_s"]
    return out


def real_xgboost(seeds: int, n_random: int, max_rounds: int, tmp: Path) -> dict[str, Any]:
    rows = []
    for seed in range(seeds):
        t0 = time.perf_counter()
        rs = Tuner(train_xgb, XGB_SPACE, objective="auc", strategy=RandomSearch(max_rounds), max_jobs=n_random,
                   max_parallel_jobs=2, seed=seed, setup=bench_setup, journal=str(tmp / f"rs{seed}.db")).fit()
        t_rs = time.perf_counter() - t0
        t0 = time.perf_counter()
        budget = rs.resource_used // 3
        hb = Tuner(train_xgb, XGB_SPACE, objective="auc", strategy=Hyperband(1, max_rounds, ETA),
                   max_jobs=10 * n_random, max_total_resource=budget, max_parallel_jobs=2, seed=seed,
                   setup=bench_setup, journal=str(tmp / f"hb{seed}.db")).fit()
        t_hb = time.perf_counter() - t0
        rows.append({"seed": seed, "random_best_auc": rs.best.value, "random_resource": rs.resource_used,
                     "random_trials": len(rs.trials), "random_wall_s": t_rs,
                     "tripwire_best_auc": hb.best.value, "tripwire_resource": hb.resource_used,
                     "tripwire_trials": len(hb.trials), "tripwire_wall_s": t_hb})
    return {"max_rounds": max_rounds, "rows": rows,
            "mean_random_best_auc": statistics.fmean(r["random_best_auc"] for r in rows),
            "mean_tripwire_best_auc": statistics.fmean(r["tripwire_best_auc"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run, well under a minute")
    ap.add_argument("--workers", type=int, default=4, help="simulated parallel workers (default 4)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "tuning.json"))
    args = ap.parse_args(argv)
    q = args.quick
    if q:
        os.environ["TRIPWIRE_BENCH_ROWS"] = "1000"
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"tripwire-bench-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"quick": q, "python": sys.version.split()[0]}

    t0 = time.perf_counter()
    sim = simulated_comparison(seeds=3 if q else 20, n_random=30 if q else 60, workers=args.workers)
    results["simulated"] = sim
    print(f"[simulated curves] {sim['seeds']} seeds, max_resource={R_SIM}, eta={ETA}, "
          f"{sim['workers']} async workers ({time.perf_counter() - t0:.1f} s)")
    print(f"  random search, full budget ({sim['random_trials']} trials x {R_SIM} = {sim['random_resource']}): "
          f"mean best {sim['mean_random_best']:.4f}")
    print(f"  tripwire Hyperband at 1/3 of that ({sim['third_budget']}): mean best "
          f"{sim['mean_tripwire_best_at_third']:.4f}; >= random in {sim['seeds_tripwire_at_third_ge_random']}/"
          f"{sim['seeds']} seeds; median resource to match random's best: "
          f"{sim['median_resource_fraction_to_match_random']:.1%} of random's")
    if "mean_optuna_best_at_third" in sim:
        print(f"  Optuna RandomSampler + HyperbandPruner at the same {sim['third_budget']}: mean best "
              f"{sim['mean_optuna_best_at_third']:.4f}; tripwire >= Optuna in {sim['seeds_tripwire_ge_optuna']}/"
              f"{sim['seeds']} seeds")
    else:
        print("  Optuna: not installed, skipped (pip install -r benchmarks/requirements-tuning.txt)")

    dt = decision_time(10_000)
    results["decision_time"] = dt
    print(f"[scheduler] {dt['trials']} trials, {dt['decisions']} decisions: mean {dt['mean_us']:.2f} us, "
          f"p99 {dt['p99_us']:.2f} us, max {dt['max_us']:.1f} us, last 10% mean {dt['mean_us_last_10pct']:.2f} us "
          f"(goal < 1000 us)")

    wf = warm_vs_fresh(4 if q else 24, tmp)
    results["warm_vs_fresh"] = wf
    print(f"[workers] {wf['trials']} trials, 2 workers, setup imports xgboost+sklearn and builds the data: "
          f"warm {wf['warm']['per_trial_s'] * 1e3:.0f} ms/trial, fresh process per trial "
          f"{wf['fresh']['per_trial_s'] * 1e3:.0f} ms/trial -> start-up ratio {wf['startup_ratio']:.1f}x")

    xg = real_xgboost(seeds=1 if q else 3, n_random=4 if q else 30, max_rounds=9 if q else 81, tmp=tmp)
    results["xgboost"] = xg
    for r in xg["rows"]:
        print(f"[xgboost AUC, seed {r['seed']}] random: best {r['random_best_auc']:.4f} with {r['random_resource']} "
              f"rounds ({r['random_trials']} trials, {r['random_wall_s']:.1f} s); tripwire Hyperband: best "
              f"{r['tripwire_best_auc']:.4f} with {r['tripwire_resource']} rounds ({r['tripwire_trials']} trials, "
              f"{r['tripwire_wall_s']:.1f} s)")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1, default=float))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
