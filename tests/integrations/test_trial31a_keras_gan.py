"""Trial 31a F1 (Keras): a GAN in keras.io's pattern (``GAN.compile(d_optimizer, g_optimizer, loss_fn)``
calls ``super().compile()``, and ``train_step`` steps ``self.d_optimizer`` and ``self.g_optimizer``) had no
gradient captured (only ``model.optimizer``, the idle RMSprop ``super().compile()`` makes, was wrapped),
a WARNING that blamed a loss scaler or a missing ``apply`` call, and ``lr/0`` holding that idle
optimizer's rate; a generator learning rate of 1e8 ran to ``complete``. Every optimizer the model holds
is wrapped now: each player's gradients and update ratios (checked against the gradients computed here
in float64 torch from the step's own noise, batch and weights), ``lr/d_optimizer.0`` and
``lr/g_optimizer.0``, every wrapper undone after the fit (also one that raises), and the "apply did not
run" WARNING names only the causes the fit's facts leave.

Keras runs on the torch backend, set before keras is imported."""

from __future__ import annotations

import logging
import os

os.environ["KERAS_BACKEND"] = "torch"

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

keras = pytest.importorskip("keras")
torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.keras import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")

LATENT = 3
REAL = np.random.default_rng(0).normal(2.0, 0.5, size=(64, 2)).astype("float32")
STEPS: list[dict[str, Any]] = []  # what each train step of the GAN saw (its noise, batch, weights)


def _np(t: Any) -> np.ndarray:
    return np.array(keras.ops.convert_to_numpy(t), dtype=np.float64)


class GAN(keras.Model):
    """keras.io's GAN, on the torch backend (its train_step written as Keras's torch guide writes one)."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__()
        self.discriminator = keras.Sequential([keras.Input((2,)), keras.layers.Dense(8, activation="relu", name="dd1"),
                                               keras.layers.Dense(1, name="dout")], name="discriminator")
        self.generator = keras.Sequential([keras.Input((LATENT,)), keras.layers.Dense(8, activation="relu", name="gd1"),
                                           keras.layers.Dense(2, name="gout")], name="generator")
        self.seed_gen = keras.random.SeedGenerator(1)
        self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
        self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
        self.fail_at = fail_at

    def compile(self, d_optimizer: Any, g_optimizer: Any, loss_fn: Any) -> None:  # type: ignore[override]
        super().compile()
        self.d_optimizer = d_optimizer
        self.g_optimizer = g_optimizer
        self.loss_fn = loss_fn

    @property
    def metrics(self) -> list[Any]:
        return [self.d_loss_tracker, self.g_loss_tracker]

    def train_step(self, data: Any) -> dict[str, Any]:
        real = data[0] if isinstance(data, tuple) else data
        if self.fail_at is not None and len(STEPS) == self.fail_at:
            raise RuntimeError("planted failure in train_step")
        d, g = self.discriminator, self.generator
        bs = real.shape[0]
        z1 = keras.random.normal((bs, LATENT), seed=self.seed_gen)
        seen = {"real": _np(real), "z1": _np(z1), "d_before": [_np(w) for w in d.trainable_weights],
                "g_before": [_np(w) for w in g.trainable_weights]}
        labels = keras.ops.concatenate([keras.ops.ones((bs, 1)), keras.ops.zeros((bs, 1))], axis=0)
        self.zero_grad()
        d_loss = self.loss_fn(labels, d(keras.ops.concatenate([g(z1), real], axis=0)))
        d_loss.backward()
        with torch.no_grad():
            self.d_optimizer.apply([v.value.grad for v in d.trainable_weights], d.trainable_weights)
        z2 = keras.random.normal((bs, LATENT), seed=self.seed_gen)
        seen.update(z2=_np(z2), d_after=[_np(w) for w in d.trainable_weights])
        self.zero_grad()
        g_loss = self.loss_fn(keras.ops.zeros((bs, 1)), d(g(z2)))
        g_loss.backward()
        with torch.no_grad():
            self.g_optimizer.apply([v.value.grad for v in g.trainable_weights], g.trainable_weights)
        seen["g_after"] = [_np(w) for w in g.trainable_weights]
        STEPS.append(seen)
        self.d_loss_tracker.update_state(d_loss)
        self.g_loss_tracker.update_state(g_loss)
        return {"d_loss": self.d_loss_tracker.result(), "g_loss": self.g_loss_tracker.result()}


def gan(g_lr: float = 1e-3, d_lr: float = 2e-3, fail_at: int | None = None) -> GAN:
    keras.utils.set_random_seed(0)
    model = GAN(fail_at)
    model.built = True
    model.compile(keras.optimizers.Adam(d_lr), keras.optimizers.Adam(g_lr),
                  keras.losses.BinaryCrossentropy(from_logits=True))
    STEPS.clear()
    return model


def my_gradients(seen: dict[str, Any]) -> dict[str, np.ndarray]:
    """Both players' gradients at one step, computed here in float64 torch from the step's own noise,
    batch and weights: the discriminator's of its loss at the weights before the step, the generator's
    of its loss through the discriminator as its update left it."""
    bce = torch.nn.functional.binary_cross_entropy_with_logits

    def params(ws: list[np.ndarray]) -> list[Any]:
        return [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in ws]

    def mlp(ps: list[Any], x: Any) -> Any:
        return torch.relu(x @ ps[0] + ps[1]) @ ps[2] + ps[3]

    real, z1, z2 = (torch.tensor(seen[k]) for k in ("real", "z1", "z2"))
    dp, gp = params(seen["d_before"]), params(seen["g_before"])
    bs = len(real)
    d_loss = bce(mlp(dp, torch.cat([mlp(gp, z1), real])), torch.cat([torch.ones(bs, 1), torch.zeros(bs, 1)]).double())
    d_grads = torch.autograd.grad(d_loss, dp)
    dp2, gp2 = params(seen["d_after"]), params(seen["g_before"])
    g_loss = bce(mlp(dp2, mlp(gp2, z2)), torch.zeros(bs, 1, dtype=torch.float64))
    g_grads = torch.autograd.grad(g_loss, gp2)
    names = ("dd1/kernel", "dd1/bias", "dout/kernel", "dout/bias")
    out = {f"gradients/discriminator/{n}": g.numpy() for n, g in zip(names, d_grads)}
    out.update({f"gradients/generator/{n.replace('dd1', 'gd1').replace('dout', 'gout')}": g.numpy()
                for n, g in zip(names, g_grads)})
    return out


CONFIG = {"collections": {"gradients": {"reductions": ["raw", "l2"]}, "optimizer": None, "losses": None,
                          "metrics": None}}


def test_both_players_gradients_are_captured_and_equal_mine(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = gan()
    cb = TripwireCallback(CONFIG, out_dir=tmp_path / "run", save_interval=1, rules=[])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(REAL, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    said = " | ".join(r.getMessage() for r in caplog.records)
    assert "apply did not run" not in said and "LossScaleOptimizer" not in said, said
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and len(STEPS) == 4
    for step, seen in enumerate(STEPS):
        mine = my_gradients(seen)
        assert len(mine) == 8
        for name, grad in mine.items():
            stored = np.asarray(run.tensor(name).value(step, mode="train"), dtype=np.float64)
            assert stored.size == grad.size, name  # (a one-element tensor reads back as a scalar)
            np.testing.assert_allclose(stored.reshape(grad.shape), grad, rtol=2e-4, atol=1e-7, err_msg=f"{name} at step {step}")
        # each player's update ratio, from its own weights before and after its update
        for i, name in enumerate(("gd1/kernel", "gd1/bias", "gout/kernel", "gout/bias")):
            before, after = seen["g_before"][i], seen["g_after"][i]
            ratio = run.tensor(f"update_ratio/generator/{name}").value(step, mode="train")
            expected = np.linalg.norm(after - before) / np.linalg.norm(before) if np.linalg.norm(before) else np.inf
            assert ratio == pytest.approx(expected, rel=1e-4), name


def test_each_optimizer_that_steps_has_its_own_learning_rate(tmp_path: Path) -> None:
    model = gan(g_lr=1e-3, d_lr=2e-3)
    cb = TripwireCallback(CONFIG, out_dir=tmp_path / "run", save_interval=2, rules=[])
    model.fit(REAL, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    run = tripwire.open_run(tmp_path / "run")
    rates = sorted(n for n in run.tensor_names() if n.startswith("lr/"))
    # (not lr/0, nor lr/optimizer.0: the RMSprop super().compile() makes never steps)
    assert rates == ["lr/d_optimizer.0", "lr/g_optimizer.0"], rates
    steps, values = run.series("lr/d_optimizer.0")
    assert steps.tolist() == [0, 2] and values.tolist() == pytest.approx([2e-3, 2e-3])
    assert run.series("lr/g_optimizer.0")[1].tolist() == pytest.approx([1e-3, 1e-3])


def test_a_single_optimizer_keeps_lr_0(tmp_path: Path) -> None:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="d")])
    model.compile(keras.optimizers.SGD(0.01), "mse")
    cb = TripwireCallback(CONFIG, out_dir=tmp_path / "run", save_interval=2, rules=[])
    model.fit(REAL, REAL[:, :1], batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    names = tripwire.open_run(tmp_path / "run").tensor_names()
    assert [n for n in names if n.startswith("lr/")] == ["lr/0"]


def test_a_planted_huge_generator_learning_rate_is_found(tmp_path: Path) -> None:
    model = gan(g_lr=1e8)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, rules=["default"],
                          actions=["log", "stop_training"], include_collections=["gradients", "optimizer"])
    model.fit(REAL, batch_size=16, epochs=3, verbose=0, callbacks=[cb])
    found = cb.stopped_by
    assert found is not None and found.rule in ("exploding_gradient", "weight_update_ratio", "exploding_tensor"), \
        cb.findings
    assert tripwire.open_run(tmp_path / "run").status == "stopped"
    # the generator's own update is what weight_update_ratio judges, with its rate beside it
    model = gan(g_lr=1e8)
    cb = TripwireCallback(out_dir=tmp_path / "ratio", save_interval=1, rules=["weight_update_ratio"],
                          actions=["log", "stop_training"])
    model.fit(REAL, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    found = cb.stopped_by
    assert found is not None and found.rule == "weight_update_ratio" and found.step == 0, cb.findings
    assert "generator/" in found.message and "update_ratio/generator/" in found.tensors[0], found.message


def _wrapped(model: GAN) -> list[str]:
    return [name for name, opt in (("optimizer", model.optimizer), ("d", model.d_optimizer), ("g", model.g_optimizer))
            for attr in ("apply", "scale_loss") if attr in vars(opt)]


def test_every_optimizer_is_restored_after_fit_and_after_a_fit_that_raises(tmp_path: Path) -> None:
    model = gan()
    model.fit(REAL, batch_size=16, epochs=1, verbose=0,
              callbacks=[TripwireCallback(out_dir=tmp_path / "a", save_interval=1, rules=[])])
    assert _wrapped(model) == []
    model = gan(fail_at=2)
    cb = TripwireCallback(out_dir=tmp_path / "b", save_interval=1, rules=[], include_collections=["gradients"])
    with pytest.raises(RuntimeError, match="planted failure"):
        model.fit(REAL, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    assert _wrapped(model) == []
    assert tripwire.open_run(tmp_path / "b").status == "failed"
    assert "gradients/generator/gd1/kernel" in tripwire.open_run(tmp_path / "b").tensor_names()


HIDDEN: list[Any] = []  # an optimizer the model does not hold as an attribute


class SteppedOutside(keras.Model):
    """Steps an optimizer the model does not hold (``every``: at every ``every``-th step only, and
    ``own``: its own model.optimizer, at those steps)."""

    def __init__(self, every: int = 1, own: bool = False) -> None:
        super().__init__()
        self.d = keras.layers.Dense(1, name="d")
        self.every, self.own, self.count = every, own, 0

    def call(self, x: Any) -> Any:
        return self.d(x)

    def train_step(self, data: Any) -> dict[str, Any]:
        x, y = data
        self.zero_grad()
        loss = self.compute_loss(x=x, y=y, y_pred=self(x))
        loss = self.optimizer.scale_loss(loss)
        loss.backward()
        if self.count % self.every == 0:
            optimizer = self.optimizer if self.own else HIDDEN[0]
            with torch.no_grad():
                optimizer.apply([v.value.grad for v in self.trainable_weights], self.trainable_weights)
        self.count += 1
        return {"loss": loss}


@pytest.mark.parametrize("case", ["hidden", "some_steps"])
def test_apply_not_run_names_only_the_causes_the_fit_leaves(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            case: str) -> None:
    keras.utils.set_random_seed(0)
    HIDDEN[:] = [keras.optimizers.SGD(0.01)]
    model = SteppedOutside(every=2, own=True) if case == "some_steps" else SteppedOutside()
    model.compile(keras.optimizers.SGD(0.01), "mse")
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=1, rules=[], include_collections=["gradients"])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        model.fit(REAL, REAL[:, :1], batch_size=16, epochs=1, verbose=0, callbacks=[cb])
    said = [r.getMessage() for r in caplog.records if "apply did not run" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in caplog.records]
    assert "LossScaleOptimizer" not in said[0], said[0]  # (no loss scaler in this fit)
    if case == "hidden":
        assert said[0].startswith("tripwire: at 4 save step(s)"), said[0]
        assert "does not hold as an attribute" in said[0] and "here model.optimizer" in said[0], said[0]
    else:
        assert said[0].startswith("tripwire: at 2 save step(s)"), said[0]
        assert "model.optimizer applied at other steps" in said[0] and "did not call" not in said[0], said[0]
