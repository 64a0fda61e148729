"""Trial 27h, finding 1: MXNet stored the batch-SUM gradient (Gluon's ``backward`` of a per-sample loss
array sums over its elements; ``trainer.step(batch_size)`` divides only inside the update), so the
gradient rules judged MXNet runs batch-size times harsher than the same training in PyTorch: a healthy
full-batch run (1437 samples, SGD lr 0.01) was stopped by ``exploding_gradient`` (norm 1432 against
max_norm 1000; PyTorch's: 1.0). The hook now stores the gradient of the mean loss, the one the update
applies: ``param.grad()`` divided by the number of loss elements (or ``end_step(batch_size=N)``)."""

from __future__ import annotations

import logging
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn

ROOT = Path(__file__).parents[2]


# ------------------------------------------------------------------------------- the trial's problem
def _digits() -> tuple[np.ndarray, np.ndarray]:
    """The trial's data: sklearn digits standardised, permuted with seed 0, the first 1437 rows."""
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    idx = np.random.default_rng(0).permutation(len(x))
    x, y = x[idx], y[idx]
    x = ((x - x.mean(0)) / (x.std(0) + 1e-6)).astype(np.float32)
    return x[:1437], y[:1437].astype(np.int64)


def _init(bias: float = 0.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """The trial's 64-32-10 initial weights (glorot uniform, seed 42), as (out, in) matrices."""
    rng = np.random.default_rng(42)

    def glorot(i: int, o: int) -> np.ndarray:
        lim = np.sqrt(6.0 / (i + o))
        return rng.uniform(-lim, lim, size=(i, o)).astype(np.float32)

    w1, w2 = glorot(64, 32), glorot(32, 10)
    return [(w1.T.copy(), np.full(32, bias, np.float32)), (w2.T.copy(), np.zeros(10, np.float32))]


def _mxnet_net(layers: list[tuple[np.ndarray, np.ndarray]], ctx: Any = None) -> gluon.Block:
    net = nn.Sequential()
    for i, (w, _) in enumerate(layers):
        net.add(nn.Dense(w.shape[0], activation="relu" if i < len(layers) - 1 else None, in_units=w.shape[1]))
    net.initialize(mx.init.Xavier(), ctx=ctx)
    for block, (w, b) in zip(net, layers):
        block.weight.set_data(nd.array(w))
        block.bias.set_data(nd.array(b))
    return net


def _mean_ce_grads(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                   y: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The gradient of the MEAN softmax cross-entropy of a ReLU MLP, in float64 (what PyTorch's
    ``F.cross_entropy(...).backward()`` gives)."""
    acts, h = [x.astype(np.float64)], x.astype(np.float64)
    pre = []
    for i, (w, b) in enumerate(layers):
        z = h @ w.astype(np.float64).T + b
        pre.append(z)
        h = np.maximum(z, 0) if i < len(layers) - 1 else z
        acts.append(h)
    p = np.exp(h - h.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    d = p.copy()
    d[np.arange(len(y)), y] -= 1
    d /= len(y)
    grads = []
    for i in range(len(layers) - 1, -1, -1):
        grads.append((d.T @ acts[i], d.sum(0)))
        if i:
            d = (d @ layers[i][0].astype(np.float64)) * (pre[i - 1] > 0)
    return grads[::-1]


def _stored(hook: Any, name: str, step: int = 0) -> float:
    """The l2 norm a hook (or handler) stored for ``name`` at train ``step``."""
    value = hook.history.value(name, "l2", step)
    assert value is not None, name
    return float(value)


def _check_step0(hook: Any, grads: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """The gradients stored at step 0 have the norms of ``grads`` (within 1e-4 relative)."""
    for i, (gw, gb) in enumerate(grads):
        assert _stored(hook, f"gradients/{i}.weight") == pytest.approx(np.linalg.norm(gw), rel=1e-4)
        assert _stored(hook, f"gradients/{i}.bias") == pytest.approx(np.linalg.norm(gb), rel=1e-4)


# ------------------------------------------------------------------------------------ the finding
def test_the_reports_healthy_full_batch_run_is_not_stopped_and_stores_the_mean_loss_gradient(tmp_path) -> None:
    # trial 27h's repro_mxnet_grad_scale.sh: full-batch SGD (1437 samples, lr 0.01), default rules
    x, y = _digits()
    layers = _init()
    net = _mxnet_net(layers)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
    hook = TripwireHook(rules=["default"], actions=["log", "stop_training"], out_dir=str(tmp_path / "run"))
    hook.register_block(net)
    hook.session.set_planned_steps(40)
    X, Y = nd.array(x), nd.array(y)
    with hook:
        for _ in range(40):
            hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(X), Y)
            loss.backward()
            hook.end_step(loss=loss)
            if hook.should_stop:
                break
            trainer.step(X.shape[0])
    assert hook.findings == [] and hook.stopped_by is None, [str(f) for f in hook.findings]
    # the gradient PyTorch stores for the same step (1.111 at step 0; it was 1596.9 = 1437 x that)
    _check_step0(hook, _mean_ce_grads(layers, x, y))
    assert _stored(hook, "gradients/0.weight") == pytest.approx(1.111, abs=1e-3)
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def _torch_python() -> Path | None:
    """The main environment's python, where torch is (the MXNet environment has no torch)."""
    python = Path(os.environ.get("TRIPWIRE_TORCH_PYTHON", ROOT / ".venv" / "bin" / "python"))
    if not python.exists():
        return None
    probe = subprocess.run([str(python), "-c", "import torch, tripwire"], capture_output=True, timeout=300)
    return python if probe.returncode == 0 else None


_TORCH_LOOP = """
import sys
import numpy as np, torch, torch.nn.functional as F
import tripwire

data = np.load(sys.argv[1])
x, y = torch.tensor(data["x"]), torch.tensor(data["y"])
batch, steps = int(data["batch"]), int(data["steps"])
net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
with torch.no_grad():
    for layer, i in ((net[0], 0), (net[2], 1)):
        layer.weight.copy_(torch.tensor(data[f"w{i}"])); layer.bias.copy_(torch.tensor(data[f"b{i}"]))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
session = tripwire.Session(out_dir=sys.argv[2], collections=["losses", "gradients"], save_interval=1)
for step in range(steps):
    a = (step * batch) % len(x)
    loss = F.cross_entropy(net(x[a:a + batch]), y[a:a + batch])
    opt.zero_grad(); loss.backward()
    plan = session.begin_step("train", step)
    plan.add("loss", loss.detach(), "losses")
    for name, p in net.named_parameters():
        plan.add("gradients/" + name.replace("2.", "1."), p.grad, "gradients")
    session.end_step()
    opt.step()
session.close()
"""


@pytest.mark.parametrize("batch", [32, 1437])
def test_the_same_training_in_pytorch_stores_the_same_gradient_norms(tmp_path, batch) -> None:
    python = _torch_python()
    if python is None:
        pytest.skip("no python with torch and tripwire (the main environment: .venv, or $TRIPWIRE_TORCH_PYTHON)")
    x, y = _digits()
    layers = _init()
    steps = 6
    np.savez(tmp_path / "data.npz", x=x, y=y, batch=batch, steps=steps,
             **{f"w{i}": w for i, (w, _) in enumerate(layers)}, **{f"b{i}": b for i, (_, b) in enumerate(layers)})
    torch_run = subprocess.run([str(python), "-c", textwrap.dedent(_TORCH_LOOP), str(tmp_path / "data.npz"),
                                str(tmp_path / "torch")], capture_output=True, text=True, timeout=600)
    assert torch_run.returncode == 0, torch_run.stderr[-3000:]

    net = _mxnet_net(layers)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    hook = TripwireHook(out_dir=str(tmp_path / "mxnet"), collections=["losses", "gradients"], save_interval=1)
    hook.register_block(net)
    with hook:
        for step in range(steps):
            a = (step * batch) % len(x)
            xb, yb = nd.array(x[a:a + batch]), nd.array(y[a:a + batch])
            hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(xb), yb)
            loss.backward()
            hook.end_step(loss=loss)
            trainer.step(xb.shape[0])
    torch_h, mx_h = tripwire.open_run(tmp_path / "torch"), tripwire.open_run(tmp_path / "mxnet")
    np.testing.assert_allclose(mx_h.series("loss")[1], torch_h.series("loss")[1], rtol=1e-5)
    for name in ("gradients/0.weight", "gradients/0.bias", "gradients/1.weight", "gradients/1.bias"):
        for red in ("l2", "abs_mean", "abs_max", "std"):
            t_steps, t_vals = torch_h.series(name, red)
            m_steps, m_vals = mx_h.series(name, red)
            assert m_steps.tolist() == t_steps.tolist() == list(range(steps))
            np.testing.assert_allclose(m_vals, t_vals, rtol=1e-4, err_msg=f"{name} {red}")


# ------------------------------------------------------------------------- what backward summed over
def _batch(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    x, y = _digits()
    return x[:n], y[:n]


def _hook(tmp_path: Path, name: str = "run") -> TripwireHook:
    return TripwireHook(out_dir=str(tmp_path / name), collections=["losses", "gradients"], save_interval=1)


def test_a_scalar_loss_is_a_mean_already_and_is_not_divided(tmp_path) -> None:
    x, y = _batch()
    layers = _init()
    net = _mxnet_net(layers)
    hook = _hook(tmp_path)
    hook.register_block(net)
    hook.begin_step("train")
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(nd.array(x)), nd.array(y)).mean()
    loss.backward()
    hook.end_step(loss=loss)  # trainer.step(1) would follow
    _check_step0(hook, _mean_ce_grads(layers, x, y))
    hook.close()


def test_a_registered_loss_block_counts_the_samples_and_batch_size_overrides(tmp_path) -> None:
    x, y = _batch()
    layers = _init()
    net = _mxnet_net(layers)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = _hook(tmp_path)
    hook.register_block(net)
    hook.register_loss(loss_fn)
    for batch_size in (None, 2 * len(x)):
        hook.begin_step("train")
        with autograd.record():
            loss = loss_fn(net(nd.array(x)), nd.array(y))
        loss.backward()
        hook.end_step(batch_size=batch_size)  # loss=None: the loss block's outputs
    grads = _mean_ce_grads(layers, x, y)
    for step, scale in ((0, 1.0), (1, 0.5)):
        assert _stored(hook, "gradients/0.weight", step) == pytest.approx(scale * np.linalg.norm(grads[0][0]), rel=1e-4)
    hook.close()


def test_gradients_accumulated_with_grad_req_add_are_the_mean_over_the_micro_batches(tmp_path) -> None:
    # two micro-batches of 20, one optimizer step: the loss block saw both calls (40 losses)
    x, y = _batch(40)
    layers = _init()
    net = _mxnet_net(layers)
    net.collect_params().setattr("grad_req", "add")
    for p in net.collect_params().values():
        p.zero_grad()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = _hook(tmp_path)
    hook.register_block(net)
    hook.register_loss(loss_fn)
    hook.begin_step("train")
    for a in (0, 20):
        with autograd.record():
            loss = loss_fn(net(nd.array(x[a:a + 20])), nd.array(y[a:a + 20]))
        loss.backward()
    hook.end_step()
    _check_step0(hook, _mean_ce_grads(layers, x, y))  # the gradient of the 40 samples' mean loss
    assert hook.history.value("loss", "raw", 0) == pytest.approx(
        float(loss_fn(net(nd.array(x)), nd.array(y)).mean().asscalar()), rel=1e-5)
    hook.close()


def test_several_devices_store_the_gradient_of_the_mean_over_all_their_samples(tmp_path) -> None:
    x, y = _batch(40)
    layers = _init()
    ctx = [mx.cpu(0), mx.cpu(1)]
    net = _mxnet_net(layers, ctx=ctx)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = _hook(tmp_path)
    hook.register_block(net)
    xs = gluon.utils.split_and_load(nd.array(x), ctx)
    ys = gluon.utils.split_and_load(nd.array(y), ctx)
    hook.begin_step("train")
    with autograd.record():
        losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
    autograd.backward(losses)
    hook.end_step(loss=losses)
    _check_step0(hook, _mean_ce_grads(layers, x, y))
    hook.close()


def test_no_loss_array_stores_the_gradient_as_backward_left_it_and_says_so_once(tmp_path, caplog) -> None:
    x, y = _batch()
    layers = _init()
    net = _mxnet_net(layers)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    hook = _hook(tmp_path)
    hook.register_block(net)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        for loss_given in (None, 2.5):
            hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(nd.array(x)), nd.array(y))
            loss.backward()
            hook.end_step(loss=loss_given)
    said = [r.getMessage() for r in caplog.records if "backward summed over" in r.getMessage()]
    assert len(said) == 1 and "no loss and no registered loss block" in said[0] and "batch_size=" in said[0]
    grad = net[0].weight.grad().asnumpy().astype(np.float64)  # the batch sum
    assert _stored(hook, "gradients/0.weight", 1) == pytest.approx(np.linalg.norm(grad), rel=1e-6)
    hook.close()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "32"])
def test_batch_size_must_be_a_positive_integer(tmp_path, bad) -> None:
    hook = _hook(tmp_path)
    hook.begin_step("train")
    with pytest.raises(ConfigError, match=rf"end_step.batch_size: got {bad!r}; accepted: None .* or an integer >= 1"):
        hook.end_step(loss=1.0, batch_size=bad)
    hook.close()


def test_the_step_context_manager_passes_batch_size(tmp_path) -> None:
    x, y = _batch()
    layers = _init()
    net = _mxnet_net(layers)
    hook = _hook(tmp_path)
    hook.register_block(net)
    with hook.step("train") as s:
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(nd.array(x)), nd.array(y))
        loss.backward()
        s.loss, s.batch_size = loss.sum(), len(x)  # a summed loss (one element): divided by batch_size
    _check_step0(hook, _mean_ce_grads(layers, x, y))
    hook.close()


def test_the_estimator_handler_stores_the_gradient_the_update_applies(tmp_path) -> None:
    from mxnet.gluon.contrib.estimator import Estimator

    x, y = _batch(100)
    layers = _init()
    net = _mxnet_net(layers)
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y.astype(np.float32)), batch_size=50, shuffle=False)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer)
    est.logger.setLevel(logging.WARNING)
    handler = TripwireHandler(out_dir=str(tmp_path / "run"), collections=["losses", "gradients"], save_interval=1)
    est.fit(data, epochs=1, event_handlers=[handler])
    _check_step0(handler, _mean_ce_grads(layers, x[:50], y[:50]))
    assert handler.findings == []
