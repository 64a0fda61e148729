"""Trial 29a (Lightning, advanced Trainer features):

- F1: ``accumulate_grad_batches=4`` with ``val_check_interval=0.25`` (a validation inside an
  accumulation window): the interrupted step's ``loss`` was the mean of the micro-batches before the
  validation, its gradients were not recorded, and ``run.train_steps("eval")`` put the validation at
  the step in flight. The window's record is now as without the validation, and the validation
  follows the last optimizer step taken.
- F2: train batches from a dict of dataloaders (``{"a": [x, y], "b": [x, y]}``) gave the ``inputs``
  and ``labels`` collections nothing in train mode, without a word: now a WARNING per mode.
- F3: the callback's docstrings said ``findings`` held every finding of the run (a resumed
  callback's starts empty) and left another callback's stop out of ``stop_reason``.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.lightning import TripwireCallback  # noqa: E402

torch.set_num_threads(1)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")

K = 4  # accumulate_grad_batches
BATCHES = 12  # 3 optimizer steps; val_check_interval=0.25: validations after batches 3, 6, 9 and 12
LR = 0.5


class Clf(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = (batch[0], batch[1]) if not isinstance(batch, dict) else batch["a"]
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", F.cross_entropy(self.net(batch[0]), batch[1]))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=LR)


def _data() -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCHES * 8, 4, generator=g)
    return TensorDataset(x, (x[:, 0] + 0.3 * x[:, 1] > 0).long())


def _trainer(*callbacks: Any, **kw: Any) -> Any:
    return L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, accelerator="cpu", devices=1, callbacks=list(callbacks), **kw)


def _replay(init: Clf, steps: int) -> dict[int, tuple[float, float]]:
    """Per optimizer step of the same fit in plain torch: (the mean of its k micro-batch losses, the
    L2 norm of the accumulated gradient of net.0.weight at the optimizer step)."""
    model = copy.deepcopy(init)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    out: dict[int, tuple[float, float]] = {}
    losses: list[float] = []
    for i, (x, y) in enumerate(DataLoader(_data(), batch_size=8)):
        loss = F.cross_entropy(model.net(x), y)
        (loss / K).backward()
        losses.append(float(loss))
        if (i + 1) % K == 0:
            out[len(out)] = (float(np.mean(losses)), float(model.net[0].weight.grad.norm()))
            losses = []
            opt.step()
            opt.zero_grad()
        if len(out) == steps:
            break
    return out


class _GlobalStepAtValidation(L.Callback):
    def __init__(self, stop_at: int | None = None) -> None:
        self.seen: list[int] = []
        self.stop_at = stop_at

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self.seen.append(int(trainer.global_step))
        if self.stop_at is not None and len(self.seen) == self.stop_at:
            trainer.should_stop = True


def _fit(tmp_path: Path, save_interval: int, stop_at: int | None = None) -> tuple[Any, Clf, _GlobalStepAtValidation]:
    model = Clf()
    init = copy.deepcopy(model)
    seen = _GlobalStepAtValidation(stop_at)
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=save_interval, rules=["default"],
                          collections=["losses", "metrics", "gradients"])
    data = _data()
    _trainer(cb, seen, max_epochs=1, accumulate_grad_batches=K, val_check_interval=0.25).fit(
        model, DataLoader(data, batch_size=8), DataLoader(data, batch_size=len(data)))
    return tripwire.open_run(tmp_path / "run"), init, seen


@pytest.mark.parametrize("save_interval", [1, 100])  # every step saves / steps 1 and 2 save nothing (quiet)
def test_a_validation_inside_an_accumulation_window_leaves_the_steps_record_whole(
        tmp_path: Path, save_interval: int) -> None:
    run, init, seen = _fit(tmp_path, save_interval)
    assert seen.seen == [0, 1, 2, 3]  # (the first three validations came inside windows 0, 1 and 2)
    ref = _replay(init, 3)
    steps, values = run.series("loss")
    assert steps.tolist() == [0, 1, 2]
    np.testing.assert_allclose(values, [ref[s][0] for s in range(3)], rtol=1e-5)  # all k micro-batches' mean
    grads = run.tensor("gradients/net.0.weight")
    assert grads.steps() == ([0, 1, 2] if save_interval == 1 else [0])
    for s in grads.steps():  # the accumulated gradients at the optimizer step
        assert grads.value("l2", s) == pytest.approx(ref[s][1], rel=1e-5)
    # each validation follows the last optimizer step taken: the weights it validated (-1: none yet)
    eval_steps, _ = run.series("val_loss")
    assert eval_steps.tolist() == [1, 2, 3, 4]
    assert run.train_steps("eval", eval_steps).tolist() == [-1, 0, 1, 2]


@pytest.mark.parametrize("save_interval", [1, 100])
def test_a_stop_at_a_validation_inside_a_window_records_no_step_for_it(
        tmp_path: Path, save_interval: int, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire"):
        run, init, seen = _fit(tmp_path, save_interval, stop_at=2)  # (EarlyStopping's way: after batch 6)
    assert seen.seen == [0, 1]
    steps, values = run.series("loss")
    assert steps.tolist() == [0]  # (step 1's optimizer step never ran: 2 of its 4 micro-batches did)
    assert values[0] == pytest.approx(_replay(init, 1)[0][0], rel=1e-5)
    assert run.train_steps("eval", run.series("val_loss")[0]).tolist() == [-1, 0]
    assert run.status == "stopped"
    said = [r.getMessage() for r in caplog.records if "accumulation window of train step 1" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("tripwire: the epoch ended inside the gradient accumulation window "
                                                 "of train step 1, after a validation inside it"), said


def _combined_fit(tmp_path: Path, batches: Any) -> Any:
    cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, include_collections=["inputs", "labels"])
    data = _data()
    _trainer(cb, max_epochs=1, limit_train_batches=4).fit(Clf(), batches, DataLoader(data, batch_size=32))
    return tripwire.open_run(tmp_path / "run")


def test_train_batches_of_a_dict_of_dataloaders_say_that_inputs_and_labels_are_not_captured(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = _data()
    loaders = {"a": DataLoader(data, batch_size=8), "b": DataLoader(data, batch_size=8)}
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        run = _combined_fit(tmp_path, loaders)
    assert run.tensor("inputs").steps("train") == []  # (split_batch finds nothing in {'a': [x, y], 'b': [x, y]})
    assert run.tensor("inputs").steps("eval") != []
    said = [r.getMessage() for r in caplog.records if "split_batch" in r.getMessage()]
    assert len(said) == 1, said  # (once per mode: train only; the eval batches are (x, y))
    assert said[0].startswith(
        "tripwire: train step 0 saves the collection(s) inputs, labels, but TripwireCallback.split_batch found no "
        "inputs or labels tensor in its batch (a dict with keys 'a', 'b'): they capture nothing from train "
        "batches"), said[0]
    assert "Override split_batch to return (inputs, labels)" in said[0]


@pytest.mark.parametrize("layout", ["tuple", "tensor"])
def test_batches_split_batch_understands_say_nothing(tmp_path: Path, layout: str,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    data = _data()
    if layout == "tensor":  # (a bare tensor is the inputs and has no labels: not said)
        class Unlabelled(Clf):
            def training_step(self, batch: Any, batch_idx: int) -> Any:
                return self.net(batch).pow(2).mean()

        cb = TripwireCallback(out_dir=tmp_path / "run", save_interval=2, include_collections=["inputs", "labels"])
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            _trainer(cb, max_epochs=1, limit_train_batches=4, limit_val_batches=0).fit(
                Unlabelled(), DataLoader(data.tensors[0], batch_size=8))
        run = tripwire.open_run(tmp_path / "run")
    else:
        with caplog.at_level(logging.WARNING, logger="tripwire"):
            run = _combined_fit(tmp_path, DataLoader(data, batch_size=8))
    assert run.tensor("inputs").steps("train") == [0, 2]
    assert not [r for r in caplog.records if "split_batch" in r.getMessage()]


def test_the_docstrings_say_what_findings_and_stop_reason_hold() -> None:
    cls_doc = TripwireCallback.__doc__ or ""
    findings_doc = TripwireCallback.findings.__doc__ or ""
    reason_doc = TripwireCallback.stop_reason.__doc__ or ""
    assert "every finding of the run" not in cls_doc and "Every finding of the run" not in findings_doc
    for doc in (cls_doc, findings_doc):
        assert "resumed a fit from a checkpoint starts with none" in " ".join(doc.split())
        assert "tripwire.open_run(out_dir).findings" in doc
    for doc in (cls_doc, reason_doc):
        assert "EarlyStopping" in doc
