"""Training functions the tuner tests run in worker processes (importable by module name)."""

from __future__ import annotations

import math
import os
import time
from typing import Any


def curve(params: dict[str, Any], step: int) -> float:
    """A learning curve: rises with ``step`` toward a ceiling that peaks at x = 0.3."""
    x = float(params["x"])
    return (1 - math.exp(-step / 4)) * (1 - (x - 0.3) ** 2)


def train_curve(params: dict[str, Any], trial: Any) -> float:
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = curve(params, step)
        if trial.report(step=step, value=value):
            break
    return value


def train_dict(params: dict[str, Any], trial: Any) -> dict[str, float]:
    value = train_curve(params, trial)
    return {"validation:auc": value, "train:loss": 1 - value}


def train_sometimes_fails(params: dict[str, Any], trial: Any) -> float:
    if trial.number % 3 == 1:
        raise RuntimeError(f"boom in trial {trial.number}")
    return train_curve(params, trial)


def train_dies(params: dict[str, Any], trial: Any) -> float:
    if trial.number == 1:
        os._exit(13)
    return train_curve(params, trial)


def train_hangs(params: dict[str, Any], trial: Any) -> float:
    if trial.number == 0:
        time.sleep(60)
    return train_curve(params, trial)


def train_slow(params: dict[str, Any], trial: Any) -> float:
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        time.sleep(0.02)
        value = curve(params, step)
        if trial.report(step=step, value=value):
            break
    return value


def train_duplicate_step(params: dict[str, Any], trial: Any) -> float:
    trial.report(step=1, value=0.5)
    trial.report(step=1, value=0.6)
    return 0.6


def setup_data() -> dict[str, Any]:
    return {"pid": os.getpid(), "loaded": time.time()}


def train_with_context(params: dict[str, Any], trial: Any) -> dict[str, float]:
    value = train_curve(params, trial)
    return {"objective": value, "worker_pid": float(trial.context["pid"]), "own_pid": float(os.getpid())}


def train_xgboost(params: dict[str, Any], trial: Any) -> dict[str, float]:
    """A real ``xgb.train`` loop; a custom TrainingCallback reports AUC every boosting round."""
    import xgboost as xgb
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=600, n_features=10, weights=[0.89], random_state=0)
    dtrain = xgb.DMatrix(X[:400], label=y[:400])
    dvalid = xgb.DMatrix(X[400:], label=y[400:])

    class Report(xgb.callback.TrainingCallback):
        def after_iteration(self, model: Any, epoch: int, evals_log: dict[str, Any]) -> bool:
            return bool(trial.report(step=epoch + 1, value=float(evals_log["valid"]["auc"][-1])))

    booster = xgb.train({"objective": "binary:logistic", "eval_metric": "auc", "eta": params["eta"],
                         "max_depth": params["max_depth"], "nthread": 1}, dtrain,
                        num_boost_round=trial.max_resource, evals=[(dvalid, "valid")],
                        callbacks=[Report()], verbose_eval=False)
    from sklearn.metrics import roc_auc_score

    auc = float(roc_auc_score(y[400:], booster.predict(dvalid)))
    return {"validation:auc": auc, "rounds": float(booster.num_boosted_rounds())}


def train_sleeps(params: dict[str, Any], trial: Any) -> float:
    """Writes its worker's pid into ``$TRIPWIRE_TUNE_PIDS`` and hangs inside one long step."""
    open(os.path.join(os.environ["TRIPWIRE_TUNE_PIDS"], str(os.getpid())), "w").close()
    time.sleep(1000)
    return 0.0


def train_same_error(params: dict[str, Any], trial: Any) -> float:
    """Every trial fails with the same error (a typo certain to repeat, as a callback reports it)."""
    from tripwire import ConfigError

    raise ConfigError("trial_metric: 'val_los' was not logged by validation; logged: val_loss")


def train_same_value_error(params: dict[str, Any], trial: Any) -> float:
    """Every trial fails with the same ValueError: maybe one configuration's failure, not certain to
    repeat for the next one, so fail fast leaves the job alone."""
    raise ValueError("this configuration diverged")


def train_first_succeeds(params: dict[str, Any], trial: Any) -> float:
    if trial.number == 0:
        return train_curve(params, trial)
    raise ValueError("the same error every time")


def train_rule_stopped(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    """Trial 0 is stopped by a (pretend) tripwire rule, recorded on a copy of the trial as a callback
    that deep-copies its arguments would; it returns the best value of the job."""
    import copy

    value = train_curve(params, trial) if trial.number else 0.0
    if trial.number == 0:
        trial.report(step=1, value=10.0)
        copy.deepcopy(trial).rule_stopped("oscillating_loss", "loss oscillates: 12 sign changes in 20 steps " * 20)
        return {"objective": 10.0, "note": "diverged"}
    return {"objective": value, "note": "ok"}


def train_extra_metrics(params: dict[str, Any], trial: Any) -> dict[str, Any]:
    import numpy as np

    trial.report(step=1, value=1.0)
    return {"objective": 1.0, "note": "hello", "n": 3, "flag": True, "none": None, "np_int": np.int64(7),
            "x": 0.5, "pair": [1, 2]}


def train_nan(params: dict[str, Any], trial: Any) -> float:
    """A diverged configuration: the objective is NaN."""
    trial.report(step=1, value=0.4)
    return float("nan")


def train_nan_forms(params: dict[str, Any], trial: Any) -> Any:
    """The objective is NaN as the float returned, the dict's key, or the last report (train returns
    None); ``x > 0.75`` returns -inf, a valid (worst) value; the others return a finite value."""
    x = float(params["x"])
    if x > 0.75:
        return -math.inf
    if x > 0.5:
        return {"objective": float("nan"), "loss": 1.0}
    if x > 0.25:
        trial.report(step=1, value=float("nan"))
        return None
    return x


def train_misused(params: dict[str, Any], trial: Any) -> float:
    """A trial misused the same way in every trial (a bug certain to repeat)."""
    kind = params["kind"]
    if kind == "duplicate":
        trial.report(step=1, value=0.5)
        trial.report(step=1, value=0.6)
    elif kind == "value_str":
        trial.report(step=1, value="0.5")
    elif kind == "beyond_max":
        trial.report(step=trial.max_resource + 1, value=0.5)
    return 0.5


def train_ignores_stop(params: dict[str, Any], trial: Any) -> float:
    """Reports every step up to ``max_resource`` whatever ``report`` answers."""
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = curve(params, step)
        trial.report(step=step, value=value)
    return value


def train_attempt(params: dict[str, Any], trial: Any) -> dict[str, float]:
    return {"objective": train_curve(params, trial), "attempt": trial.attempt}


def train_broken_or_healthy(params: dict[str, Any], trial: Any) -> float | None:
    """The shape of a fresh user's repro (trial 13b): a ``broken`` run reports a great value at step 1,
    then a tripwire rule stops it; every ``healthy`` run reports the same, lower values."""
    broken = params["kind"] == "broken"
    value = None
    for step in range(1, trial.max_resource + 1):
        value = (0.9 if broken else 0.5) + 0.001 * step
        stop = trial.report(step=step, value=value)
        if broken:
            trial.rule_stopped("nan_or_inf", "loss is NaN at step 1")
            return None
        if stop:
            break
    return value


def train_five_steps(params: dict[str, Any], trial: Any) -> float:
    """Reports 5 steps whatever ``trial.max_resource`` is (None with ``RandomSearch()``)."""
    value = 0.0
    for step in range(1, 6):
        value = curve(params, step)
        if trial.report(step=step, value=value):
            break
    return value


def _square(x: float) -> float:
    return x * x


def train_with_child_processes(params: dict[str, Any], trial: Any) -> float:
    """Starts processes of its own, as a DataLoader with ``num_workers`` or a ``ddp_spawn`` fit does."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        value = pool.submit(_square, float(params["x"])).result()
    trial.report(step=1, value=value)
    return value


def train_constant(params: dict[str, Any], trial: Any) -> float:
    """Any space: the objective is 0."""
    return 0.0


def _child() -> None:
    pass


def train_starts_a_process(params: dict[str, Any], trial: Any) -> float:
    """Starts a child process, as a DataLoader with num_workers does (a daemonic worker cannot)."""
    import multiprocessing

    child = multiprocessing.get_context("fork").Process(target=_child)
    child.start()
    child.join()
    return float(child.exitcode == 0)


#: The objective of trial ``i`` in trial 26b's tests (``{"i": Integer(0, 7)}`` on a grid): 0 is the best.
VALUE_OF_I = {0: 10.0, 1: 1.0, 2: 0.5, 3: 0.5, 4: 0.5, 5: 0.5, 6: 0.5, 7: 0.5}


def train_value_of_i(params: dict[str, Any], trial: Any) -> float:
    """Reports ``VALUE_OF_I[i]`` at steps 1..``trial.max_resource`` (stops when told) and returns it."""
    value = VALUE_OF_I[int(params["i"])]
    for step in range(1, (trial.max_resource or 1) + 1):
        if trial.report(step=step, value=value):
            break
    return value


def train_some_end_early(params: dict[str, Any], trial: Any) -> float:
    """x < 0.3: a value of 0.1 at step 1, then the trial's own early end (below any min_resource
    above 1); else ``1 + x + 0.1 / step`` at each step up to max_resource (trial 37e)."""
    value = 0.0
    for step in range(1, trial.max_resource + 1):
        value = 0.1 if params["x"] < 0.3 else 1 + params["x"] + 0.1 / step
        if trial.report(step=step, value=value):
            break
        if params["x"] < 0.3:
            trial.note_early_end("my own early stopping")
            break
    return value
