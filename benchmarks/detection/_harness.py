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
    """What a program run saw: the first finding per rule (train step, seconds after the start) and
    the traces its onset is computed from (see :func:`onset`)."""

    planned_steps: int
    steps_run: int = 0
    seconds: float = 0.0
    first: dict[str, tuple[int, float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: seconds after the start at which each train step began (index: step)
    step_seconds: list[float] = field(default_factory=list)
    #: the training loss of each train step (NaN where it was not finite)
    losses: list[float] = field(default_factory=list)
    #: validation losses: (train step after which it was measured, value, seconds)
    val_losses: list[tuple[int, float, float]] = field(default_factory=list)
    #: first train step with a non-finite value (input, loss, output, gradient or weight)
    nonfinite_step: int | None = None
    #: first train step at which a fault planted during training acted (injection, LR spike)
    planted_step: int | None = None

    def note(self, findings: Any, step: int, t0: float) -> None:
        for f in findings:
            if f.kind == "error":
                self.errors.append(f"{f.rule}: {f.message}")
            elif f.rule not in self.first:
                self.first[f.rule] = (int(step), time.perf_counter() - t0)

    def began(self, step: int, seconds: float) -> None:
        """Record the start of train ``step`` (steps are counted from 0, one call per step)."""
        while len(self.step_seconds) < step:
            self.step_seconds.append(seconds)
        if len(self.step_seconds) == step:
            self.step_seconds.append(seconds)

    def saw_loss(self, step: int, value: float, finite: bool = True) -> None:
        while len(self.losses) < step:
            self.losses.append(math.nan)
        if len(self.losses) == step:
            self.losses.append(float(value))
        if (not finite or not math.isfinite(float(value))) and self.nonfinite_step is None:
            self.nonfinite_step = int(step)

    def seconds_at(self, step: int) -> float:
        if not self.step_seconds:
            return 0.0
        return self.step_seconds[min(max(step, 0), len(self.step_seconds) - 1)]


#: How a fault program's onset (the step where the fault shows) is found, from the run's own records.
ONSETS: dict[str, str] = {
    "start": "step 0: the fault is present from the first step (bad init, bad data, bad settings)",
    "nonfinite": "the first train step with a non-finite value in the inputs, loss, outputs, gradients or weights",
    "planted": "the first train step at which the fault planted during training acted (injected batch, LR spike)",
    "best_val": "the train step of the lowest validation loss of the whole run (the run goes to its planned end)",
    "first_swing": "the first train step whose loss rose by more than the initial loss over the step before "
                   "(l_t - l_(t-1) > l_0; the run goes to its planned end)",
}

#: Onsets that need the whole run's history: such fault runs are not stopped at detection.
FULL_RUN_ONSETS = ("best_val", "first_swing")


def onset(kind: str, r: Result) -> tuple[int | None, float | None]:
    """``(step, seconds after the start)`` where the fault shows in run ``r`` (None: never seen)."""
    step: int | None
    if kind == "start":
        step = 0
    elif kind == "nonfinite":
        step = r.nonfinite_step
    elif kind == "planted":
        step = r.planted_step
    elif kind == "best_val":
        finite = [v for v in r.val_losses if math.isfinite(v[1])]
        if not finite:
            return None, None
        best = min(finite, key=lambda v: v[1])  # the first of equal minima
        return best[0], best[2]
    elif kind == "first_swing":
        step = None
        if r.losses and math.isfinite(r.losses[0]):
            l0 = r.losses[0]
            for t in range(1, len(r.losses)):
                a, b = r.losses[t - 1], r.losses[t]
                if math.isfinite(a) and math.isfinite(b) and b - a > l0:
                    step = t
                    break
    else:
        raise ValueError(f"onset: unknown kind {kind!r}; known: {', '.join(ONSETS)}")
    return (None, None) if step is None else (step, r.seconds_at(step))


def rules_config(rules: Any = None) -> list[Any]:
    return list(SUITE_RULES if rules is None else rules)


# ------------------------------------------------------------------------------------------- data
def seed_all(seed: int) -> None:
    """Seed torch and numpy's global generator (the programs' models and data order)."""
    import torch

    torch.manual_seed(seed)
    np.random.seed(seed)


def split(X: np.ndarray, y: np.ndarray, seed: int, standardise: bool = True, frac: float = 0.75) -> tuple[np.ndarray, ...]:
    """Shuffled train/validation split (``frac`` for training), standardised with the training statistics."""
    idx = np.random.default_rng(seed).permutation(len(X))
    X, y = X[idx].astype(np.float32), y[idx]
    k = int(len(X) * frac)
    if standardise:
        m, s = X[:k].mean(0), X[:k].std(0) + 1e-8
        X = (X - m) / s
    return X[:k], y[:k], X[k:], y[k:]


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


def digits_relabelled(seed: int, src: int, dst: int) -> tuple[np.ndarray, ...]:
    """:func:`digits` with every training ``src`` labelled ``dst`` (validation labels untouched)."""
    Xtr, ytr, Xva, yva = digits(seed)
    y = ytr.copy()
    y[y == src] = dst
    return Xtr, y, Xva, yva


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
    params: Any = None,
    rules: Any = None,
    save_interval: int = 10,
    momentum: float = 0.9,
    clip: float | None = None,
    weight_decay: float = 0.0,
    amp: bool = False,
) -> Result:
    """Train ``model`` for ``steps`` steps, feeding a Session; ``schedule(step)`` multiplies the
    learning rate (a value above 1 is a planted LR spike); ``inject(step, x, y)`` may replace a batch
    (a planted fault when it returns new tensors); ``amp``: bfloat16 autocast (mixed precision)."""
    import torch
    from torch import nn

    import _harness

    torch.set_num_threads(1)
    Xtr, ytr, Xva, yva = data
    regression = loss in ("mse", "huber")
    Xt, yt = torch.tensor(Xtr), torch.tensor(ytr if not regression else ytr.astype(np.float32))
    Xv, yv = torch.tensor(Xva), torch.tensor(yva if not regression else yva.astype(np.float32))
    opt_params = list(model.parameters()) if params is None else params
    opt: Any = None
    if opt_params:
        if optimizer == "adam":
            opt = torch.optim.Adam(opt_params, lr=lr, weight_decay=weight_decay)
        elif optimizer == "adamw":
            opt = torch.optim.AdamW(opt_params, lr=lr, weight_decay=weight_decay)
        elif optimizer == "rmsprop":
            opt = torch.optim.RMSprop(opt_params, lr=lr, weight_decay=weight_decay)
        elif optimizer == "sgd":
            opt = torch.optim.SGD(opt_params, lr=lr, momentum=momentum, weight_decay=weight_decay)
        else:
            raise ValueError(f"optimizer: {optimizer!r}; accepted: adam, adamw, rmsprop, sgd")
    weight = None if class_weight is None else torch.tensor(class_weight, dtype=torch.float32)

    def loss_fn(out: Any, target: Any) -> Any:
        out = out.float()
        if loss == "ce":
            return nn.functional.cross_entropy(out, target, weight=weight)
        if loss == "mse":
            return nn.functional.mse_loss(out.squeeze(-1), target)
        if loss == "huber":
            return nn.functional.huber_loss(out.squeeze(-1), target)
        if loss == "nll_log":  # log of probabilities computed by hand (log(0) when they underflow)
            p = torch.softmax(out, dim=1)
            return -torch.log(p[torch.arange(len(target)), target]).mean()
        raise ValueError(loss)

    # every validation record saved (the recommended config for overfit/overtraining/class rules)
    session = tripwire.Session(write=False, rules=rules_config(rules), collections=list(BASE_COLLECTIONS),
                               save={"interval": save_interval, "modes": {"eval": {"interval": 1}}})
    named = [(n, p) for n, p in model.named_parameters()]
    capture: dict[str, Any] = {"on": False, "acts": [], "relu": [], "inputs": []}

    def hook(name: str, module: Any) -> Callable[..., None]:
        def fn(mod: Any, args: Any, out: Any) -> None:
            if not capture["on"]:
                return
            if isinstance(out, tuple):  # recurrent layers: (output, hidden state)
                out = out[0]
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
    session.set_planned_steps(steps)  # what Lightning's and Keras's callbacks tell the session
    gen = torch.Generator().manual_seed(seed)
    result = Result(planned_steps=steps)
    stop_when = _harness.STOP_WHEN
    t0 = time.perf_counter()
    n = len(Xt)
    perm = torch.randperm(n, generator=gen)
    pos = 0
    eval_step = 0

    def finite(*tensors: Any) -> bool:
        return all(bool(torch.isfinite(t).all()) for t in tensors if t is not None)

    step = 0
    for step in range(steps):
        result.began(step, time.perf_counter() - t0)
        if pos + batch > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        idx = perm[pos : pos + batch]
        pos += batch
        xb, yb = Xt[idx], yt[idx]
        if inject is not None:
            xi, yi = inject(step, xb, yb)
            if (xi is not xb or yi is not yb) and result.planted_step is None:
                result.planted_step = step
            xb, yb = xi, yi
        if schedule is not None and opt is not None:
            factor = schedule(step)
            if factor > 1.0 and result.planted_step is None:
                result.planted_step = step  # an LR spike above the configured rate
            for g in opt.param_groups:
                g["lr"] = lr * factor
        plan = session.begin_step("train", step)
        capture["on"] = bool(plan) and (plan.wants("activations") or plan.wants("relu_outputs") or plan.wants("activation_inputs"))
        capture["acts"], capture["relu"], capture["inputs"] = [], [], []
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            out = model(xb)
        lval = loss_fn(out, yb)
        if opt is not None and zero_grad:
            opt.zero_grad()
        lval.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        before = [p.detach().clone() for _, p in named] if plan and plan.wants("optimizer") else None
        ok = finite(xb, out, *(p.grad for _, p in named))
        if opt is not None:
            opt.step()
        ok = ok and finite(*(p for _, p in named))
        result.saw_loss(step, float(lval.detach()), ok)
        if plan.keeps("losses"):  # every step: kept on non-save steps, written with the next save
            plan.add("loss", lval.detach(), "losses")
        if plan:
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
                plan.add(name, t.float(), "activations")
            for name, t in capture["relu"]:
                plan.add(name, t.float(), "relu_outputs")
            for name, t in capture["inputs"]:
                plan.add(name, t.float(), "activation_inputs")
        capture["on"] = False
        decision = session.end_step()
        result.note(decision.findings, step, t0)
        if (step + 1) % eval_every == 0:
            model.eval()
            with torch.no_grad():
                losses = []
                chunks = list(range(0, len(Xv), 128))
                for k, start in enumerate(chunks):
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                        xo = model(Xv[start : start + 128]).float()
                    losses.append(float(loss_fn(xo, yv[start : start + 128])) * len(xo))
                    eval_step += 1
                    p = session.begin_step("eval", eval_step)
                    if not regression:
                        p.add("labels", yv[start : start + 128], "labels")
                        p.add("predictions", xo, "predictions")
                    if k == len(chunks) - 1:
                        p.add("val_loss", sum(losses) / len(Xv), "losses")
                    d = session.end_step()
                    result.note(d.findings, step, t0)
                result.val_losses.append((step, sum(losses) / len(Xv), time.perf_counter() - t0))
        if stop_when and stop_when <= set(result.first):
            break
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
