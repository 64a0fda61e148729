"""Trial 30d (a researcher maintaining MXNet Gluon code), findings 1, 2, 4, 5 and 6.

1: the stored ``loss`` was the mean taken in the loss's own dtype: a float16 batch whose loss sum passed
65504 was stored as inf/NaN, and ``exploding_tensor`` stopped a healthy run (the per-device list path
summed in float16 too). Losses (and float16 gradients divided by the batch size) are now reduced in
float32 at least.

2: a GAN with one hook holding both Trainers stored, for the discriminator, the gradients of the
generator's backward pass (the ones its Trainer applied were overwritten), without a word: a Trainer
that updates inside a step (between begin_step and end_step) is now said in a WARNING naming the
parameters whose gradients a later backward overwrote; one hook per player stores the applied ones.

4: a registered block that is itself a leaf (a bare ``rnn.LSTM``) got no layer outputs: its output is
now stored as ``output``.

5: a failed end_step left the hook in different states (a bad batch_size: the step open; a bad metric:
the step closed and recorded anyway): every argument is now checked first, and on an error the step
stays open, nothing of it recorded (``with hook.step()``: the step is discarded).

6: state_dict / load_state_dict had no docstrings; load_state_dict now also names what it accepts.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError

from mxnet_testlib import TripwireHook, autograd, gluon, mx, nd, nn

rnn = gluon.rnn


def _loss_hook(tmp_path: Path, name: str = "run", **kw: Any) -> TripwireHook:
    kw.setdefault("save_interval", 1)
    return TripwireHook(out_dir=str(tmp_path / name), rules=["exploding_tensor"], actions=["log", "stop_training"],
                        collections=["losses"], **kw)


# ------------------------------------------------------------------------------------- finding 1
def _fp16(n: int, scale: float, seed: int = 0) -> tuple[Any, float]:
    a = (np.random.default_rng(seed).random(n) * scale * 2).astype(np.float16)
    assert np.isfinite(a).all()
    return nd.array(a, dtype="float16"), float(a.astype(np.float64).mean())


@pytest.mark.parametrize("n, scale", [(1024, 80.0), (4096, 20.0), (65536, 2.5)])
def test_a_float16_loss_whose_sum_passes_65504_is_stored_as_its_finite_mean(tmp_path, n, scale) -> None:
    loss, mean = _fp16(n, scale)
    assert not np.isfinite(float(nd.mean(loss).asscalar()))  # (MXNet's own float16 mean overflows)
    hook = _loss_hook(tmp_path)
    hook.begin_step("train")
    decision = hook.end_step(loss=loss, batch_size=n)
    assert not decision.stop and not hook.should_stop
    assert float(hook.history.value("loss", "raw", 0)) == pytest.approx(mean, rel=1e-6)
    hook.close()
    assert tripwire.open_run(tmp_path / "run").status == "complete"


def test_a_float16_loss_is_stored_as_its_exact_mean_not_the_float16_one(tmp_path) -> None:
    loss, mean = _fp16(32, 2.5)
    assert abs(float(nd.mean(loss).asscalar()) - mean) > 1e-5  # (the float16 mean is off)
    hook = _loss_hook(tmp_path)
    hook.begin_step("train")
    hook.end_step(loss=loss)
    assert float(hook.history.value("loss", "raw", 0)) == pytest.approx(mean, rel=1e-6)
    hook.close()


def test_a_float16_loss_kept_on_a_step_that_saves_nothing_is_its_finite_mean(tmp_path) -> None:
    hook = _loss_hook(tmp_path, save_interval=10)  # (losses every step: steps 1..9 keep the mean on the device)
    means = []
    for step in range(3):
        loss, mean = _fp16(1024, 80.0, seed=step)
        means.append(mean)
        hook.begin_step("train")
        assert not hook.end_step(loss=loss).stop
    hook.close()
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    for step, mean in enumerate(means):
        assert float(run.tensor("loss").value(step)) == pytest.approx(mean, rel=1e-6)


def test_a_list_of_float16_losses_one_per_device_is_summed_without_overflow(tmp_path) -> None:
    a, _ = _fp16(2048, 80.0)  # (each half sums past 65504)
    host = a.asnumpy().astype(np.float64)
    hook = _loss_hook(tmp_path)
    hook.begin_step("train")
    assert not hook.end_step(loss=[a[:1024], a[1024:]]).stop
    assert float(hook.history.value("loss", "raw", 0)) == pytest.approx(host.mean(), rel=1e-6)
    hook.close()


class _Scale(gluon.Block):
    """y = x * w, a float16 elementwise layer (float16 FullyConnected has no CPU kernel in MXNet 1.9.1)."""

    def __init__(self, units: int) -> None:
        super().__init__()
        with self.name_scope():
            self.w = self.params.get("w", shape=(units,), dtype="float16", init=mx.init.One())

    def forward(self, x: Any) -> Any:
        return x * self.w.data()


def test_float16_gradients_are_divided_by_the_batch_size_in_float32_not_flushed_to_zero(tmp_path) -> None:
    net = _Scale(8)
    net.initialize()
    x = nd.full((4, 8), 2.5e-4, dtype="float16")  # the gradient sum: 1e-3 per element
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[], save_interval=1, collections=["gradients"])
    hook.register_block(net)
    hook.begin_step("train")
    with autograd.record():
        loss = net(x).sum(axis=1)
    loss.backward()
    grad_sum = float(net.w.grad().asnumpy().astype(np.float64)[0])
    hook.end_step(loss=loss, batch_size=65536)  # 1e-3 / 65536 = 1.5e-8: below float16's smallest subnormal
    assert float(np.float16(grad_sum) / np.float16(65536)) == 0.0
    stored = float(hook.history.value("gradients/w", "abs_mean", 0))
    assert stored == pytest.approx(grad_sum / 65536, rel=1e-3)
    assert float(hook.history.value("gradients/w", "zero_fraction", 0)) == 0.0
    hook.close()


def test_the_estimator_fingerprint_of_float16_weights_does_not_overflow() -> None:
    from tripwire.integrations.mxnet._estimator import _weights_fingerprint

    net = _Scale(4096)
    net.initialize()
    net.w.set_data(nd.full((4096,), 30.0, dtype="float16"))  # (sum 122880: past float16's 65504)
    _, values = _weights_fingerprint(net)
    assert np.isfinite(values).all()
    assert values.tolist() == pytest.approx([4096 * 900.0, 4096 * 30.0])


# ------------------------------------------------------------------------------------- finding 2
def _gan() -> tuple[Any, Any, Any, Any]:
    mx.random.seed(0)
    G = nn.HybridSequential()
    G.add(nn.Dense(16, activation="relu", in_units=4), nn.Dense(2, in_units=16))
    D = nn.HybridSequential()
    D.add(nn.Dense(16, activation="relu", in_units=2), nn.Dense(1, in_units=16))
    G.initialize(mx.init.Xavier())
    D.initialize(mx.init.Xavier())
    tG = gluon.Trainer(G.collect_params(), "adam", {"learning_rate": 1e-3, "beta1": 0.5})
    tD = gluon.Trainer(D.collect_params(), "adam", {"learning_rate": 2e-3, "beta1": 0.5})
    return G, D, tG, tD


def _gan_batch(step: int, b: int = 32) -> tuple[Any, Any]:
    rng = np.random.default_rng(step)
    real = nd.array(rng.normal(size=(b, 2)) * 0.5 + [2, -1])
    z = nd.array(rng.normal(size=(b, 4)))
    return real, z


_KW: dict[str, Any] = dict(rules=["exploding_tensor", "exploding_gradient", "vanishing_gradient"], save_interval=1,
                           collections=["weights", "biases", "gradients", "losses", "optimizer"])


def _inside(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if "inside train step" in r.getMessage()]


def test_a_gan_with_one_hook_says_which_gradients_are_not_the_ones_applied(tmp_path, caplog) -> None:
    G, D, tG, tD = _gan()
    bce = gluon.loss.SigmoidBinaryCrossEntropyLoss()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), **_KW)
    hook.register_block(G, name="G")
    hook.register_block(D, name="D")
    hook.register_trainer(tG)
    hook.register_trainer(tD)
    b = 32
    with caplog.at_level(logging.WARNING, logger="tripwire"), hook:
        for step in range(3):
            real, z = _gan_batch(step, b)
            hook.begin_step("train")
            with autograd.record():
                fake = G(z)
                err_d = bce(D(real), nd.ones((b, 1))) + bce(D(fake.detach()), nd.zeros((b, 1)))
            err_d.backward()
            tD.step(b)
            with autograd.record():
                err_g = bce(D(G(z)), nd.ones((b, 1)))
            err_g.backward()
            hook.end_step(loss=err_g)
            tG.step(b)
    said = _inside(caplog)
    assert len(said) == 1, said  # (once)
    msg = said[0]
    assert "Trainer 1 made an update (trainer.step) inside train step 0" in msg
    assert "D.0.weight, D.0.bias, D.1.weight, D.1.bias" in msg and "G.0.weight" not in msg
    assert "are not the ones that Trainer applied" in msg
    assert "one hook per player" in msg and "docs/mxnet.md" in msg


def test_a_gan_with_one_hook_per_player_stores_the_gradients_each_trainer_applied(tmp_path, caplog) -> None:
    G, D, tG, tD = _gan()
    bce = gluon.loss.SigmoidBinaryCrossEntropyLoss()
    hook_d = TripwireHook(out_dir=str(tmp_path / "D"), **_KW)
    hook_d.register_block(D)
    hook_d.register_trainer(tD)
    hook_g = TripwireHook(out_dir=str(tmp_path / "G"), **_KW)
    hook_g.register_block(G)
    hook_g.register_trainer(tG)
    b = 32
    applied = []
    with caplog.at_level(logging.WARNING, logger="tripwire"), hook_d, hook_g:
        for step in range(3):
            real, z = _gan_batch(step, b)
            hook_d.begin_step("train")
            with autograd.record():
                fake = G(z)
                err_d = bce(D(real), nd.ones((b, 1))) + bce(D(fake.detach()), nd.zeros((b, 1)))
            err_d.backward()
            applied.append(np.linalg.norm(D[0].weight.grad().asnumpy().astype(np.float64) / b))
            hook_d.end_step(loss=err_d)
            tD.step(b)
            hook_g.begin_step("train")
            with autograd.record():
                err_g = bce(D(G(z)), nd.ones((b, 1)))
            err_g.backward()
            hook_g.end_step(loss=err_g)
            tG.step(b)
    assert _inside(caplog) == []
    for step, norm in enumerate(applied):
        assert float(hook_d.history.value("gradients/0.weight", "l2", step)) == pytest.approx(norm, rel=1e-5)


def test_a_trainer_step_before_end_step_is_said_the_weights_being_after_its_update(tmp_path, caplog) -> None:
    mx.random.seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    hook = TripwireHook(out_dir=str(tmp_path / "run"), **_KW)
    hook.register_block(net)
    hook.register_trainer(trainer)
    x = nd.ones((2, 4))
    with caplog.at_level(logging.WARNING, logger="tripwire"), hook:
        hook.begin_step("train")
        with autograd.record():
            loss = net(x).sum(axis=1)
        loss.backward()
        trainer.step(2)  # (before end_step: the wrong order)
        hook.end_step(loss=loss)
    said = _inside(caplog)
    assert len(said) == 1, said
    assert "Trainer 0 made an update (trainer.step) inside train step 0" in said[0]
    assert "the weights stored for that step are those after its update" in said[0]
    assert "not the ones that Trainer applied" not in said[0]
    assert "call end_step before trainer.step" in said[0]


def test_the_usual_loop_says_nothing_of_an_update_inside_a_step(tmp_path, caplog) -> None:
    mx.random.seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    hook = TripwireHook(out_dir=str(tmp_path / "run"), **_KW)
    hook.register_block(net)
    hook.register_trainer(trainer)
    with caplog.at_level(logging.WARNING, logger="tripwire"), hook:
        for _ in range(3):
            hook.begin_step("train")
            with autograd.record():
                loss = net(nd.ones((2, 4))).sum(axis=1)
            loss.backward()
            hook.end_step(loss=loss)
            trainer.step(2)
    assert _inside(caplog) == []


# ------------------------------------------------------------------------------------- finding 4
def _leaf_run(tmp_path: Path, net: Any, x: Any, states: bool = False, name: str | None = None) -> list[str]:
    net.initialize()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[], save_interval=1,
                        collections=["losses", "activations", "relu_outputs", "activation_inputs"])
    hook.register_block(net, name=name)
    for _ in range(2):
        hook.begin_step("train")
        with autograd.record():
            if states:
                out, _ = net(x, net.begin_state(batch_size=x.shape[0]))
            else:
                out = net(x)
            loss = out.reshape((x.shape[0], -1)).mean(axis=1)
        loss.backward()
        hook.end_step(loss=loss)
    hook.close()
    return sorted(tripwire.open_run(tmp_path / "run").tensor_names())


def test_a_registered_bare_lstm_has_its_output_captured(tmp_path) -> None:
    names = _leaf_run(tmp_path, rnn.LSTM(8, layout="NTC"), nd.random.normal(shape=(4, 5, 3)))
    assert names == ["loss", "output"]


def test_a_registered_bare_lstm_called_with_states_has_its_output_and_states(tmp_path) -> None:
    names = _leaf_run(tmp_path, rnn.LSTM(8, layout="NTC"), nd.random.normal(shape=(4, 5, 3)), states=True)
    assert names == ["loss", "output_0", "output_1", "output_2"]


def test_a_named_bare_lstm_is_captured_under_its_name(tmp_path) -> None:
    names = _leaf_run(tmp_path, rnn.LSTM(8, layout="NTC"), nd.random.normal(shape=(4, 5, 3)), name="lstm")
    assert names == ["loss", "lstm/output"]


class _ReLUHolder(nn.Activation):
    """A ReLU leaf with a parameter, so that backward has something to differentiate."""

    def __init__(self) -> None:
        super().__init__("relu")
        with self.name_scope():
            self.w = self.params.get("w", shape=(3,), init=mx.init.One())

    def hybrid_forward(self, F: Any, x: Any, w: Any) -> Any:  # noqa: N803
        return F.relu(F.broadcast_mul(x, w.reshape((1, -1))))


def test_a_registered_bare_activation_has_its_input_and_relu_output(tmp_path) -> None:
    names = _leaf_run(tmp_path, _ReLUHolder(), nd.random.normal(shape=(4, 3)))
    assert names == ["input", "loss", "output"]


# ------------------------------------------------------------------------------------- finding 5
def _steps(tmp_path: Path) -> list[int]:
    return list(tripwire.open_run(tmp_path / "run").steps(mode="train"))


@pytest.mark.parametrize("bad, match", [
    ({"batch_size": 0}, r"end_step.batch_size: got 0; accepted"),
    ({"metrics": {"acc": nd.ones(3)}}, r"end_step.metrics\['acc'\]: got an NDArray of shape \(3,\); accepted: one "
                                       r"element"),
    ({"metrics": {"": 1.0}}, r"end_step.metrics\[''\]: an empty name; accepted"),
    ({"metrics": [("acc", 1.0)]}, r"end_step.metrics: got list; accepted: a mapping"),
    ({"metrics": {"val_loss": "low"}}, r"end_step.metrics\['val_loss'\]: got 'low'; accepted"),
    ({"loss": [nd.ones(2), 3.0]}, r"end_step.loss: got a list with non-NDArray items; accepted"),
    ({"loss": "high"}, r"end_step.loss: got 'high'; accepted"),
    ({"inputs": "x"}, r"end_step.inputs: got str; accepted"),
    ({"capture_parameters": "yes"}, r"end_step.capture_parameters: got 'yes'; accepted"),
])
def test_a_failed_end_step_leaves_the_step_open_and_records_nothing(tmp_path, bad, match) -> None:
    mx.random.seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=1,
                        collections=["losses", "metrics", "weights", "gradients"])
    hook.register_block(net)
    hook.begin_step("train")
    with autograd.record():
        loss = net(nd.ones((2, 4))).sum(axis=1)
    loss.backward()
    args: dict[str, Any] = {"loss": loss, **bad}
    with pytest.raises(ConfigError, match=match):
        hook.end_step(**args)
    with pytest.raises(RuntimeError, match=r"train step 0 is still in progress"):  # the step is still open
        hook.begin_step("train")
    hook.end_step(loss=loss, metrics={"acc": 0.5})  # the same step, ended with valid arguments
    assert hook.begin_step("train").step == 1
    hook.end_step(loss=loss)
    hook.close()
    assert _steps(tmp_path) == [0, 1]
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("acc").steps() == [0]  # (recorded once, by the end_step that succeeded)
    assert float(run.tensor("loss").value(0)) == pytest.approx(float(loss.mean().asscalar()), rel=1e-6)


def test_a_failed_end_step_of_a_step_context_discards_the_step(tmp_path) -> None:
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[], save_interval=1, collections=["losses", "metrics"])
    with pytest.raises(ConfigError, match=r"end_step.metrics\['acc'\]: got an NDArray of shape \(3,\)"):
        with hook.step("train") as s:
            s.loss = nd.ones(2)
            s.metrics = {"acc": nd.ones(3)}
    with hook.step("train") as s:  # the next step begins: the failed one is not open
        s.loss = nd.full((2,), 2.0)
    hook.close()
    run = tripwire.open_run(tmp_path / "run")
    assert _steps(tmp_path) == [1]  # step 0 is discarded: nothing of it recorded
    assert float(run.tensor("loss").value(1)) == 2.0
    assert run.status == "complete"


# ------------------------------------------------------------------------------------- finding 6
def test_state_dict_and_load_state_dict_are_documented() -> None:
    for method in (TripwireHook.state_dict, TripwireHook.load_state_dict):
        doc = method.__doc__ or ""
        assert "out_dir" in doc and "checkpoint" in doc, method.__name__


@pytest.mark.parametrize("bad, got", [
    ({"mode_steps": {"train": 3}, "rules": []}, r"a mapping with the keys \['mode_steps', 'rules'\]"),
    ([1, 2], r"a list"),
])
def test_load_state_dict_names_what_it_accepts(tmp_path, bad, got) -> None:
    hook = _loss_hook(tmp_path)
    with pytest.raises(ConfigError, match=rf"TripwireHook.load_state_dict: got {got}; accepted: what "
                                          r"TripwireHook.state_dict\(\) returned \(keys session, should_stop, "
                                          r"trial_epoch\)"):
        hook.load_state_dict(bad)
    hook.close()


def test_the_documented_resume_recipe_continues_the_run(tmp_path) -> None:
    mx.random.seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

    def loop(hook: TripwireHook, steps: range) -> None:
        for _ in steps:
            hook.begin_step("train")
            with autograd.record():
                loss = net(nd.ones((2, 4))).sum(axis=1) ** 2
            loss.backward()
            hook.end_step(loss=loss)
            trainer.step(2)

    out = str(tmp_path / "run")
    hook = TripwireHook(out_dir=out, rules=["default"], save_interval=1, collections=["losses"])
    hook.register_block(net)
    hook.register_trainer(trainer)
    loop(hook, range(3))
    checkpoint = pickle.dumps({"tripwire": hook.state_dict(), "step": 3})
    hook.close("failed")  # (the process dies here)

    state = pickle.loads(checkpoint)
    resumed = TripwireHook(out_dir=out, rules=["default"], save_interval=1, collections=["losses"])
    resumed.register_block(net)
    resumed.register_trainer(trainer)
    resumed.load_state_dict(state["tripwire"])
    loop(resumed, range(state["step"], 5))
    resumed.close()
    assert _steps(tmp_path) == [0, 1, 2, 3, 4]


def test_the_handlers_load_state_dict_names_what_it_accepts(tmp_path) -> None:
    from tripwire.integrations.mxnet import TripwireHandler

    with TripwireHandler(out_dir=str(tmp_path / "run"), rules=[]) as handler:
        assert handler.state_dict.__doc__ and handler.load_state_dict.__doc__
        with pytest.raises(ConfigError, match=r"TripwireHandler.load_state_dict: got a mapping with the keys "
                                              r"\['session'\]; accepted: what TripwireHandler.state_dict\(\) "
                                              r"returned \(keys hook, epoch\)"):
            handler.load_state_dict({"session": {}})


# ------------------------------------------------------------------------------------- finding 7 (docs)
def test_clipping_after_end_step_stores_the_unclipped_gradients_as_docs_mxnet_says(tmp_path) -> None:
    mx.random.seed(0)
    net = nn.Dense(3, in_units=4)
    net.initialize()
    hook = TripwireHook(out_dir=str(tmp_path / "run"), rules=[], save_interval=1, collections=["gradients"])
    hook.register_block(net)
    hook.begin_step("train")
    with autograd.record():
        loss = (net(nd.ones((2, 4)) * 10) ** 2).sum(axis=1)
    loss.backward()
    unclipped = np.linalg.norm(net.weight.grad().asnumpy().astype(np.float64)) / 2
    hook.end_step(loss=loss)
    gluon.utils.clip_global_norm([p.grad() for p in net.collect_params().values()], 1e-3)
    assert np.linalg.norm(net.weight.grad().asnumpy()) < 1e-3  # (clipped in place after end_step)
    hook.close()
    assert float(hook.history.value("gradients/weight", "l2", 0)) == pytest.approx(unclipped, rel=1e-5)
