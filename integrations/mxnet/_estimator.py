"""``TripwireHandler``: tripwire as an event handler of ``mxnet.gluon.contrib.estimator``.

The estimator calls handlers in ascending ``priority``; its ``GradientUpdateHandler`` runs
``trainer.step`` at priority -2000 and its ``MetricHandler`` updates the metrics at -1000. This
handler's default priority, -3000, puts it first: at ``batch_end`` it reads the gradients and
parameters of the batch *before* the optimizer update, as :class:`TripwireHook` does by hand.

Per batch (mode ``train``): ``loss`` (the batch mean of the estimator's loss), and what the config
asks for: weights, biases, gradients, layer outputs, activation inputs, ReLU outputs. Gradients are
divided by the batch size that the estimator's ``GradientUpdateHandler`` passes to ``trainer.step``
(the sum of the loss arrays' first dimensions): the gradient the update applies, that of the batch's
mean loss (trial 27h: the batch sum was stored). Trial 28c: the batch's inputs (``batch[0]``) as
``inputs``, update ratios and the learning rate of ``estimator.trainer`` (``lr/0``) where the config
saves them; at the first batch a WARNING names the parameters with a gradient that
``estimator.trainer`` does not hold, and ``estimator.loss`` is checked against the net's outputs
(``loss_output_mismatch``: a softmax before ``SoftmaxCrossEntropyLoss``).
Per epoch (mode ``eval``, step = epoch index): the estimator's training and validation metrics as
the estimator names them (``training accuracy``, ``validation softmaxcrossentropyloss`` ...; those
whose name contains "loss" in collection ``losses``, the others in ``metrics``), read
when the next epoch begins or training ends (or :meth:`TripwireHandler.state_dict` is taken at the
epoch's end: trial 32g F1), once the ``MetricHandler`` and ``ValidationHandler`` have both finished
with that epoch; every epoch, unless the config sets ``save.modes.eval``. The
validation metrics only at the epochs after which a validation ran: with
``ValidationHandler(epoch_period=k)`` the others hold the last validation's values, not stored again
(trial 25c).

When a rule with the ``stop_training`` action fires, the handler sets its ``stop_training`` flag and
returns it from ``batch_end``/``epoch_end``: the estimator's own stopping mechanism ends the fit
after the current batch (``train_end`` handlers still run). A stop decided from an epoch's metrics
ends the fit after the next batch. A fit that another event handler ended before its epochs ran out
(an ``EarlyStoppingHandler``) ends the run ``stopped``, its ``stop_reason`` naming that handler
(trial 32g F3).

The planned length of training (the rules' windows) is the fit's, ``batches=`` or ``epochs=`` times
an epoch's batches as the estimator holds them after every handler's ``train_begin``, plus the train
steps of the training before this fit (a checkpoint's, an earlier fit's it continues; trial 32g F1).

Tuning: ``TripwireHandler(trial=trial, trial_metric="validation softmaxcrossentropyloss")`` reports
that epoch metric (an estimator name) to the trial when the epoch's metrics are read (the next
epoch's begin, or the end of training), with ``step`` = the epoch number from 1; a stop of the
tuner ends the fit as a stop decided from an epoch's metrics does (after the next batch). An epoch
after which no validation ran reports nothing (``ValidationHandler(epoch_period=2)``: steps 2, 4 ...).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import sys
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..._config import Config, ModeSaveConfig, SaveConfig, check_overrides, load_config
from ..._errors import ConfigError, TrainingStopped
from ..._finding import Decision, Finding
from ..._history import History
from ..._session import _EXITED, exits_cleanly, unregistered_rule_notes_muted
from ..._validate import check_trial, did_you_mean, keyword_parameters
from ...tune._trial import note_outside_stop
from .._hooks import defines_own, frames_above, same_as_any
from ._backend import mx
from ._hook import TripwireHook

_est = mx.gluon.contrib.estimator
logger = logging.getLogger("tripwire")


_ESTIMATOR_METRICS = ("the estimator's metrics at each epoch, named 'training ...' and 'validation ...': its "
                      "validation loss is 'validation softmaxcrossentropyloss' when train_metrics is left unset, "
                      "'validation loss' with val_metrics=mx.metric.Loss(); with train_metrics=Accuracy() it logs "
                      "'validation accuracy' and no loss")


_UNFITTED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Handlers whose run is open and that saw no fit begin (see :func:`_say_unfitted_at_exit`)."""


def _say_unfitted_at_exit() -> None:
    """Trial 25c: a handler whose ``fit`` raised before it called any handler (the estimator refused
    its arguments), or that was never passed to a fit, left a run that the session closed
    ``complete`` at exit, without a word, and ``tripwire inspect`` showed a finished training. Its
    run ends ``failed``, with a WARNING that says nothing was captured. Registered anew after each
    handler's session, so that it runs before the session's own exit handler (which would end it
    ``failed`` as well, :attr:`tripwire.Session.training`, with a more general WARNING)."""
    for handler in list(_UNFITTED):
        hook = handler.hook
        writer = hook.session.writer
        if hook.closed or writer is None or writer.closed:  # (the session's exit handler may have run first)
            continue
        logger.warning("tripwire: the process is exiting with the run %s open and empty: its TripwireHandler saw "
                       "no fit begin (est.fit raised before it called its event handlers, on its arguments say, "
                       "or the handler was not passed to fit), so nothing was captured; it is marked failed",
                       hook.out_dir)
        try:
            hook.close("failed")
        except Exception as exc:  # (one run's trouble must not keep the others open)
            logger.warning("tripwire: closing %s at exit failed: %s: %s", hook.out_dir, type(exc).__name__, exc)


def _fit_handlers(handler: Any, frame: Any) -> list[Any] | None:
    """The event handlers of the ``fit`` that called ``handler.train_begin`` (its ``event_handlers``,
    the defaults added: a list holding ``handler``, found in the frames above ``frame``); None where
    none is found (a hand-driven handler, an estimator whose fit names them otherwise)."""
    for f in frames_above(frame, 6):
        handlers = f.f_locals.get("event_handlers")
        if isinstance(handlers, (list, tuple)) and any(h is handler for h in handlers):
            return list(handlers)
    return None


def _validators(handlers: Sequence[Any] | None) -> list[Any] | None:
    """The fit's ``ValidationHandler``s, whose counters tell how many validations ran; None when
    that cannot be told (the handlers are not known, or one decides otherwise: a subclass with
    its own ``epoch_end``/``batch_end``)."""
    if handlers is None:
        return None
    found = [h for h in handlers if isinstance(h, _est.ValidationHandler)]
    if any(defines_own(h, event, _est.ValidationHandler) for h in found for event in ("epoch_end", "batch_end")):
        return None
    return found


def _validations(validators: Sequence[Any]) -> int:
    """The validations the ``ValidationHandler``s ran in this fit so far (each counts its epochs and
    batches from ``train_begin`` and validates at every ``epoch_period``-th / ``batch_period``-th)."""
    count = 0
    for v in validators:
        for period, done in ((getattr(v, "epoch_period", None), getattr(v, "current_epoch", 0)),
                             (getattr(v, "batch_period", None), getattr(v, "current_batch", 0))):
            if isinstance(period, int) and period > 0 and isinstance(done, int):
                count += done // period
    return count


def _weights_fingerprint(net: Any) -> Any:
    """A fingerprint of all ``net``'s parameters (``collect_params()``, whatever their ``grad_req``:
    freezing or unfreezing a block between two fits changes nothing; trial 25h): each one's sum of
    squares, on its device in one fused call (``multi_sum_sq``), and its sum (the sums of squares
    alone took other weights with the same norms, every sign flipped or two blocks of one shape
    swapped, for the same; trial 25h), then one host copy of two values per parameter (no host copy
    of the weights). None where it cannot be taken (a parameter not initialized, none, on several
    devices): the next fit is then a new training (trial 25e)."""
    try:
        params = sorted(net.collect_params().values(), key=id)  # (an order that grad_req does not change)
        arrays = [p.data() for p in params]
        if not arrays:
            return None
        # (float16 weights summed in float32: in float16 a sum past 65504 is inf, and every such net alike; trial 30d)
        arrays = [a if np.dtype(a.dtype).kind == "f" and np.dtype(a.dtype).itemsize >= 4 else a.astype("float32")
                  for a in arrays]
        sums = [a.sum().astype("float64") for a in arrays]
        squares = mx.nd.multi_sum_sq(*arrays, num_arrays=len(arrays)).astype("float64")
        return (tuple(id(p) for p in params),
                mx.nd.concat(squares, *[s.reshape((1,)) for s in sums], dim=0).asnumpy().astype("float64"))
    except Exception as exc:  # (a fingerprint is a hint: a fit is never broken by it; the fit then counts as new)
        logger.debug("tripwire: no fingerprint of the net's parameters (%s: %s): a later fit is a new training",
                     type(exc).__name__, exc)
        return None


def _update_batch_size(loss: Any) -> int | None:
    """The batch size the estimator's ``GradientUpdateHandler`` passes to ``trainer.step`` for this
    batch's ``loss`` (an NDArray, or a list of them, one per device): the sum of their first
    dimensions. None where that cannot be read (no loss, a 0-d array): the hook then divides by the
    number of loss elements (:meth:`TripwireHook.end_step`)."""
    arrays = loss if isinstance(loss, list) else [loss]
    if not arrays or not all(isinstance(a, mx.nd.NDArray) and len(a.shape) >= 1 for a in arrays):
        return None
    return sum(int(a.shape[0]) for a in arrays) or None


def _training_steps_before(session: Any) -> int:
    """The train steps of the session's current training so far: those since the start of the
    latest training that did not continue an earlier one (``Session.new_training``; a checkpoint's
    trainings come back with ``load_state_dict``). A fit's planned length counts them (trial 32g F1)."""
    start = 0
    for training in reversed(getattr(session, "_trainings", None) or []):
        start = int((training.get("steps") or {}).get("train", 0))
        if not training.get("continued"):
            break
    return max(0, int(session.mode_steps.get("train", 0)) - start)


#: The estimator's own handlers that never end a fit (left out of the handlers an outside stop names).
_NEVER_STOP: tuple[type, ...] = tuple(getattr(_est, n) for n in ("GradientUpdateHandler", "MetricHandler",
                                                                  "ValidationHandler", "LoggingHandler",
                                                                  "CheckpointHandler") if hasattr(_est, n))


def _outside_stop_reason(handlers: Sequence[Any], step: int, first_epoch: int) -> str:
    """Why a fit that another of its event ``handlers`` ended stopped, for its run's ``stop_reason``:
    ``the estimator's stop was set outside tripwire (train step N): `` and then the stop of the
    ``EarlyStoppingHandler`` (or subclass) that set its ``stop_training``, with its monitor, the
    epoch (the run's eval step: ``first_epoch``, the fit's first, plus its ``stopped_epoch``), the
    improvement it waited for and the best value; else ``by another event handler (...)``, naming the
    handlers whose ``stop_training`` is set, or else those that may have returned True (not the
    estimator's own, which never end a fit early)."""
    head = f"the estimator's stop was set outside tripwire (train step {step})"
    flagged = [h for h in handlers if getattr(h, "stop_training", False) is True]
    for h in flagged:
        if not isinstance(h, _est.EarlyStoppingHandler):
            continue
        monitor = getattr(h, "monitor", None)
        try:
            name = str(monitor.get()[0])
        except Exception:  # (a monitor of the user's that cannot say its name: its type instead)
            name = type(monitor).__name__
        stopped = getattr(h, "stopped_epoch", 0)
        epoch = first_epoch + stopped if isinstance(stopped, int) else first_epoch
        at = f"epoch {epoch}" + (f" (this fit's epoch {stopped})" if epoch != stopped else "")
        wait, patience = getattr(h, "wait", None), getattr(h, "patience", None)
        delta = abs(float(getattr(h, "min_delta", 0.0) or 0.0))
        baseline = getattr(h, "baseline", None)
        did = (f"{name!r} did not improve by more than min_delta={delta:g} in the last {wait} epoch(s) "
               f"(patience={patience}" + (f", baseline={baseline:g}" if isinstance(baseline, (int, float)) else "")
               + ")")
        best = getattr(h, "best", None)
        if isinstance(best, (int, float, np.generic)) and np.isfinite(best):
            did += f"; best {float(best):.6g}"
        return f"{head}: {type(h).__name__}(monitor={name!r}): {at}: early stopping: {did}"
    if flagged:
        names = [type(h).__name__ for h in flagged]
        return f"{head}: by another event handler ({', '.join(dict.fromkeys(names))}: its stop_training is set)"
    names = [type(h).__name__ for h in handlers if type(h) not in _NEVER_STOP]
    which = f" ({', '.join(dict.fromkeys(names))})" if names else ""
    return (f"{head}: by another event handler{which}: its batch_end or epoch_end returned True before the fit's "
            f"epochs (or batches) ran out")


def _batch_inputs(batch: Any) -> Any:
    """The inputs of an estimator's batch: its first element (the estimator reads ``batch[0]`` as the
    data and ``batch[1]`` as the label), an NDArray, or a list of them; None (with a WARNING once)
    where that is not what it holds."""
    data = batch[0] if isinstance(batch, (list, tuple)) and batch else None
    if isinstance(data, mx.nd.NDArray) or (isinstance(data, (list, tuple)) and data
                                           and all(isinstance(x, mx.nd.NDArray) for x in data)):
        return data
    global _INPUTS_SAID
    if not _INPUTS_SAID:
        _INPUTS_SAID = True
        logger.warning("tripwire: the estimator's batch holds no NDArray as its first element (%s), which the "
                       "estimator reads as the data: the inputs are not captured", type(data).__name__)
    return None


_INPUTS_SAID = False


class TripwireHandler(_est.TrainBegin, _est.EpochBegin, _est.BatchBegin, _est.BatchEnd, _est.EpochEnd, _est.TrainEnd):
    """Event handler for ``Estimator.fit``. Arguments as :class:`TripwireHook`, plus ``priority``
    (default -3000: before the estimator's gradient update at -2000). ``trial``/``trial_metric``:
    a tuner trial and the estimator's name of an epoch metric (``validation accuracy``), reported
    once per epoch (see the module docstring).

    ``handler.hook`` is the underlying :class:`TripwireHook`; ``findings`` (a list of
    :class:`tripwire.Finding`), ``stopped_by`` (the Finding that stopped training, or None),
    ``stop_reason`` (why training stopped, or None), ``stop_training``, ``history`` and ``out_dir``
    tell what happened.
    """

    #: the fingerprints of the net's parameters at the last fit's epoch ends and at its end (empty:
    #: none ended): whether the next fit continues training them (:func:`_weights_fingerprint`;
    #: trials 25e, 25h, 26j)
    _fit_end: tuple[Any, ...] = ()

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
        with unregistered_rule_notes_muted():  # (the hook's Session refuses an unknown rule: said once, trial 40b F3)
            cfg = load_config(config, **overrides)
        if "eval" not in cfg.save.modes:  # epoch records: every epoch unless the config says otherwise
            save = cfg.save
            modes = {**save.modes, "eval": ModeSaveConfig(interval=1, start_step=0, end_step=None, steps=())}
            cfg = dataclasses.replace(cfg, save=SaveConfig(save.interval, save.start_step, save.end_step, save.steps, modes))
        self.hook = TripwireHook(cfg, rank=rank, world_size=world_size, trial=trial, trial_metric=trial_metric)
        self.stop_training = False
        self._inputs: Any = None  # the inputs of the batch in progress, where its step saves them
        self._net: Any = None
        self._estimator: Any = None  # the estimator of the fit in progress (state_dict writes its epoch's metrics)
        self._epoch = 0
        self._epoch_pending = False
        # trial 32g F1: the epoch's end was reached (this handler's epoch_end ran, the next epoch not begun),
        # the epochs this fit ended so far, and the fit's first epoch (its eval step)
        self._epoch_done = False
        self._fit_epochs_ended = 0
        self._fit_first_epoch = 0
        self._unvalidated_state_said = False  # (see state_dict)
        # the train steps of this training before this fit (a checkpoint's after load_state_dict, an earlier
        # fit's that this one continues): the planned length counts them (trial 32g F1)
        self._steps_before = 0
        self._epoch_batches = 0  # batches of this fit's first epoch so far (its length, once it ends)
        self._epoch_ends: list[Any] = []  # the parameters' fingerprints at this fit's epoch ends
        self._planned = False  # the fit's planned length is known to the rules
        self._bound = False  # the rules' default 'val_loss' pointed at the estimator's names (_bind_validation)
        # the fit's ValidationHandlers (None: unknown; a validation metric then counts where it holds
        # values) and the validations they had run at the last epoch read (trial 25c)
        self._validators: list[Any] | None = None
        self._validations_read = 0
        self._handlers: list[Any] | None = None  # the fit's event handlers (None: not found)
        # this fit's epochs that told the trial nothing (no validation after them), whether one told
        # it, and the last epoch read / told (trial 25c)
        self._trial_waits, self._trial_told, self._trial_epochs = 0, False, (0, 0)
        # a run ended failed, with a WARNING, at exit, when no fit through this handler reached its
        # train_end (trial 25c: a fit that raised before its first event left it 'complete')
        self.hook.session.training = True
        _UNFITTED.add(self)
        atexit.unregister(_say_unfitted_at_exit)  # (exit handlers run last registered first: before the session's)
        atexit.register(_say_unfitted_at_exit)

    # ----------------------------------------------------------------------------- events
    def train_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        if self._net is not None and self._net is not estimator.net:
            # refused before anything changes: the run the last fit ended stays as it ended (trial 25h:
            # it was reopened first, then read 'running', and ended 'failed' at exit)
            raise ConfigError("TripwireHandler: one handler follows one network; create a new handler per "
                              f"estimator (this handler follows {type(self._net).__name__} "
                              f"{id(self._net):#x}, got the estimator of {type(estimator.net).__name__} "
                              f"{id(estimator.net):#x})")
        fit_end, self._fit_end, self._epoch_ends = self._fit_end, (), []
        if self.hook.closed:  # a second fit through this handler ("2 more epochs"): continues the run
            # a training of its own; it continues the last when the net's weights are as that fit left
            # them or as one of its epochs ended (restored after it by a handler that runs after this
            # one's train_end, or a best checkpoint loaded: trial 26j), and the rules keep their view
            # of the earlier fits; else (the net initialized again, other parameters loaded) a new
            # training: the rules judge its steps alone (trials 25c, 25e)
            # (reopen: it crashed with "TripwireHook.begin_step: the hook is closed"; trial 17e)
            self.hook.reopen(continued=bool(fit_end) and estimator.net is self._net
                             and same_as_any(fit_end, _weights_fingerprint(estimator.net)))
        _UNFITTED.discard(self)
        self.hook.session.training = True  # (a fit is running: until its train_end; see __init__)
        self.stop_training = self.hook.should_stop
        # (the ValidationHandlers' train_begin, after this one's, counts their validations from 0)
        self._handlers = _fit_handlers(self, sys._getframe(1))
        self._validators = _validators(self._handlers)
        self._validations_read = 0
        self._trial_waits, self._trial_told, self._trial_epochs = 0, False, (0, 0)
        if self._net is None:
            self.hook.register_block(estimator.net)
            self._net = estimator.net
        self._estimator = estimator
        self._epoch_done, self._fit_epochs_ended, self._fit_first_epoch = False, 0, self._epoch
        self._steps_before = _training_steps_before(self.hook.session)
        # trial 28c: the fit's Trainer: the parameters it leaves out (a WARNING at the first batch), the
        # learning rate and which parameters an update moves (update ratios)
        trainer = getattr(estimator, "trainer", None)
        self.hook._use_trainers([trainer] if isinstance(trainer, mx.gluon.Trainer) else [],
                                "no Trainer: the estimator's trainer leaves them out")
        # the planned length of training for the rules' windows (loss_not_decreasing): fit's
        # batches=, else epochs= times the batches of an epoch, known when the first one ends; read
        # after every handler's train_begin (a CheckpointHandler resuming lowers max_epoch/max_batch to
        # what remains), plus the steps this training ran before this fit (trial 32g F1: a resumed fit
        # planned its remaining epochs alone, half the training)
        self._epoch_batches, self._planned = 0, False

    def epoch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        self._epoch_done = False
        max_batch = getattr(estimator, "max_batch", None)
        if not self._planned and isinstance(max_batch, int) and max_batch >= 1:
            self.hook.session.set_planned_steps(self._steps_before + max_batch)
            self._planned = True
        with self._closing_on_error():
            self._capture_epoch(estimator)

    def batch_begin(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        with self._closing_on_error():
            plan = self.hook.begin_step("train")
            # the batch's inputs (trial 28c: not captured; input_not_normalized could not run), where saved
            self._inputs = _batch_inputs(kwargs.get("batch")) if plan.wants("inputs") else None

    def batch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        loss = kwargs.get("loss")
        inputs, self._inputs = self._inputs, None
        with self._closing_on_error():
            if not self.hook._output_checked:  # (trial 28c: a softmax before SoftmaxCrossEntropyLoss; once)
                pred = kwargs.get("pred")
                first = pred[0] if isinstance(pred, (list, tuple)) and pred else pred
                if isinstance(first, mx.nd.NDArray):
                    self.hook._output_probe = (getattr(estimator, "loss", None), first)
            # the gradients divided by the batch size the GradientUpdateHandler gives trainer.step (trial 27h)
            self._act(self.hook.end_step(loss=loss, batch_size=_update_batch_size(loss), inputs=inputs))
        self._epoch_pending = True
        self._epoch_batches += 1
        return self.stop_training

    def epoch_end(self, estimator: Any, *args: Any, **kwargs: Any) -> bool:
        # the parameters as this epoch ended (the update of its last batch done at batch_end), which
        # a handler may restore after this one's train_end, or a CheckpointHandler saved (trial 26j);
        # one fused reduction and one small host read per epoch
        fingerprint = _weights_fingerprint(estimator.net)
        if fingerprint is not None:
            self._epoch_ends.append(fingerprint)
        self._epoch_done = self._epoch_pending  # (state_dict between here and the next epoch writes it)
        self._fit_epochs_ended += 1
        max_epoch = getattr(estimator, "max_epoch", None)
        if not self._planned and isinstance(max_epoch, int) and max_epoch >= 1 and self._epoch_batches:
            self.hook.session.set_planned_steps(self._steps_before + max_epoch * self._epoch_batches)
            self._planned = True
        return self.stop_training

    def train_end(self, estimator: Any, *args: Any, **kwargs: Any) -> None:
        # (does the next fit continue this one? trials 25e, 26j): its parameters now, or as an epoch ended
        now = _weights_fingerprint(estimator.net)
        self._fit_end, self._epoch_ends = (*self._epoch_ends, *(() if now is None else (now,))), []
        with self._closing_on_error():
            self._capture_epoch(estimator, final=True)
        self._epoch_done, self._estimator = False, None
        self._check_trial_told()
        outside = self._note_outside_stop()
        self.hook.session.training = False  # the fit reached its end: complete (or stopped), not failed
        self.hook.close("stopped" if outside else None)

    def close(self, status: str | None = None) -> None:
        """End the run (``fit`` does at its end; after a ``fit`` that raised elsewhere, say)."""
        self.hook.close(status)

    def __enter__(self) -> TripwireHandler:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exits_cleanly(exc) and not self.hook.closed:
            # (sys.exit() or sys.exit(0) inside the fit: the program's own end, as the Lightning and Keras
            # callbacks end it; trial 42j: failed, "SystemExit: 0")
            session = self.hook.session
            session.stop_reason = session.stop_reason or _EXITED
            self.hook.close("stopped")
            return
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
            if isinstance(exc, TrainingStopped):  # the raise action stops training too (trial 33g F3)
                self.stop_training = True
            self.hook.close("stopped" if isinstance(exc, TrainingStopped) else "failed")
            raise

    def _capture_epoch(self, estimator: Any, final: bool = False) -> None:
        """Record the last epoch's training and validation metrics (mode ``eval``); the validation
        metrics only when a validation ran after that epoch (:meth:`_validated`)."""
        if not self._epoch_pending:
            return
        self._epoch_pending = False
        epoch, self._epoch = self._epoch, self._epoch + 1
        validated = self._validated()
        values: dict[str, float] = {}
        names: list[str] = []  # every metric the estimator logs, whether it holds a value now or not
        for group, validation in ((estimator.train_metrics, False), (estimator.val_metrics, True)):
            for m in group:
                for sub in getattr(m, "metrics", [m]):
                    if not getattr(sub, "num_inst", 0):
                        names.append(str(getattr(sub, "name", "")))
                        continue
                    name, value = sub.get()
                    names.append(str(name))
                    # (trial 25c: an epoch after which no validation ran stored the last one's values again)
                    if validation and not validated:
                        continue
                    values[str(name)] = float(value)
        # the rules' default 'val_loss' bound at the first validation (trial 25c: with epoch_period=2
        # epoch 0 has none, and the WARNING said the estimator logs no validation loss)
        if values and not self._bound and (validated and any(n.startswith("validation ") for n in values)
                                           or not self._validators or final):
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
        if self.hook.trial is not None:
            self._tell_trial(values, names, epoch + 1)

    def _note_outside_stop(self) -> bool:
        """A fit that another event handler ended before its epochs (or batches) ran out: the
        estimator's ``StoppingHandler`` did not stop it, nor did this handler (a rule's or the tuner's
        stop), so one of the fit's other handlers returned True from ``batch_end``/``epoch_end`` (an
        ``EarlyStoppingHandler``, one of the user's). The run's ``stop_reason`` names it
        (:func:`_outside_stop_reason`), the run ends ``stopped`` (returns True), and a tuning trial
        is told (:func:`tripwire.tune._trial.note_outside_stop`: its journaled reason reads
        ``completed: EarlyStoppingHandler(...)``), as the Keras and Lightning callbacks record their
        frameworks' ``EarlyStopping`` (trial 32g F3: the run read ``complete``, with no reason). False
        where the fit ran its length, this handler stopped it, or the fit's handlers are not known."""
        session = self.hook.session
        if (self.stop_training or self.hook.stopped_by is not None or self.hook.trial_stopped
                or session.stop_reason is not None or self._handlers is None or self.hook.closed):
            return False
        stoppers = [h for h in self._handlers if isinstance(h, _est.StoppingHandler)]
        if not stoppers or any(getattr(h, "stop_training", False) for h in stoppers):
            return False  # (its epochs or batches ran out: whoever else asked to stop then ended nothing early)
        step = max(0, int(session.mode_steps.get("train", 0)) - 1)
        others = [h for h in self._handlers if h is not self and not isinstance(h, _est.StoppingHandler)]
        session.stop_reason = _outside_stop_reason(others, step, self._fit_first_epoch)
        logger.info("tripwire: %s", session.stop_reason)
        if self.hook.trial is not None:
            note_outside_stop(self.hook.trial, session.stop_reason)
        return True

    def _validated(self) -> bool:
        """Whether a validation ran since the last epoch read: the fit's ``ValidationHandler``s ran
        more validations than then. Where they are not known (None) or there are none (a handler of
        the user's own may call ``est.evaluate``), a validation metric counts where it holds values."""
        if not self._validators:
            return True
        count = _validations(self._validators)
        validated, self._validations_read = count > self._validations_read, count
        return validated

    def _tell_trial(self, values: Mapping[str, float], names: Sequence[str], epoch: int) -> None:
        """Report ``trial_metric`` of ``epoch`` (from 1) to the trial; an epoch without it, though the
        estimator logs it (no validation ran after that epoch: ``ValidationHandler(epoch_period=2)``),
        reports nothing (trial 25c: it raised, and suggested a training metric); a name the estimator
        does not log is a ConfigError that lists those it does."""
        metric = str(self.hook.trial_metric)
        self._trial_epochs = (epoch, self._trial_epochs[1])
        if metric in values:
            self._trial_told, self._trial_epochs = True, (epoch, epoch)
            if self.hook._tell_trial(values, how=_ESTIMATOR_METRICS, step=epoch):
                self.stop_training = True
            return
        if metric in names:
            self._trial_waits += 1
            if self.hook.trial_stopped:
                self.stop_training = True
            return
        logged = sorted(set(names))
        side = metric.split(" ", 1)[0]  # (a validation name: the closest validation one; trial 25c)
        near = [n for n in logged if n.split(" ", 1)[0] == side] or logged
        error = ConfigError(f"trial_metric: {metric!r} is not a metric this estimator logs"
                            f"{did_you_mean(metric, near)}; available: {', '.join(logged) or 'none'} "
                            f"({_ESTIMATOR_METRICS})")
        self.hook.close("failed")  # the fit ends here, through our own error: the run with it
        raise error

    def _check_trial_told(self) -> None:
        """At the end of a fit with ``trial=``: a ConfigError when no epoch told the trial anything (no
        validation ran within the fit's epochs), as the Keras callback's; a WARNING when the last
        epochs trained had no validation, so the trial's resource is the last validated epoch."""
        if self.hook.trial is None or self.hook.closed or self.hook.trial_stopped or self.hook.stopped_by is not None:
            return
        metric = self.hook.trial_metric
        trained, told = self._trial_epochs
        if self._trial_waits and not self._trial_told:
            error = ConfigError(
                f"trial_metric: {metric!r} held a value after none of this fit's {self._trial_waits} epoch(s) (no "
                "validation ran: give fit val_data=, or a ValidationHandler whose epoch_period validates within the "
                "fit's epochs); the trial was told nothing")
            self.hook.close("failed")
            raise error
        if self._trial_told and trained > told:
            logger.warning("tripwire: the last %d epoch(s) of this fit had no validation: the trial was told epoch %d "
                           "(its resource) and that epoch's value, while epoch %d was the last trained; validate "
                           "after the last epoch (an epoch_period that divides the number of epochs)",
                           trained - told, told, trained)

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
    def stop_reason(self) -> str | None:
        """Why training stopped, or None: the finding that stopped it, the tuner's stop (see
        :attr:`TripwireHook.stop_reason`), or another event handler that ended the fit before its
        epochs ran out (an ``EarlyStoppingHandler``: :meth:`_note_outside_stop`); the last fit's, as
        the run's end marker records it."""
        return self.hook.stop_reason

    @property
    def history(self) -> History:
        return self.hook.history

    @property
    def out_dir(self) -> Any:
        """Where the run is written (as on the hook and the other integrations)."""
        return self.hook.out_dir

    @property
    def trial_stopped(self) -> bool:
        """With ``trial=``: whether the tuner told this trial to stop (the estimator's fit then ended
        after that epoch), as on the hook and the other integrations; False without a trial."""
        return bool(self.hook.trial_stopped)

    def state_dict(self) -> dict[str, Any]:
        """The handler's state for a checkpoint: ``{"hook": TripwireHook.state_dict(), "epoch": ...}``
        (the step counters, the rules' state, the epochs seen), to pickle beside the net's and the
        Trainer's files; taken between batches, after the estimator's update (see
        :meth:`TripwireHook.state_dict`).

        Taken at an epoch's end (in an ``EpochEnd`` handler, as a ``CheckpointHandler`` saves), it first
        writes that epoch's training and validation metrics (its eval step), which the handler
        otherwise writes when the next epoch begins: the checkpoint holds the epoch, and the resumed
        fit's epochs keep their eval steps (trial 32g F1: the epoch checkpointed at was lost, and each
        later one stored one eval step early). That needs the fit's ``ValidationHandler`` done with the
        epoch: a state taken before it ran (an ``EpochEnd`` handler with a priority below its -1000) is
        taken without the epoch, which the run then holds only if this process writes it at the next
        epoch's begin; the resumed epochs still keep their steps (``epoch`` counts the epoch ended), and
        a WARNING (once) says so."""
        epoch = self._epoch
        if self._epoch_pending and self._epoch_done and self._estimator is not None:
            if self._validations_done():
                with self._closing_on_error():
                    self._capture_epoch(self._estimator)
                self._epoch_done = False
                epoch = self._epoch
            else:
                epoch = self._epoch + 1  # (the epoch ended is the checkpoint's: the resumed fit begins after it)
                if not self._unvalidated_state_said:
                    self._unvalidated_state_said = True
                    logger.warning(
                        "tripwire: TripwireHandler.state_dict() at the end of epoch %d was taken before the "
                        "ValidationHandler validated that epoch (an EpochEnd handler whose priority is below the "
                        "ValidationHandler's, -1000), so the checkpoint holds no metrics of epoch %d: a training "
                        "resumed from it lacks them (its later epochs keep their eval steps). Take the state after "
                        "the validation, in an EpochEnd handler with a priority above -1000 (a CheckpointHandler's "
                        "is 0); said once", self._epoch, self._epoch)
        return {"hook": self.hook.state_dict(), "epoch": epoch}

    def _validations_done(self) -> bool:
        """Whether the fit's ``ValidationHandler``s have all ended the epoch that just ended (each counts
        the epochs it ended in ``current_epoch``); True where they are not known (None: the epoch's
        metrics are taken as they stand) or there are none."""
        if not self._validators:
            return True
        return all(getattr(v, "current_epoch", None) == self._fit_epochs_ended for v in self._validators)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a checkpoint's :meth:`state_dict`, on a handler built with the same config and
        ``out_dir``, before the resumed fit (see :meth:`TripwireHook.load_state_dict`). Anything but
        what ``state_dict`` returned is a ConfigError."""
        if not isinstance(state, Mapping) or "hook" not in state:
            got = (f"a mapping with the keys {sorted(map(str, state))[:8]}" if isinstance(state, Mapping)
                   else f"a {type(state).__name__}")
            raise ConfigError(f"TripwireHandler.load_state_dict: got {got}; accepted: what "
                              f"TripwireHandler.state_dict() returned (keys hook, epoch)")
        self.hook.load_state_dict(state["hook"])
        self._epoch = int(state.get("epoch", 0))


__all__ = ["TripwireHandler"]
