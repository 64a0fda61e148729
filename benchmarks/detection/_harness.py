"""Shared pieces of the detection programs: data, the result record, and a hand-written torch
training loop that feeds a :class:`tripwire.Session` the same tensors the Lightning callback offers
(losses, gradients, weights, update ratios, layer outputs, ReLU outputs, tanh/sigmoid/ReLU inputs,
inputs, labels and predictions)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tripwire
from tripwire.rules._registry import _BUILTIN_MODULES

#: Rules evaluated on every program: every built-in rule except those that need a second run
#: (similar_across_runs) or minutes of silence (stalled_training); both are covered by tests.
SUITE_RULES: tuple[str, ...] = tuple(r for r in _BUILTIN_MODULES if r not in ("similar_across_runs", "stalled_training"))

#: Set by the runner for fault programs: stop a run once every expected rule fired (the rest of
#: the run cannot change recall or time to detection). Healthy controls always run to the end.
STOP_WHEN: set[str] | None = None

#: What the user enables besides what the rules ask for.
BASE_COLLECTIONS = ["losses", "metrics", "activations"]


@dataclass
class Result:
    """What a program run saw: first finding per rule (train step, seconds after the start)."""

    planned_steps: int
    steps_run: int = 0
    seconds: float = 0.0
    first: dict[str, tuple[int, float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    fault_step: int = 0
    fault_second: float = 0.0

    def note(self, findings: Any, step: int, t0: float) -> None:
        for f in findings:
            if f.kind == "error":
                self.errors.append(f"{f.rule}: {f.message}")
            elif f.rule not in self.first:
                self.first[f.rule] = (int(step), time.perf_counter() - t0)


def rules_config(rules: Any = None) -> list[Any]:
    return list(SUITE_RULES if rules is None else rules)


# ------------------------------------------------------------------------------------------- data
def digits(seed: int, scale: str = "unit") -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(X))
    X, y = X[idx].astype(np.float32), y[idx].astype(np.int64)
    if scale == "unit":
        X = (X - 8.0) / 8.0 * 1.0
    elif scale == "pixels":
        X = X * 16.0  # 0..255 like raw 8-bit images
    n = 1400
    return X[:n], y[:n], X[n:], y[n:]


def tabular(seed: int, n: int = 2000, features: int = 20, weights: Any = None, flip_y: float = 0.01,
            class_sep: float = 1.0, classes: int = 2, informative: int = 8) -> tuple[np.ndarray, ...]:
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=features, n_informative=informative, n_redundant=2,
                               n_classes=classes, weights=weights, flip_y=flip_y, class_sep=class_sep, random_state=seed)
    X = ((X - X.mean(0)) / X.std(0)).astype(np.float32)
    k = int(n * 0.75)
    return X[:k], y[:k].astype(np.int64), X[k:], y[k:].astype(np.int64)


# ------------------------------------------------------------------------------------ torch loop
def torch_loop(
    model: Any,
    data: tuple[np.ndarray, ...],
    *,
    seed: int,
    steps: int,
    lr: float = 1e-3,
    optimizer: str = "adam",
    loss: str = "ce",
    batch: int = 32,
    eval_every: int = 50,
    zero_grad: bool = True,
    schedule: Callable[[int], float] | None = None,
    class_weight: Any = None,
    inject: Callable[[int, Any, Any], tuple[Any, Any]] | None = None,
    fault_step: int = 0,
    params: Any = None,
    rules: Any = None,
    save_interval: int = 10,
    momentum: float = 0.9,
    clip: float | None = None,
    fault_at_best_val: bool = False,
) -> Result:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    Xtr, ytr, Xva, yva = data
    Xt, yt = torch.tensor(Xtr), torch.tensor(ytr if loss != "mse" else ytr.astype(np.float32))
    Xv, yv = torch.tensor(Xva), torch.tensor(yva if loss != "mse" else yva.astype(np.float32))
    opt_params = list(model.parameters()) if params is None else params
    if optimizer == "adam":
        opt = torch.optim.Adam(opt_params, lr=lr) if opt_params else None
    else:
        opt = torch.optim.SGD(opt_params, lr=lr, momentum=momentum) if opt_params else None
    weight = None if class_weight is None else torch.tensor(class_weight, dtype=torch.float32)

    def loss_fn(out: Any, target: Any) -> Any:
        if loss == "ce":
            return nn.functional.cross_entropy(out, target, weight=weight)
        if loss == "mse":
            return nn.functional.mse_loss(out.squeeze(-1), target)
        if loss == "nll_log":  # log of probabilities computed by hand (log(0) when they underflow)
            p = torch.softmax(out, dim=1)
            return -torch.log(p[torch.arange(len(target)), target]).mean()
        raise ValueError(loss)

    # every validation record saved (the recommended config for overfit/overtraining/class rules)
    session = tripwire.Session(write=False, rules=rules_config(rules), collections=list(BASE_COLLECTIONS),
                               save={"interval": save_interval, "modes": {"eval": {"interval": 1}}})
    named = [(n, p) for n, p in model.named_parameters()]
    capture = {"on": False, "acts": [], "relu": [], "inputs": []}

    def hook(name: str, module: Any) -> Callable[..., None]:
        def fn(mod: Any, args: Any, out: Any) -> None:
            if not capture["on"]:
                return
            capture["acts"].append((f"{name}/output", out.detach()))
            if isinstance(mod, nn.ReLU):
                capture["relu"].append((f"{name}/output", out.detach()))
            if isinstance(mod, (nn.ReLU, nn.Tanh, nn.Sigmoid)):
                capture["inputs"].append((f"{name}/input", args[0].detach()))
        return fn

    for name, sub in model.named_modules():
        if name and not list(sub.children()):
            sub.register_forward_hook(hook(name, sub))

    from tripwire.integrations._torch import TorchBackend  # the integration's reduction backend

    session.backend = TorchBackend()
    gen = torch.Generator().manual_seed(seed)
    result = Result(planned_steps=steps, fault_step=fault_step)
    t0 = time.perf_counter()
    n = len(Xt)
    perm = torch.randperm(n, generator=gen)
    pos = 0
    eval_step = 0
    val_history: list[tuple[float, int, float]] = []
    for step in range(steps):
        if pos + batch > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        idx = perm[pos : pos + batch]
        pos += batch
        xb, yb = Xt[idx], yt[idx]
        if inject is not None:
            xb, yb = inject(step, xb, yb)
        if step == fault_step:
            result.fault_second = time.perf_counter() - t0
        if schedule is not None and opt is not None:
            for g in opt.param_groups:
                g["lr"] = lr * schedule(step)
        plan = session.begin_step("train", step)
        capture["on"] = bool(plan) and (plan.wants("activations") or plan.wants("relu_outputs") or plan.wants("activation_inputs"))
        capture["acts"], capture["relu"], capture["inputs"] = [], [], []
        model.train()
        out = model(xb)
        lval = loss_fn(out, yb)
        if opt is not None and zero_grad:
            opt.zero_grad()
        lval.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        before = [p.detach().clone() for _, p in named] if plan and plan.wants("optimizer") else None
        if opt is not None:
            opt.step()
        if plan:
            plan.add("loss", lval.detach(), "losses")
            if plan.wants("inputs"):
                plan.add("inputs/x", xb, "inputs")
            if plan.wants("gradients"):
                plan.add_many([(f"gradients/{n_}", p.grad) for n_, p in named if p.grad is not None], "gradients")
            if plan.wants("weights"):
                plan.add_many([(n_, p.detach()) for n_, p in named if not n_.endswith("bias")], "weights")
            if plan.wants("biases"):
                plan.add_many([(n_, p.detach()) for n_, p in named if n_.endswith("bias")], "biases")
            if before is not None:
                for (n_, p), b in zip(named, before):
                    denom = float(b.norm())
                    ratio = float((p.detach() - b).norm()) / denom if denom > 0 else math.inf
                    plan.add(f"update_ratio/{n_}", ratio, "optimizer")
            for name, t in capture["acts"]:
                plan.add(name, t, "activations")
            for name, t in capture["relu"]:
                plan.add(name, t, "relu_outputs")
            for name, t in capture["inputs"]:
                plan.add(name, t, "activation_inputs")
        capture["on"] = False
        decision = session.end_step()
        result.note(decision.findings, step, t0)
        if (step + 1) % eval_every == 0:
            model.eval()
            with torch.no_grad():
                losses = []
                chunks = list(range(0, len(Xv), 128))
                for k, start in enumerate(chunks):
                    xo = model(Xv[start : start + 128])
                    losses.append(float(loss_fn(xo, yv[start : start + 128])) * len(xo))
                    eval_step += 1
                    p = session.begin_step("eval", eval_step)
                    if loss != "mse":
                        p.add("labels", yv[start : start + 128], "labels")
                        p.add("predictions", xo, "predictions")
                    if k == len(chunks) - 1:
                        p.add("val_loss", sum(losses) / len(Xv), "losses")
                    d = session.end_step()
                    result.note(d.findings, step, t0)
                val_history.append((sum(losses) / len(Xv), step, time.perf_counter() - t0))
        if STOP_WHEN and STOP_WHEN <= set(result.first):
            break
    if fault_at_best_val and val_history:
        # overfitting shows once the validation loss stops improving
        _, result.fault_step, result.fault_second = min(val_history)
    result.steps_run = step + 1
    result.seconds = time.perf_counter() - t0
    session.close()
    return result


def mlp(sizes: list[int], act: str = "relu", bn: bool = False, init: Callable[[Any], None] | None = None,
        rescale: float | None = None) -> Any:
    from torch import nn

    from collections import OrderedDict

    layers: list[tuple[str, Any]] = []
    if rescale is not None:
        layers.append(("rescaling", Rescaling(rescale)))
    for i in range(len(sizes) - 1):
        layers.append((f"fc{i + 1}", nn.Linear(sizes[i], sizes[i + 1])))
        if i < len(sizes) - 2:
            if bn:
                layers.append((f"bn{i + 1}", nn.BatchNorm1d(sizes[i + 1])))
            layers.append((f"act{i + 1}", {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}[act]()))
    model = nn.Sequential(OrderedDict(layers))
    if init is not None:
        for m in model.modules():
            if isinstance(m, nn.Linear):
                init(m)
    return model


def _rescaling_cls() -> Any:
    from torch import nn

    class _Rescaling(nn.Module):
        def __init__(self, factor: float) -> None:
            super().__init__()
            self.factor = factor

        def forward(self, x: Any) -> Any:
            return x * self.factor

    return _Rescaling


def Rescaling(factor: float) -> Any:  # noqa: N802 - a layer, named like Keras's
    return _rescaling_cls()(factor)
