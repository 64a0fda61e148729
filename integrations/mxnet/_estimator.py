"""``TripwireHandler``: tripwire as an event handler of ``mxnet.gluon.contrib.estimator``.

The estimator calls handlers in ascending ``priority``; its ``GradientUpdateHandler`` runs
``trainer.step`` at priority -2000 and its ``MetricHandler`` updates the metrics at -1000. This
handler's default priority, -3000, puts it first: at ``batch_end`` it reads the gradients and
parameters of the batch *before* the optimizer update, as :class:`TripwireHook` does by hand.

Per batch (mode ``train``): ``loss`` (the batch mean of the estimator's loss), and what the config
asks for: weights, biases, gradients, layer outputs, activation inputs, ReLU outputs.
Per epoch (mode ``eval``, step = epoch index): the estimator's training and validation metrics as
the estimator names them (``training accuracy``, ``validation softmaxcrossentropyloss`` ...; those
whose name contains "loss" in collection ``losses``, the others in ``metrics``), read
when the next epoch begins or training ends, once the ``MetricHandler`` and ``ValidationHandler``
have both finished with that epoch; every epoch, unless the config sets ``save.modes.eval``.

When a rule with the ``stop_training`` action fires, the handler sets its ``stop_training`` flag and
returns it from ``batch_end``/``epoch_end``: the estimator's own stopping mechanism ends the fit
after the current batch (``train_end`` handlers still run). A stop decided from an epoch's metrics
ends the fit after the next batch.

Tuning: ``TripwireHandler(trial=trial, trial_metric="validation softmaxcrossentropyloss")`` reports
that epoch metric (an estimator name) to the trial when the epoch's metrics are read (the next
epoch's begin, or the end of training), with ``step`` = the epoch number from 1; a stop of the
tuner ends the fit as a stop decided from an epoch's metrics does (after the next batch).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ..._config import Config, ModeSaveConfig, SaveConfig, check_overrides, load_config
from ..._errors import ConfigError, TrainingStopped
from ..._finding import Decision, Finding
from ..._history import History
from ..._validate import check_trial, keyword_parameters
from ._backend import mx
from ._hook import TripwireHook

_est = mx.gluon.contrib.estimator
logger = logging.getLogger("tripwire")


_ESTIMATOR_METRICS = ("the estimator's metrics at each epoch, named 'training ...' and 'validation ...': its "
                      "validation loss is 'validation softmaxcrossentropyloss' when train_metrics is left unset, "
                      "'validation loss' with val_metrics=mx.metric.Loss(); with train_metrics=Accuracy() it logs "
                      "'validation accuracy' and no loss")


class TripwireHandler(_est.TrainBegin, _est.EpochBegin, _est.BatchBegin, _est.BatchEnd, _est.EpochEnd, _est.TrainEnd):
    """Event handler for ``Estimator.fit``. Arguments as :class:`TripwireHook`, plus ``priority``
    (default -3000: before the estimator's gradient update at -2000). ``trial``/``trial_metric``:
    a tuner trial and the estimator's name of an epoch metric (``validation accuracy``), reported
    once per epoch (see the module docstring).

    ``handler.hook`` is the underlying :class:`TripwireHook`; ``findings`` (a list of
    :class:`tripwire.Finding`), ``stopped_by`` (the Finding that stopped training, or None) and
    ``stop_training`` tell what happened.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        priority: float = -3000,
        rank: int = 0,
        world_size: int = 1,
        trial: Any = None,
        trial_metric: str | None = None,
        **overrides: Any,
    ) -> None:
        check_trial(trial, trial_metric, example="an epoch metric as the estimator names it, e.g. "
                                                 "'validation softmaxcrossentropyloss' or 'validation accuracy'")
        if isinstance(priority, bool) or not isinstance(priority, (int, float)):
            raise ConfigError(f"priority: got {priority!r}; accepted: a number (lower runs earlier; "
                              "below -2000 to see gradients before the estimator's trainer.step)")
        self.priority = priority
        check_overrides(type(self).__name__, overrides, keyword_parameters(type(self)))  # (trial 24h)
        cfg = load_config(config, **overrides)
        if "eval" not in cfg.save.modes:  # epoch records: every epoch unless the config says otherwise
            save = cfg.save
            modes = {**save.modes, "eval": ModeSaveConfig(interval=1)}
            cfg = dataclasses.replace(cfg, save=SaveConfig(save.interval, save.start_step, save.end_step, save.steps, modes))
        self.hook = TripwireHook(cfg, rank=rank, world_size=world_size, trial=trial, trial_metric=trial_metric)
        self.stop_training = False
        self._net: Any = None
        self._epoch = 0
        self._epoch_pending = False
        self._epoch_batches = 0  # batches of this fit's first epoch so far (its length, once it ends)
        self._planned = False  # the fit's planned length is known to the rules
        self._bound = False  # the rules' default 'val_loss' pointed at the estimator's names (_bind_validation)

    # ----------------------------------------------------------------------------- events
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self.hook.closed:  # a second fit through this handler ("2 more epochs"): continues the run
            self.hook.reopen()  # (it crashed with "TripwireHook.begin_step: the hook is closed"; trial 17e)
        self.stop_training = self.hook.should_stop
        if self._net is not estimator.net:
            if self._net is not None:
                raise ConfigError("TripwireHandler: one handler follows one network; create a new handler per estimator")
            self.hook.register_block(estimator.net)
            self._net = estimator.net
        # the planned length of training for the rules' windows (loss_not_decreasing): fit's
        # batches=, else epochs= times the batches of an epoch, known when the first one ends
        self._epoch_batches, self._planned = 0, False
        max_batch = getattr(estimator, "max_batch", None)
        if isinstance(max_batch, int) and max_batch >= 1:
            self.hook.session.set_planned_steps(max_batch)
            self._planned = True

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        with self._closing_on_error():
            self._capture_epoch(estimator)

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        with self._closing_on_error():
            self.hook.begin_step("train")

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        with self._closing_on_error():
            self._act(self.hook.end_step(loss=kwargs.get("loss")))
        self._epoch_pending = True
        self._epoch_batches += 1
        return self.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        max_epoch = getattr(estimator, "max_epoch", None)
        if not self._planned and isinstance(max_epoch, int) and max_epoch >= 1 and self._epoch_batches:
            self.hook.session.set_planned_steps(max_epoch * self._epoch_batches)
            self._planned = True
        return self.stop_training

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        with self._closing_on_error():
            self._capture_epoch(estimator)
        self.hook.close()

    def close(self, status: str | None = None) -> None:
        """End the run (``fit`` does at its end; after a ``fit`` that raised elsewhere, say)."""
        self.hook.close(status)

    def __enter__(self) -> TripwireHandler:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.hook.__exit__(exc_type, exc, tb)

    # ---------------------------------------------------------------------------- helpers
    @contextlib.contextmanager
    def _closing_on_error(self) -> Iterator[None]:
        """An error out of this handler's event (the ``raise`` action's TrainingStopped, say) ends
        the run first: the estimator runs no ``train_end`` handler after an error, and the run
        read ``running``, then ``failed`` at exit, for a run a rule had stopped (trial 17e)."""
        try:
            yield
        except BaseException as exc:
            self.hook.close("stopped" if isinstance(exc, TrainingStopped) else "failed")
            raise

    def _capture_epoch(self, estimator: Any) -> None:
        """Record the last epoch's training and validation metrics (mode ``eval``)."""
        if not self._epoch_pending:
            return
        self._epoch_pending = False
        epoch, self._epoch = self._epoch, self._epoch + 1
        values: dict[str, float] = {}
        for group in (estimator.train_metrics, estimator.val_metrics):
            for m in group:
                for sub in getattr(m, "metrics", [m]):
                    if getattr(sub, "num_inst", 0):
                        name, value = sub.get()
                        values[str(name)] = float(value)
        if values and not self._bound:
            self._bound = True
            self._bind_validation(values)
        plan = self.hook.begin_step("eval", epoch)
        if not plan or not values:
            self.hook.end_step(capture_parameters=False)
        else:
            self._act(self.hook.end_step(metrics=values, capture_parameters=False))
        # trial 20c: the epoch's metric to the trial (read here, once the ValidationHandler, which
        # runs after this handler's epoch_end, has filled it); a stop ends the fit after the next batch
        # (trial 20d: a missing metric's error told the handler's user to call end_step)
        if self.hook.trial is not None and self.hook._tell_trial(values, how=_ESTIMATOR_METRICS):
            self.stop_training = True

    def _bind_validation(self, values: Mapping[str, float]) -> None:
        """The estimator logs no ``val_loss``: a rule whose ``validation`` is left at that default
        (``overfit``, ``overtraining``) reads the estimator's validation loss metric instead
        (``validation softmaxcrossentropyloss``), or, where it has none, is named now, at the first
        epoch, with the metrics there are (it read nothing all fit, said at the end; trial 17e)."""
        losses = [n for n in values if n.startswith("validation ") and "loss" in n.lower()]
        bound: dict[str, dict[str, str]] = {}
        unread: list[str] = []
        for rule in self.hook.session.rules:
            if rule.named_inputs().get("validation") != "val_loss" or not hasattr(rule, "validation"):
                continue
            if losses:
                rule.validation = losses[0]  # type: ignore[attr-defined]
                bound[rule.name] = {"validation": losses[0]}
            else:
                unread.append(rule.name)
        if bound:
            self.hook.session.bind_inputs(bound)
            logger.info("tripwire: %s read the estimator's %r (for the default 'val_loss')", ", ".join(bound), losses[0])
        if unread:
            logger.warning(
                "tripwire: %s read%s validation='val_loss', which the estimator does not log, and it logs no "
                "validation loss (its epoch metrics: %s): add a loss metric (mx.metric.Loss()) to val_metrics, "
                "or give the rule validation= one of those names", ", ".join(map(repr, unread)),
                "s" if len(unread) == 1 else "", ", ".join(map(repr, values)))

    def _act(self, decision: Decision) -> None:
        if decision.stop:
            self.stop_training = True

    @property
    def findings(self) -> list[Finding]:
        return self.hook.findings

    @property
    def stopped_by(self) -> Finding | None:
        return self.hook.stopped_by

    @property
    def history(self) -> History:
        return self.hook.history

    @property
    def out_dir(self) -> Any:
        """Where the run is written (as on the hook and the other integrations)."""
        return self.hook.out_dir

    def state_dict(self) -> dict[str, Any]:
        return {"hook": self.hook.state_dict(), "epoch": self._epoch}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.hook.load_state_dict(state.get("hook", {}))
        self._epoch = int(state.get("epoch", 0))


__all__ = ["TripwireHandler"]
