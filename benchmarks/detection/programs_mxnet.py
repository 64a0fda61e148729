"""MXNet (Gluon) detection programs: a hand-written Gluon loop with ``TripwireHook``. MXNet 1.9.1
needs numpy < 2, so ``run.py`` runs these programs in the MXNet environment (``.venv-mxnet``) in a
subprocess and merges their runs into the same tables; MXNet is imported only when one runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

import _harness
from _frameworks import SAVE, cleanup, rules_with, tmp_dir
from _harness import BASE_COLLECTIONS, Result, digits
from programs import program

STEPS = 2000


def mx_loop(build: Callable[[Any], Any], data: tuple[np.ndarray, ...], *, seed: int, steps: int, lr: float,
            optimizer: str = "adam", loss: str = "ce", batch: int = 32, eval_every: int = 50,
            init: Callable[[Any, Any], None] | None = None) -> Result:
    """Train the Gluon net ``build(gluon)`` with ``TripwireHook`` (every suite rule, saving every 10
    steps and every validation record) and record the traces the onset is computed from."""
    from tripwire.integrations.mxnet import TripwireHook  # before mxnet: numpy shim

    import mxnet as mx
    from mxnet import autograd, gluon

    mx.random.seed(seed)
    np.random.seed(seed)
    Xtr, ytr, Xva, yva = data
    regression = loss == "mse"
    net = build(gluon)
    net.initialize(mx.init.Xavier())
    net(mx.nd.array(Xtr[:2]))  # materialise deferred shapes
    if init is not None:
        init(net, mx)
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": lr})
    loss_fn = gluon.loss.L2Loss() if regression else gluon.loss.SoftmaxCrossEntropyLoss()
    out_dir = tmp_dir("mxnet")
    hook = TripwireHook(out_dir=out_dir, rules=rules_with(), collections=list(BASE_COLLECTIONS), save=SAVE)
    hook.register_block(net)
    hook.session.set_planned_steps(steps)  # MXNet does not know the planned length: the user tells it
    result = Result(planned_steps=steps)
    stop_when = _harness.STOP_WHEN
    rng = np.random.default_rng(seed)
    Xv, yv = mx.nd.array(Xva), mx.nd.array(yva)
    perm, pos, eval_step = rng.permutation(len(Xtr)), 0, 0
    t0 = time.perf_counter()
    step = 0
    for step in range(steps):
        result.began(step, time.perf_counter() - t0)
        if pos + batch > len(Xtr):
            perm, pos = rng.permutation(len(Xtr)), 0
        idx = perm[pos : pos + batch]
        pos += batch
        x, y = mx.nd.array(Xtr[idx]), mx.nd.array(ytr[idx])
        hook.begin_step("train", step)
        with autograd.record():
            out = net(x)
            lv = loss_fn(out.reshape(-1) if regression else out, y)
        lv.backward()
        decision = hook.end_step(loss=lv)
        result.note(decision.findings, step, t0)
        trainer.step(batch)
        value = float(lv.mean().asscalar())
        params_ok = all(bool(np.isfinite(p.data().asnumpy()).all()) for p in net.collect_params().values())
        result.saw_loss(step, value, params_ok and bool(np.isfinite(out.asnumpy()).all()))
        if (step + 1) % eval_every == 0:
            total = 0.0
            chunks = list(range(0, len(Xva), 128))
            for k, start in enumerate(chunks):
                xo = net(Xv[start : start + 128])
                yo = yv[start : start + 128]
                total += float(loss_fn(xo.reshape(-1) if regression else xo, yo).sum().asscalar())
                eval_step += 1
                plan = hook.begin_step("eval", eval_step)
                if not regression:
                    plan.add("labels", yo.asnumpy().astype(np.int64), "labels")
                    plan.add("predictions", xo.asnumpy(), "predictions")
                if k == len(chunks) - 1:
                    plan.add("val_loss", total / len(Xva), "losses")
                d = hook.end_step()
                result.note(d.findings, step, t0)
            result.val_losses.append((step, total / len(Xva), time.perf_counter() - t0))
        if stop_when and stop_when <= set(result.first):
            break
    result.steps_run = step + 1
    result.seconds = time.perf_counter() - t0
    hook.close()
    cleanup(out_dir)
    return result


def _mlp(sizes: list[int], act: str = "relu") -> Callable[[Any], Any]:
    def build(gluon: Any) -> Any:
        net = gluon.nn.Sequential()
        for i, n in enumerate(sizes):
            net.add(gluon.nn.Dense(n, activation=act if i < len(sizes) - 1 else None))
        return net
    return build


def _bias(value: float) -> Callable[[Any, Any], None]:
    def init(net: Any, mx: Any) -> None:
        for name, p in net.collect_params().items():
            if name.endswith("bias") and p.shape[0] != 10:  # hidden layers only
                p.set_data(mx.nd.full(p.shape, value))
    return init


def _regression(seed: int) -> tuple[np.ndarray, ...]:
    Xtr, _, Xva, _ = digits(seed)
    w = np.random.default_rng(seed).normal(size=64).astype(np.float32)
    t_tr, t_va = Xtr @ w, Xva @ w
    m, sd = t_tr.mean(), t_tr.std()
    return Xtr, (t_tr - m) / sd, Xva, (t_va - m) / sd


@program("mxnet_nan_lr_huge", "mxnet", ("exploding_tensor",), "Gluon linear regression, SGD lr 1.0: diverges to inf/NaN",
         onset="nonfinite")
def mxnet_nan(seed: int) -> Result:
    return mx_loop(_mlp([1]), _regression(seed), seed=seed, steps=STEPS, lr=1.0, optimizer="sgd", loss="mse")


@program("mxnet_dead_relu_negative_bias", "mxnet", ("dead_relu",), "Gluon ReLU MLP whose hidden biases start at -10")
def mxnet_dead_relu(seed: int) -> Result:
    return mx_loop(_mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-3, init=_bias(-10.0))


@program("mxnet_loss_lr_tiny", "mxnet", ("loss_not_decreasing",), "Gluon MLP, Adam learning rate 1e-7")
def mxnet_lr_tiny(seed: int) -> Result:
    return mx_loop(_mlp([64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-7)


@program("mxnet_vanishing_deep_sigmoid", "mxnet", ("vanishing_gradient",), "Gluon 12-layer sigmoid net")
def mxnet_vanishing(seed: int) -> Result:
    return mx_loop(_mlp([32] * 11 + [10], act="sigmoid"), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("mxnet_healthy_mlp", "mxnet", (), "the fixed twin: Gluon ReLU MLP, Adam 1e-3, biases at 0")
def mxnet_healthy(seed: int) -> Result:
    return mx_loop(_mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("mxnet_healthy_regression", "mxnet", (), "the fixed twin: Gluon linear regression, SGD lr 0.01")
def mxnet_healthy_regression(seed: int) -> Result:
    return mx_loop(_mlp([1]), _regression(seed), seed=seed, steps=STEPS, lr=0.01, optimizer="sgd", loss="mse")


@program("mxnet_healthy_sigmoid_shallow", "mxnet", (), "the fixed twin: Gluon 2-hidden-layer sigmoid net, Adam 3e-3")
def mxnet_healthy_sigmoid(seed: int) -> Result:
    return mx_loop(_mlp([64, 64, 10], act="sigmoid"), digits(seed), seed=seed, steps=STEPS, lr=3e-3)

