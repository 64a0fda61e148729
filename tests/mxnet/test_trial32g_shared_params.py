"""Trial 32g F4: a parameter shared between two blocks (``nn.Dense(16, params=other.collect_params())``)
was stored twice, under both block names (``proj.weight`` and ``proj2.weight``, two identical series),
and the duplicate counted as one more layer in the first/last-layer order that ``vanishing_gradient``
and ``exploding_gradient`` read. Each ``Parameter`` object is now stored once, under its first name in
the order Gluon lists the parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

import tripwire

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn


class _Tied(gluon.Block):
    """``proj`` applied twice, the second time through ``proj2``, which shares its parameters."""

    def __init__(self) -> None:
        super().__init__()
        with self.name_scope():
            self.proj = nn.Dense(8, in_units=8)
            self.proj2 = nn.Dense(8, in_units=8, params=self.proj.collect_params())
            self.head = nn.Dense(2, in_units=8)

    def forward(self, x: Any) -> Any:
        return self.head(self.proj2(nd.relu(self.proj(x))))


def test_a_shared_parameter_is_stored_once_under_its_first_name(tmp_path: Path) -> None:
    mx.random.seed(0)
    net = _Tied()
    net.initialize(mx.init.Xavier())
    names = list(net._collect_params_with_prefix())
    assert names[:4] == ["proj.weight", "proj.bias", "proj2.weight", "proj2.bias"]  # (Gluon lists both)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    hook = TripwireHook(out_dir=str(tmp_path), save_interval=1, rules=["exploding_tensor"],
                        collections=["weights", "biases", "gradients", "optimizer", "losses"])
    hook.register_block(net)
    hook.register_trainer(trainer)
    rng = np.random.default_rng(0)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    grads = []
    with hook:
        for _ in range(2):
            x = nd.array(rng.normal(size=(6, 8)).astype(np.float32))
            y = nd.array(rng.integers(0, 2, size=6).astype(np.float32))
            hook.begin_step("train")
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            grads.append(np.linalg.norm(net.proj.weight.grad().asnumpy() / 6))
            hook.end_step(loss=loss)
            trainer.step(6)
    run = tripwire.open_run(tmp_path)
    names = run.tensor_names()
    assert not [n for n in names if "proj2" in n], names
    assert {"proj.weight", "proj.bias", "gradients/proj.weight", "update_ratio/proj.weight"} <= set(names)
    # its gradient is the shared parameter's, summed over both uses, stored once
    np.testing.assert_allclose(run.series("gradients/proj.weight", "l2")[1], grads, rtol=1e-5)
