"""MXNetBackend counts values equal to a comparison's threshold as numpy does (session 30: MXNet's
scalar operators parse their scalar from text, one unit in the last place off for some float32
values, so ``fraction_gt:T`` counted a value equal to T as above it)."""

from __future__ import annotations

import numpy as np

from tripwire import NumpyBackend
from tripwire.integrations.mxnet import MXNetBackend

from mxnet_testlib import nd


def test_values_equal_to_the_threshold_are_counted_as_numpy_counts_them() -> None:
    rng = np.random.default_rng(0)
    backend, reference = MXNetBackend(), NumpyBackend()
    wrong = []
    for _ in range(200):
        v = np.float32(rng.standard_normal() * 10.0 ** rng.integers(-5, 5))
        arr = np.array([v, v, -v, np.float32(0.0)], dtype=np.float32)
        reductions = [f"fraction_gt:{float(v)!r}", f"fraction_lt:{float(v)!r}", f"fraction_abs_gt:{float(abs(v))!r}"]
        got = backend.reduce([nd.array(arr, dtype="float32")], reductions)[0]
        want = reference.reduce([arr], reductions)[0]
        if not np.array_equal(got, want):
            wrong.append((float(v), got.tolist(), want.tolist()))
    assert not wrong, wrong[:5]


def test_a_default_run_copies_no_parameter_and_records_no_learning_rate(tmp_path) -> None:
    """The default set's loss_scale_collapse reads the optimizer kind optionally (MXNet has no loss
    scale): a default hook records neither ``lr/0`` nor update ratios, and copies no parameter for
    them, as before that rule joined the set (session 30); a config that names the optimizer
    collection records both."""
    import tripwire
    from mxnet import gluon
    from test_trial28c_mx import _loop

    from mxnet_testlib import mlp
    from tripwire.integrations.mxnet import TripwireHook

    names = {}
    for label, extra in (("default", {}), ("optimizer", {"collections": {"optimizer": {}}})):
        net = mlp()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        hook = TripwireHook(out_dir=tmp_path / label, rules=["default"], actions=["record"], save_interval=5, **extra)
        hook.register_block(net)
        hook.register_trainer(trainer)
        _loop(hook, net, trainer, steps=12)
        if label == "default":
            assert hook._snapshot is None
        hook.close()
        names[label] = set(tripwire.open_run(tmp_path / label).tensor_names())
    assert not {n for n in names["default"] if n.startswith(("lr/", "update_ratio/"))}, names["default"]
    assert "lr/0" in names["optimizer"] and any(n.startswith("update_ratio/") for n in names["optimizer"])
