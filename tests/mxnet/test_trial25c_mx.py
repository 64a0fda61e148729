"""Trial 25c: the estimator handler with a validation every k epochs (``ValidationHandler(epoch_period=2)``)
stored the last validation's values again at the epochs without one (finding 2), and with
``trial_metric="validation loss"`` raised at the first epoch, offering a training metric (finding 1); a
fit that raised before its first event left a run ``complete`` at exit, without a word (finding 4);
``end_step`` took ``capture_parameters="yes"`` and named an internal call for an empty metric name
(finding 5)."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tripwire
from tripwire import ConfigError
from tripwire.integrations.mxnet import TripwireHandler

from mxnet_testlib import TripwireHook, gluon, mx


class _Trial:
    """A tuner trial that never stops: records what it is told."""

    number, attempt, params = 0, 1, {"lr": 0.1}

    def __init__(self, max_resource: int = 6) -> None:
        self.max_resource = max_resource
        self.reports: list[tuple[int, float]] = []

    def report(self, step: int, value: float) -> bool:
        self.reports.append((step, float(value)))
        return False

    def rule_stopped(self, rule: str, message: str = "") -> None:
        pass


def _fit(out: Path, epochs: int = 6, epoch_period: int = 2, **handler_args: Any) -> TripwireHandler:
    """A small estimator fit (10 batches an epoch) validated every ``epoch_period`` epochs."""
    from mxnet.gluon.contrib.estimator import Estimator
    from mxnet.gluon.contrib.estimator.event_handler import ValidationHandler

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    data = lambda: gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=20)  # noqa: E731
    mx.random.seed(0)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(8, activation="relu", in_units=8), gluon.nn.Dense(2, in_units=8))
    net.initialize(mx.init.Xavier())
    est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(),
                    train_metrics=[mx.metric.Accuracy(), mx.metric.Loss()],
                    val_metrics=[mx.metric.Accuracy(), mx.metric.Loss()],
                    trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
    est.logger.setLevel(logging.ERROR)
    handler = TripwireHandler(out_dir=str(out), **handler_args)
    validation = ValidationHandler(val_data=data(), eval_fn=est.evaluate, epoch_period=epoch_period)
    est.fit(data(), epochs=epochs, event_handlers=[handler, validation])
    return handler


def test_validation_metrics_are_stored_only_at_the_epochs_validated(tmp_path: Path) -> None:
    _fit(tmp_path / "run")
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete"
    steps, values = run.series("validation loss")
    # validations after epochs 1, 3 and 5 (0-based): epochs 2 and 4 repeated the previous value
    assert list(steps) == [1, 3, 5] and len(set(values.tolist())) == 3
    assert list(run.series("validation accuracy")[0]) == [1, 3, 5]
    assert list(run.series("training loss")[0]) == [0, 1, 2, 3, 4, 5]  # the training metrics every epoch


def test_every_epoch_validated_still_stores_every_epoch(tmp_path: Path) -> None:
    _fit(tmp_path / "run", epochs=3, epoch_period=1)
    run = tripwire.open_run(tmp_path / "run")
    assert list(run.series("validation loss")[0]) == [0, 1, 2]


def test_overfit_is_bound_at_the_first_validation_without_a_warning(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    # epoch 0 has no validation: the WARNING said the estimator logs no validation loss
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        handler = _fit(tmp_path / "run", epochs=4, rules=["overfit"])
    assert handler.hook.session.rules[0].validation == "validation loss"
    assert "does not log" not in caplog.text, caplog.text


def test_a_trial_is_told_the_validated_epochs_with_the_epoch_as_step(tmp_path: Path) -> None:
    trial = _Trial(max_resource=6)
    handler = _fit(tmp_path / "run", trial=trial, trial_metric="validation loss")
    run = tripwire.open_run(tmp_path / "run")
    assert run.status == "complete" and handler.stopped_by is None
    assert [s for s, _ in trial.reports] == [2, 4, 6]  # Hyperband's resource counts epochs
    recorded = [handler.history.value("validation loss", "raw", e, mode="eval") for e in (1, 3, 5)]
    assert [v for _, v in trial.reports] == pytest.approx(recorded)


def test_a_validation_name_the_estimator_does_not_log_is_an_error_offering_a_validation_name(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"trial_metric: 'validation los' is not a metric this estimator logs; "
                                          r"did you mean 'validation loss'\?") as err:
        _fit(tmp_path / "run", trial=_Trial(), trial_metric="validation los")
    assert "training loss?" not in str(err.value) and "available: training accuracy, training loss" in str(err.value)
    assert tripwire.open_run(tmp_path / "run").status == "failed"


def test_a_fit_with_no_validation_within_its_epochs_tells_the_trial_nothing_and_says_so(tmp_path: Path) -> None:
    trial = _Trial(max_resource=1)
    with pytest.raises(ConfigError, match=r"trial_metric: 'validation loss' held a value after none of this fit's "
                                          r"1 epoch\(s\) \(no validation ran"):
        _fit(tmp_path / "run", epochs=1, trial=trial, trial_metric="validation loss")
    assert trial.reports == [] and tripwire.open_run(tmp_path / "run").status == "failed"


def test_unvalidated_last_epochs_are_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    trial = _Trial(max_resource=5)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _fit(tmp_path / "run", epochs=5, trial=trial, trial_metric="validation loss")
    assert [s for s, _ in trial.reports] == [2, 4]
    assert "the last 1 epoch(s) of this fit had no validation: the trial was told epoch 4" in caplog.text


_EXIT_SCRIPT = """
import logging, sys
import numpy as np
from tripwire.integrations.mxnet import TripwireHandler
import mxnet as mx
from mxnet import gluon
from mxnet.gluon.contrib.estimator import Estimator
logging.basicConfig(level=logging.WARNING)
x = np.random.default_rng(0).normal(size=(40, 8)).astype("float32"); y = (x[:, 0] > 0).astype("float32")
net = gluon.nn.Dense(2, in_units=8); net.initialize()
est = Estimator(net, loss=gluon.loss.SoftmaxCrossEntropyLoss(),
                trainer=gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}))
est.logger.setLevel(logging.ERROR)
refused = TripwireHandler(out_dir=sys.argv[1] + "/refused")
try:
    est.fit([(mx.nd.array(x), mx.nd.array(y))], epochs=1, event_handlers=[refused])  # a list: refused
except ValueError:
    pass
healthy = TripwireHandler(out_dir=sys.argv[1] + "/healthy")
est.fit(gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=20), epochs=1, event_handlers=[healthy])
"""


def test_a_fit_that_raised_before_its_first_event_leaves_a_failed_run_that_says_it_is_empty(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_EXIT_SCRIPT), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert tripwire.open_run(tmp_path / "refused").status == "failed"
    said = [line for line in done.stderr.splitlines() if "nothing was captured" in line]
    assert len(said) == 1 and "refused" in said[0] and "saw no fit begin" in said[0], done.stderr
    assert tripwire.open_run(tmp_path / "healthy").status == "complete"  # a fit that ended: untouched
    assert "healthy" not in done.stderr


def test_end_step_checks_capture_parameters_and_names_an_empty_metric_name(tmp_path: Path) -> None:
    with TripwireHook(out_dir=str(tmp_path / "run"), save_interval=1) as hook:
        hook.begin_step("eval", summary=True)
        with pytest.raises(ConfigError, match=r"end_step.capture_parameters: got 'yes'; accepted: True, False or None"):
            hook.end_step(metrics={"val_acc": 0.5}, capture_parameters="yes")
        hook.end_step(metrics={"val_acc": 0.5}, capture_parameters=False)  # the step is still open: ends it
        hook.begin_step("eval", summary=True)
        with pytest.raises(ConfigError, match=r"end_step.metrics\[''\]: an empty name; accepted: a non-empty"):
            hook.end_step(metrics={"": 1.0})
