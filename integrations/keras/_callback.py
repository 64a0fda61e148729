"""``TripwireCallback``: capture a Keras 3 fit, run tripwire's rules, stop training when one fires.

What it captures (names and kinds follow docs/architecture.md; details in docs/keras.md):

- train batches, mode ``train``, step = train batches run so far (across epochs and fits):
  ``loss`` (losses: the batch's own loss, from a wrapper of the optimizer's ``scale_loss``, which
  Keras's train step hands it to before the backward pass; on jax, recovered from the state of
  Keras's loss tracker after the step; where neither gives it, the batch log, Keras's running mean
  over the epoch) and every other batch log (metrics), ``lr/0``
  (optimizer: the rate the step uses, read as the batch begins; a model holding several optimizers,
  a GAN's: ``lr/<attribute>.0`` of each whose ``apply`` ran in the step), ``loss_scale`` (optimizer: a
  ``LossScaleOptimizer``'s dynamic scale, read as the batch begins, on jax from the trainer's state;
  where only rules that read the
  optimizer kind optionally ask for it, ``loss_scale_collapse`` of the default set, the loss scale
  alone: no ``lr/0``, no update ratios), weights and biases as ``<layer>/<variable>``
  (every tensor of a layer is named by the layer's place in the model's layer tree, nested models
  included: :func:`_layer_tree`), ``gradients/<name>`` and ``update_ratio/<name>`` (only at steps where the optimizer
  updates the weights: a save step that is a micro-step of ``gradient_accumulation_steps`` has
  them taken at the next update, recorded there) from a wrapper
  of the optimizer's ``apply`` (of each optimizer the model holds: ``model.optimizer`` and those in
  its attributes; installed for the fit; a flag check on steps that are not saved), layer outputs
  ``<layer>/output`` (activations; a recurrent layer's at the layer, not its cell),
  ``<layer>/<fn>/input`` (activation_inputs) and ``<layer>/relu/output`` (relu_outputs) of layers applying relu/tanh/sigmoid, from wrappers
  installed only for the batches of save steps; ``inputs``, ``labels`` and ``predictions`` from
  a wrapper of ``model.compute_loss(x, y, y_pred, ...)`` installed likewise (train, eval, test;
  not an input that goes straight into index layers only: token ids into an ``Embedding``).
  At each epoch's end, the train-side epoch logs its last batch's logs did not hold (what callbacks
  before this one wrote there: ``ReduceLROnPlateau``'s ``learning_rate``): metrics in a summary
  record at the epoch's last train step.
- validation inside ``fit``, mode ``eval``: one step per validation batch (its running-mean logs
  ``loss``, ``accuracy``...), then one summary step per epoch with the epoch-level ``val_*`` values
  (always saved when the mode is enabled). ``evaluate()`` outside fit: mode ``test`` likewise, the
  summary named ``test_*``.
- ``predict`` is not captured; outside ``fit`` it ends the run, as ``evaluate`` does.
- at a fit's start, a cross-entropy loss whose ``from_logits`` does not fit the output layer is said
  in a WARNING and recorded as the finding ``loss_output_mismatch`` (no rule: it runs no action).
"""

from __future__ import annotations

import dataclasses
import logging
import numbers
import os
import re
import sys
import threading
import time
import types
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import keras
import numpy as np
from keras import ops

from tripwire import (Config, ConfigError, Finding, History, Session, StepPlan, TrainingStopped, TripwireError,
                      load_config, open_run)
from tripwire._session import (_EXITED, check_config, check_write_and_keep_arrays, exits_cleanly,
                               rule_set_notes_muted, unregistered_rule_notes_muted)
from tripwire._config import check_overrides
from tripwire._validate import check_int, check_trial, did_you_mean, keyword_parameters
from tripwire.integrations._provides import PROVIDES as _PROVIDES
from tripwire.tune._trial import TrialLike, note_outside_stop, note_rule_stop, note_tuner_stop, trial_facts

from .._hooks import defines_own, ended_as, frames_above, same_as_any, say_stop
from . import _native
from ._backend import KerasBackend

logger = logging.getLogger("tripwire")

PROVIDES = _PROVIDES["keras"]
"""The kinds this callback captures; a rule or collection needing none of them is refused."""

_ACTIVATIONS = ("relu", "tanh", "sigmoid")
_LAYER_KINDS = ("activations", "activation_inputs", "relu_outputs")
_NORMALIZERS = (keras.layers.Rescaling, keras.layers.Normalization)
"""Layers that rescale a model's inputs inside the model. Where ``inputs`` are due, the output of
one that takes a model input directly (in a Sequential or functional model's graph) is captured in
place of that input, under its name: what the rest of the model learns from, which
``input_not_normalized`` judges (a model that standardises its inputs is not flagged, a rescaling
that leaves them far from unit scale is). One whose input the graph does not name (a subclassed or
nested model's) is captured as an input of its own, ``<layer>/output``, which
``input_not_normalized`` reads by its name (``normalized_by``)."""
_BATCH_KINDS = (("x", "inputs"), ("y", "labels"), ("y_pred", "predictions"))
"""``model.compute_loss``'s arguments (in their order) and the kinds they are offered as."""
_MISSING = object()
_SESSION_KEYWORDS = ("write", "keep_arrays")
"""Keywords of :class:`tripwire.Session` itself that ``overrides`` may hold (the rest is config),
checked in the constructor as the Session checks them (:func:`tripwire._session.check_write_and_keep_arrays`)
and listed among its accepted keywords; ``rank``/``world_size`` are the callback's own parameters,
checked in its constructor."""
_OPEN: dict[tuple[str, int], tuple[Session, "weakref.ref[TripwireCallback]"]] = {}
"""The open run of each (resolved out_dir, rank) a callback of this process writes, and that
callback (see :meth:`TripwireCallback._release_abandoned`). The session is held strongly: a run
left open by a fit that raised outside any hook is ended by the next callback with its out_dir
even when the callback that wrote it was dropped (a notebook cell run again: trial 25a)."""


def _checked_ranks(rank: Any, world_size: Any, config: Config, write: Any) -> dict[str, int]:
    """``rank`` and ``world_size`` of a multi-worker fit as ``int`` (the session's keywords), else a :class:`ConfigError` (a ValueError)
    naming the parameter, its value and what is accepted: ``world_size`` an integer >= 1, ``rank`` an
    integer in ``[0, world_size - 1]`` (numpy's integers too, no bool), the config's ``out_dir`` (or
    ``name``) given when ``world_size > 1`` and ``writer.ranks`` holding one of the ranks: what the
    session checks when it is made at the first hook (trial 33f M2: ``rank='abc'``, ``rank=-3``,
    ``world_size=0`` were taken by the constructor and refused only at ``model.fit``)."""
    world_size = check_int(world_size, "world_size", minimum=1)
    assert world_size is not None
    try:
        rank = check_int(rank, "rank", minimum=0, maximum=world_size - 1)
    except ConfigError as exc:
        if isinstance(rank, numbers.Integral) and not isinstance(rank, bool) and rank >= world_size:
            raise ConfigError(f"{exc} (world_size={world_size}: this worker's index among the fit's workers; give "
                              f"world_size= too on every worker of a multi-worker fit)") from None
        raise
    assert rank is not None
    if world_size > 1 and not (config.out_dir or config.name) and (write is None or write):
        raise ConfigError(f"out_dir: none given for rank {rank} of a {world_size}-worker fit "
                          f"(TripwireCallback(world_size={world_size})): each worker would claim a new "
                          f"tripwire-runs/run-<date>-<time> of its own and the run would be split, one worker per "
                          f"directory; accepted: the same out_dir= (or name=) on every worker")
    ranks = config.writer.ranks
    if ranks != "all" and write is None and not any(r < world_size for r in ranks):
        raise ConfigError(f"writer.ranks: got {list(ranks)}, but this fit has ranks 0 to {world_size - 1} "
                          f"(TripwireCallback(world_size={world_size})): no worker would write, and the run would "
                          f"be lost; accepted: 'all' or a list holding one of them (e.g. [0])")
    return {"rank": rank, "world_size": world_size}


class TripwireCallback(keras.callbacks.Callback):
    """Keras 3 callback (any backend): ``model.fit(..., callbacks=[TripwireCallback(...)])``.

    ``config``: a YAML path, a mapping, a :class:`tripwire.Config` or None; ``overrides``: keyword
    overrides for :class:`tripwire.Session` (``out_dir=``, ``rules=[...]``, ``save_interval=`` ...).
    ``rank``/``world_size``: this worker of a multi-worker fit (one process, one callback per worker;
    an integer ``world_size >= 1`` and ``rank`` in ``[0, world_size - 1]``, checked here, with the
    same ``out_dir`` on every worker when ``world_size > 1``): each worker writes its own shard of the
    run; stop decisions are not combined across workers (docs/keras.md, "Several workers").
    ``write``/``keep_arrays`` (keyword overrides too) are :class:`tripwire.Session`'s, checked here
    as it checks them: ``write`` True, False or None (as ``writer.ranks`` says), ``keep_arrays`` an
    integer >= 1 or None (the raw arrays and histograms per tensor the in-process history keeps).
    ``trial``/``trial_metric``: a tuner trial (anything with ``report(step, value) -> bool``) and
    the epoch log it is told at each epoch end (``trial.report(step=epoch + 1, value=logs[metric])``);
    training stops when it returns True (``trial_stopped`` turns True).

    After ``fit``: ``findings``, ``stopped_by`` (the finding that stopped training, or None),
    ``stop_reason`` (why training stopped: a rule's finding, the tuner, or another callback's
    ``model.stop_training``: ``EarlyStopping``'s; None when nothing stopped it), ``history`` (the
    session's :class:`tripwire.History`, or None before the first hook),
    ``trial_stopped`` and ``out_dir``. A rule's stop sets ``model.stop_training``: the fit ends after
    the current batch, and Keras still runs the epoch's validation (its fit loop validates every
    epoch it began); the callback records it as any other (docs/keras.md, "Stopping").

    The config is checked here; the run (its directory, ``run.json``) is claimed at the first hook
    Keras calls (``on_train_begin`` of ``fit``, ``on_test_begin`` of ``evaluate``), or when
    :attr:`session` or :meth:`load_state_dict` is used before: a ``fit`` that raises before Keras
    calls any callback (its first build, the loss traced on a first batch) leaves no run behind.
    """

    #: (the model, the fingerprints of its weights at the last fit's epoch ends and at its end):
    #: whether the next fit continues training it (:func:`_weights_fingerprint`; trials 25e, 25h, 26j)
    _fit_end: tuple[Any, list[tuple[tuple[int, ...], np.ndarray]]] | None = None

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        trial: TrialLike | None = None,
        trial_metric: str | None = None,
        rank: int = 0,
        world_size: int = 1,
        **overrides: Any,
    ) -> None:
        super().__init__()
        check_trial(trial, trial_metric, example="the name of an epoch log, e.g. 'val_loss'")
        self.trial = trial
        self.trial_metric = trial_metric
        self.trial_stopped = False  # the tuner's report stopped the last fit (see on_epoch_end)
        # weight copies of the last update-ratio step, per optimizer (id of the one that applies; reused)
        self._before: dict[int, list[Any]] = {}
        # the optimizers of this fit, (label, optimizer) as the model holds them (see _model_optimizers), and
        # those of them that scale the loss (a LossScaleOptimizer, a loss_scale_factor): (label, it, id of
        # the one inside it that applies)
        self._optimizers: list[tuple[str, Any]] = []
        self._loss_scalers: list[tuple[str, Any, int]] = []
        # this train step: the optimizers (ids of those that apply) whose apply ran, and those whose
        # scale_loss it called (ids of the optimizers it was called on); the optimizers whose apply ran in this fit
        self._applied_ids: set[int] = set()
        self._scaled_ids: set[int] = set()
        self._applied_in_fit: set[int] = set()
        self._trains_nothing = False  # (the fit running trains no epoch: see _fit_trains_nothing)
        # (the train step an evaluate inside the fit interrupted, its plan and what it captured: see on_test_begin)
        self._suspended: tuple[Any, Any, list[Any]] | None = None
        self._fit_params: dict[str, Any] | None = None  # (the running fit's params: see _begin_fit)
        self._outside_eval = False  # (an evaluate in a fit not begun here yet: see on_test_begin)
        # several optimizers: each one's learning rate read as this save step began, recorded at its end
        # for those whose apply ran (name, id of the optimizer that applies, value)
        self._step_lrs: list[tuple[str, int, float]] = []
        # the fingerprints of the model's weights at this fit's epoch ends (see _continues)
        self._epoch_ends: list[tuple[tuple[int, ...], np.ndarray]] = []
        self.backend = KerasBackend()
        # the Session's own keywords (write=, keep_arrays=) apart from the config's, accepted keywords too
        self._session_kwargs = {k: overrides.pop(k) for k in _SESSION_KEYWORDS if k in overrides}
        check_overrides(type(self).__name__, overrides, (*keyword_parameters(type(self)), *_SESSION_KEYWORDS))
        with unregistered_rule_notes_muted():  # (check_config refuses an unknown rule: said once, trial 40b F3)
            self._config: Config = load_config(config, **overrides)
        # checked here as the Session checks them, not at the first hook (trial 33eta F3: keep_arrays="many"
        # and write="yes" were taken until fit)
        write, keep_arrays = check_write_and_keep_arrays(self._session_kwargs.get("write"),
                                                         self._session_kwargs.get("keep_arrays"))
        if "write" in self._session_kwargs:
            self._session_kwargs["write"] = write
        if "keep_arrays" in self._session_kwargs:
            self._session_kwargs["keep_arrays"] = keep_arrays
        # (checked here, not at the first hook: trial 33f M2, rank='abc' and world_size=0 were taken until fit)
        self._session_kwargs.update(_checked_ranks(rank, world_size, self._config, self._session_kwargs.get("write")))
        check_config(self._config, framework="keras", provides=PROVIDES)  # what rules need: now, not at fit
        self._session: Session | None = None  # made at the first hook (see session)
        self.steps: dict[str, int] = {"train": 0, "eval": 0, "test": 0}
        self._mode = "test"
        self._plan: StepPlan | None = None
        self._grad_plan: StepPlan | None = None  # set only on train save steps: the optimizer wrapper's flag
        # the scale_loss wrapper's flag (this train step's loss is kept or saved) and what it caught
        self._want_loss = False
        self._batch_loss: Any = None
        self._loss_wrapped = False  # scale_loss is wrapped for this fit
        # where no optimizer wrapper sees the loss (jax): a reader of Keras's loss tracker, its
        # (total, count) after the last train step of this epoch, and this step's own loss recovered
        # from them (see _recover_loss)
        self._tracker: Callable[[], tuple[float, float] | None] | None = None
        self._tracked = (0.0, 0.0)
        self._recovered: float | None = None
        # save steps that asked for update ratios: skipped (a gradient-accumulation micro-step), recorded
        self._ratio_saves = [0, 0]
        self._apply_missed = 0  # save steps that wanted gradients whose step never called the optimizer's apply
        # a quiet train step in progress (nothing due: Session.quiet_until), the end of the quiet
        # range and whether the loss is kept there (every_step)
        self._quiet = False
        self._quiet_to = -1
        self._quiet_keeps_loss = False
        self._patches: list[_Patch] = []  # fit-long wrappers
        self._step_patches: list[_Patch] = []  # one save step's layer wrappers
        self._captured: set[str] = set()
        self._layer_due: tuple[str, ...] = ()  # the layer kinds this save step's wrappers are for
        # kinds a wrapper was handed symbolic values of at this step, by cause (said at the step's
        # end: see _say_traced), and those said so far
        self._traced: dict[str, list[str]] = {}
        self._traced_said: dict[str, set[str]] = {}
        # the kinds this step's model.compute_loss wrapper is for (inputs, labels, predictions due) /
        # whether the step called it
        self._batch_due: tuple[str, ...] = ()
        self._batch_seen = False
        self._names: dict[int, str] = {}
        self._full: bool = False  # (see _full_optimizer: for the session and variable names held beside it)
        self._full_for: tuple[Any, dict[int, str]] | None = None
        # (layer, name, output wrapped, activation wrapped): see _capture_layers
        self._layers: list[tuple[Any, str, bool, bool]] | None = None
        self._indexed: Any = None  # the model _names and _layers describe
        # its layers that rescale inputs (_NORMALIZERS): id -> the name of the model input each takes
        # first ("inputs", "inputs/<key>"; None where the model's graph does not say: a subclassed
        # model's, a nested model's); and this save step's outputs of the mapped ones, by input name
        self._normalizers: dict[int, tuple[str, ...] | None] = {}
        # what this save step's wrappers were handed, in call order: (what, tensors...) appended inside the
        # step and offered at its end (see _take_captured); the one list every wrapper holds (cleared in place)
        self._sink: list[tuple[Any, ...]] = []
        # the step wrappers made so far for the indexed model, reused at every save step that wants the same
        # (see _patch_step): (id(obj), attr, what) -> (obj, the value they wrap, the wrapper, its patch)
        self._step_wrappers: dict[tuple[int, str, Any], tuple[Any, Any, Callable[..., Any], _Patch]] = {}
        self._warned: set[str] = set()
        # the loss/output mismatch of this training (see _check_loss_output): said and recorded once a
        # training, the finding waiting for the fit's first train step (known at on_epoch_begin)
        self._mismatch_pending: Finding | None = None
        self._mismatch_said: set[str] = set()
        # the batch names of model inputs that only index layers take (token ids: see _index_inputs)
        self._index_inputs: frozenset[str] = frozenset()
        self._index_said: set[str] = set()  # those of them said (at INFO, once a model)
        # update ratios asked at a save step that was a gradient-accumulation micro-step: the names
        # of those asked for, recorded at the next step that updates the weights; and the ratios so
        # recorded at this step, written at its end in a record of their own (see _record_late_ratios)
        self._ratios_due: frozenset[str] | None = None
        self._late_ratios: list[tuple[str, float]] = []
        self._announced = False  # on_train_batch_begin ran and its train step has not started (see _guard)
        # where the next train step fences (see on_train_batch_begin): at the optimizer's apply once a
        # step was seen to go through it, with no variable captured that the forward pass may assign
        self._fence_at_apply = False
        self._late_fence_allowed = False  # no callback after this one runs user code at a batch's begin
        self._fit_list: Any = None  # the CallbackList of the fit in progress (see _end_unseen_fit)
        # the CallbackList of the last fit or evaluate that claimed the run: while a frame of some
        # thread holds it, that call runs (see _release_abandoned)
        self._live_list: Any = None
        self._said_stop: Finding | None = None  # the rule's finding whose stop was said (see _decide)
        self._stop_set = False  # this fit's model.stop_training was set by tripwire (a rule's or the tuner's stop)
        self._applied = False  # this train step called the optimizer's apply
        self._frozen_captured = False  # the last save step captured a non-trainable variable
        self._trial_waits = 0  # epochs without validation (validation_freq) that told the trial nothing
        self._trial_told = False  # the trial was told a value in this fit
        self._trial_logs: list[str] = []  # the logs of the last epoch that told it nothing
        self._trial_epochs = (0, 0)  # (the last epoch trained, the last told the trial), as epoch + 1
        # a fit that starts at a later epoch with no steps of ours (see on_epoch_begin): that epoch,
        # until its first validation counts the eval steps on from the earlier epochs'; and the
        # fit's validation_freq (read from fit's frame at on_train_begin; 1 where it is not found)
        self._resumed_epoch: int | None = None
        self._validation_freq: Any = 1
        self._batch_logs: Mapping[str, Any] | None = None  # this epoch's last train batch's logs (None: none yet)
        self._ended: str | None = None  # how the run last ended (its end marker's status; see __repr__)

    # ------------------------------------------------------------------------------ public
    def __getstate__(self) -> dict[str, Any]:
        """What a copy takes (``pickle``, ``copy.deepcopy``): a callback that has not fitted copies as any
        object (KerasTuner and scikit-learn's ``clone`` copy callbacks before each fit). One that has
        holds its run, which a later fit continues, and the fit's own objects: a TypeError that names
        it and says what to do (36q, trial 37m: the error named an internal object or the Session)."""
        if self._session is not None:
            raise TypeError(
                f"cannot copy or pickle {type(self).__name__}(out_dir={str(self._session.out_dir)!r}) once a fit "
                f"has begun with it: it holds its run, which its next fit continues; copy it before its first fit, or make a new "
                f"{type(self).__name__} with the same arguments (and another out_dir, or the same one to append a "
                f"training to that run)")
        return dict(self.__dict__)

    def __repr__(self) -> str:
        """``TripwireCallback(out_dir='runs/x', rules=['default'], STATE, findings=N[, stopped_by='rule'])``,
        STATE: ``not fitted`` (no run claimed yet), ``fitting, N train steps`` (so far), ``run open`` (an
        ``evaluate`` in progress, or the run claimed outside one; ``run open, its fit exited ...`` after
        a fit that raised where no hook saw it) or ``run <status>`` (its end marker's: ``complete``,
        ``stopped``, ``failed``). Reading it claims nothing."""
        session = self._session
        if session is None:
            state = "not fitted"
        elif self._in_fit and (self._live_list is None or _running_with(self._live_list) is not None):
            state = f"fitting, {self.steps['train']} train steps"
        elif self._in_fit:
            # (trial 38k: "fitting" after the fit had raised where no hook saw it, a data pipeline's error)
            state = (f"run open, its fit exited after {self.steps['train']} train steps without ending it (it raised "
                     f"where no hook saw it)")
        elif session.writer is not None and not session.writer.closed:
            state = "run open"
        else:
            state = f"run {self._ended or 'ended'}"
        return _described(type(self).__name__, self.out_dir, self._config, state, self.findings, self.stopped_by)

    @property
    def out_dir(self) -> Path | None:
        """Where the run is stored, a :class:`pathlib.Path` as on every integration (trial 27i: a
        ``str`` here and on Lightning, a ``Path`` on XGBoost and MXNet): the ``out_dir`` given
        (``tripwire-runs/<name>`` with a ``name``), else the new directory claimed at the first ``fit``
        or ``evaluate`` (None before one, as on the Lightning callback before the trainer sets it
        up). Reading it claims nothing."""
        if self._session is not None:
            return Path(self._session.out_dir)
        if self._config.out_dir or self._config.name:
            return Path(self._config.resolved_out_dir())
        return None

    @property
    def session(self) -> Session:
        """This callback's :class:`tripwire.Session`, made (and its run directory claimed) at the
        first hook of a ``fit`` or ``evaluate``, or here when read before one. Keras builds the
        model and traces the loss on a first batch before it calls any callback: a ``fit`` that
        raises there (a loss that does not fit the labels' shape) never reaches a hook, and no run
        is claimed that would read ``running`` for ever, or ``complete`` with nothing in it."""
        if self._session is None:
            self._release_abandoned()
            try:
                with rule_set_notes_muted():  # the constructor's check_config logged them
                    session = Session(self._config, framework="keras", backend=self.backend, provides=PROVIDES,
                                      **self._session_kwargs)
            except ConfigError as exc:
                raise self._refused(exc) from None
            # the background reduction may read a step's tensors themselves: this callback fences
            # before training can change them in place (the next step's optimizer apply; see
            # on_train_batch_begin)
            session.live_tensors = True
            if self.trial is not None:
                session.set_meta(trial=trial_facts(self.trial, self.trial_metric))
            self._session = session
            self._register()
        return self._session

    def _reopen(self) -> None:
        """The session's writer open again for a later ``fit`` or ``evaluate`` through this callback
        (:meth:`tripwire.Session.reopen`), after ending a run another callback of this process left
        open in its out_dir (see :meth:`_release_abandoned`)."""
        session = self.session
        if session.writer is not None and session.writer.closed:
            self._release_abandoned()
            try:
                session.reopen()
            except ConfigError as exc:
                raise self._refused(exc) from None
            self._register()

    def _named_dir(self) -> str | None:
        """The out_dir the config names (``out_dir`` or ``name``), resolved; None for a directory of
        the session's own making, which no other callback writes (see :data:`_OPEN`)."""
        if not (self._config.out_dir or self._config.name):
            return None
        return str(Path(self._config.resolved_out_dir()).resolve())

    def _register(self) -> None:
        """This callback's open run in :data:`_OPEN` (a run in a directory of its own making is
        never another callback's: not kept)."""
        session = self._session
        if session is not None and session.writer is not None and (self._config.out_dir or self._config.name):
            _OPEN[(str(Path(session.out_dir).resolve()), session.rank)] = (session, weakref.ref(self))

    def _release_abandoned(self) -> None:
        """Another callback of this process left a run open in this callback's out_dir: its ``fit``
        (or ``evaluate``) raised where no hook of it saw the error (a data pipeline, a Ctrl-C while
        Keras slices the data or validates) and has exited since, so nothing writes that run any
        more; it ends here as the old callback's ``close()`` ends it (``failed``; ``stopped`` where a
        rule had stopped training; its wrappers undone), with a WARNING naming it, and this callback
        writes after it (trial 25a: the retry, a notebook cell run again with a new callback, was
        refused for the rest of the kernel's life; the old callback was gone). A run whose
        ``fit`` still runs (in this fit's callback list, or in another thread), or one claimed
        before any hook (``session`` read, ``load_state_dict``), is left as it is: the session
        refuses the directory then (see :meth:`_refused`)."""
        where = self._named_dir()
        if where is None:
            return
        for key, (session, ref) in list(_OPEN.items()):
            holder = ref()  # (None: the callback is gone, and with it any fit that ran with it)
            if key[0] != where or holder is self:
                continue
            if session.writer is None or session.writer.closed:
                _OPEN.pop(key, None)
                continue
            if holder is not None and (holder._live_list is None or _running_with(holder._live_list) is not None):
                continue
            _OPEN.pop(key, None)
            # (as close() ends it: a fit that never reached its end is failed, or stopped by a rule)
            stopped = session.stop_reason is not None or session.stopped_by is not None
            unfinished = holder is None or holder._in_fit
            status = "stopped" if stopped and unfinished else "failed" if unfinished else None
            logger.warning("tripwire: the run %s was left open by a %s of this process that raised where no hook of "
                           "its callback saw the error (a data pipeline, a Ctrl-C between hooks) and has exited since: "
                           "it ends %s now, and this callback's run continues it", session.out_dir,
                           "fit" if unfinished else "evaluate", f"as {status}" if status else "as its close() ends it")
            if holder is not None:
                holder.close(status)
            else:
                session.close(status)

    def _refused(self, exc: ConfigError) -> ConfigError:
        """The session's refusal of an out_dir another session of this process writes, with what a
        Keras user can do about it (trial 25a: "its callback's close()" needed the old callback, gone
        from a notebook whose cell was run again; a run a fit that exited left open is ended by
        :meth:`_release_abandoned`, so what refuses it is still in use)."""
        where = self._named_dir()
        if "this process" not in str(exc) or where is None:
            return exc
        holders = [ref() for key, (_, ref) in _OPEN.items() if key[0] == where]
        holder = next((h for h in holders if h is not None and h is not self), None)
        if holder is None:
            return exc
        thread = _running_with(holder._live_list) if holder._live_list is not None else None
        if thread is None:
            why = ("another TripwireCallback of this process claimed it outside a fit or evaluate of Keras's (its "
                   "session read, load_state_dict, or its hooks called by hand) and has not ended it: end it with "
                   "that callback's close()")
        elif thread == threading.current_thread().name:
            why = ("another TripwireCallback with this out_dir is in this very fit's callbacks (in thread "
                   f"{thread!r}): give each callback its own out_dir, or drop one of them")
        else:
            why = (f"a fit running in thread {thread!r} writes it through another TripwireCallback: give this "
                   f"callback its own out_dir, or wait until that fit ends")
        return ConfigError(f"{exc}. From Keras: {why} (a run that a fit which has exited left open is ended by a "
                           f"new TripwireCallback itself, docs/keras.md)")

    @property
    def _in_fit(self) -> bool:
        """A ``fit`` began and has not ended (the session's :attr:`~tripwire.Session.training`)."""
        return self._session is not None and self._session.training

    @property
    def findings(self) -> list[Finding]:
        """Every finding this callback made so far (all its ``fit``, ``evaluate`` and ``predict`` calls); a
        callback that resumed a training from a checkpoint (:meth:`load_state_dict`) starts with none (the
        run holds every finding: ``tripwire.open_run(out_dir).findings``)."""
        return self._session.findings if self._session is not None else []

    @property
    def stopped_by(self) -> Finding | None:
        """The finding that stopped training, or None."""
        return self._session.stopped_by if self._session is not None else None

    @property
    def stop_reason(self) -> str | None:
        """Why training stopped, as the run's end marker says it (:attr:`tripwire.Session.why_stopped`):
        the tuner's reason, else the finding of the rule that stopped it, else a stop set outside
        tripwire, known at the fit's end (``model.stop_training was set outside tripwire (train step
        N): EarlyStopping(monitor='val_loss'): epoch 3: early stopping: ...``, or ``...: by another
        callback (...) or the model's own code (a train_step)``; the run then ends ``stopped``); None
        when nothing stopped it (a trial stopped at its ``max_resource`` ran its whole budget: None) or
        before the first hook.
        Known as soon as the stop is; a later fit that starts a new training starts at None, and an
        ``evaluate`` after a stopped fit keeps it."""
        return self._session.why_stopped if self._session is not None else None

    @property
    def history(self) -> History | None:
        """The session's :class:`tripwire.History` (what the rules read; every fit and evaluate of this
        callback), or None before the first hook claimed the run. Reading it claims nothing."""
        return self._session.history if self._session is not None else None

    def close(self, status: str | None = None) -> None:
        """Undo every wrapper and end the run (fit does this itself unless it raised).

        ``status`` None: ``stopped`` when a rule or the tuner stopped training; else ``failed``
        when a ``fit`` began and never reached its end (it raised where no wrapper of ours saw it:
        a data pipeline, another callback), ``stopped`` where that was ``sys.exit()`` or
        ``sys.exit(0)`` and ``close()`` runs while it propagates (a hook's or a layer's: the program's
        own end, its reason ``SystemExit: 0: ...``); else ``complete``. Before any hook (no run was claimed:
        a ``fit`` that raised before Keras called a callback) there is no run to end."""
        self._restore_all()
        unfinished = self._in_fit
        session = self._session
        if session is None:
            return
        _forget(session)
        session.training = False
        if self._ratio_saves[0] and not self._ratio_saves[1]:
            steps = getattr(_innermost(getattr(self.model, "optimizer", None)), "gradient_accumulation_steps", None) or "N"
            self._warn_once(
                "no-update-step",
                f"tripwire: the optimizer accumulates gradients (gradient_accumulation_steps={steps}) and updates the "
                f"weights once every {steps} steps; the {self._ratio_saves[0]} save step(s) that asked for update "
                f"ratios were micro-steps, and no update of the weights followed them before the fit ended (their "
                f"ratios are taken at the next update), so no update ratio was recorded (weight_update_ratio had "
                f"nothing to judge): train at least {steps} steps (docs/keras.md, \"Gradient accumulation\")",
            )
        if self._apply_missed:
            self._warn_once("apply-missed", self._apply_missed_message())
            self._apply_missed = 0
        if session.writer is not None and not session.writer.closed:
            exc = sys.exc_info()[1]
            if status is None and (session.stop_reason is not None or (unfinished and session.stopped_by is not None)):
                status = "stopped"  # (a rule, or the tuner, cut the training short: not a complete one)
            elif status is None and exits_cleanly(exc):
                # (sys.exit() or sys.exit(0) inside the fit or an evaluate: the program's own end, not a
                # failure, as the Lightning callback ends it; trial 42l)
                session.stop_reason = _EXITED
                status = "stopped"
            elif status is None and unfinished:
                status = "failed"
            session.close(status)
            self._ended = ended_as(session, status)

    def _apply_missed_message(self) -> str:
        """The WARNING for the save steps that wanted gradients or update ratios where no optimizer's
        ``apply`` ran (:attr:`_apply_missed`), with the causes the fit's facts leave: a model with no
        trainable weight (trial 17i) alone; else a ``LossScaleOptimizer``'s skipped steps only where
        one of the model's optimizers is one, and a train_step that calls no ``apply`` of theirs at
        those steps (some of them at other steps: named) or steps an optimizer the model does not hold
        (trial 31a F1: both were named while a GAN's two optimizers, unwrapped, applied at every step)."""
        frozen = self.model is not None and not getattr(self.model, "trainable_weights", [None])
        labels = [label for label, _ in self._optimizers]
        several = len(labels) > 1
        head = (f"tripwire: at {self._apply_missed} save step(s) that asked for gradients or update ratios "
                + (f"the apply of none of the model's optimizers ({', '.join(labels)}) ran" if several
                   else "the optimizer's apply did not run") + ", so none was recorded there: ")
        if frozen:  # (trial 17i: the causes below were named instead)
            return head + ("the model has no trainable weight (model.trainable = False, or every layer frozen): it "
                           "does not train (docs/keras.md)")
        causes = []
        if self._loss_scalers:
            causes.append(f"a LossScaleOptimizer (mixed_float16; here model.{self._loss_scalers[0][0]}) skips a step "
                          "whose scaled gradients are not finite (a loss scale too large, or gradients that overflow: "
                          "no weight moved at those steps)")
        stepped = [label for label, held in self._optimizers if id(_innermost(held)) in self._applied_in_fit]
        if stepped:
            others = ", ".join(f"model.{label}" for label in stepped)
            causes.append(f"the train_step applied no gradients at those steps ({others} applied at other steps: a "
                          f"train_step that steps an optimizer at some steps only)")
        else:
            seen = ", ".join(f"model.{label}" for label in labels) or "none: the model has no optimizer"
            causes.append(f"a custom train_step did not call optimizer.apply/apply_gradients, or it steps an optimizer "
                          f"that the model does not hold as an attribute (tripwire wraps the apply of model.optimizer "
                          f"and of the optimizers held in the model's attributes, here {seen}: hold it as one, "
                          f"self.g_optimizer = ..., as Keras's GAN example does)")
        return head + ", or ".join(causes) + " (docs/keras.md)"

    def __enter__(self) -> TripwireCallback:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        failed = exc_type is not None and not isinstance(exc, TrainingStopped)
        self.close("failed" if failed else None)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": dict(self.steps), "session": self.session.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.steps.update({k: int(v) for k, v in state.get("steps", {}).items()})
        self.session.load_state_dict(state.get("session", {}))

    # ------------------------------------------------------------------------------ busy
    def _busy_in(self) -> tuple[str, str] | None:
        """(the call, ``"fit"`` or ``"evaluate"``; the name of its thread) of a ``fit`` or ``evaluate``
        through this callback that runs now in another thread (its ``CallbackList`` is on that thread's
        stack: :func:`_running_with`), else None (none runs, or it runs in this very thread: a call
        nested in it)."""
        current = threading.current_thread()
        names = {current.name, str(current.ident)}
        for call, held in (("fit", self._fit_list), ("evaluate", self._live_list)):
            if held is None:
                continue
            thread = _running_with(held)
            if thread is not None and thread not in names:
                return ("fit" if self._in_fit else call), thread
        return None

    def _refuse_if_busy(self, where: str) -> None:
        """Refuse a ``fit``, ``evaluate`` or ``predict`` through this callback while an earlier one through
        it still runs in another thread (the notebook pattern: a fit started in a ``threading.Thread``,
        the fit cell run again): a ConfigError naming that thread, raised before Keras hands this callback
        the new call's model, so the running fit is left as it is (trial 30f F1: the second fit took over
        the callback, its end closed the run under the first, which died with StoreClosedError, and the
        run read ``complete`` with 38 of its 96 steps)."""
        busy = self._busy_in()
        if busy is None:
            return
        call, thread = busy
        out_dir = self.out_dir
        raise ConfigError(
            f"callbacks: this {where} was given a TripwireCallback (out_dir "
            f"{str(out_dir) if out_dir is not None else 'not claimed yet'!r}) that a {call} running in thread "
            f"{thread!r} is using, and one callback records one {call} at a time; accepted: wait until that {call} "
            f"ends (join its thread) and run this one with the callback then, or give this {where} a new "
            f"TripwireCallback with an out_dir of its own (the running {call} is left as it is; docs/keras.md)")

    def set_model(self, model: Any) -> None:
        """Keras hands each callback the model of the ``fit``, ``evaluate`` or ``predict`` that starts
        (its ``CallbackList``). Refused with a ConfigError while an earlier call through this callback
        runs in another thread (:meth:`_refuse_if_busy`): the model it captures stays that call's."""
        self._refuse_if_busy(_keras_call(sys._getframe(1)))
        super().set_model(model)

    # ------------------------------------------------------------------------------ train
    def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        self._refuse_if_busy("fit")  # (a hook called with no set_model first: the running fit left as it is)
        fit_list = _calling_list(self, sys._getframe(1))
        history = next((c for c in getattr(fit_list, "callbacks", ()) if isinstance(c, keras.callbacks.History)), None)
        if isinstance(getattr(history, "params", None), dict) and history.params:
            # (the fit's own: an evaluate another callback ran before this hook set its own here; trial 43n)
            self.params = dict(history.params)
        self._trains_nothing = self._fit_trains_nothing(sys._getframe(1))
        if self._trains_nothing:
            return
        try:
            self._begin_fit(sys._getframe(1))
        except BaseException:
            self.close()  # (our own error: the run ends failed, every wrapper undone)
            raise

    def _fit_trains_nothing(self, frame: Any) -> bool:
        """A fit after an earlier one through this callback that trains no epoch (``initial_epoch`` at
        ``epochs`` or beyond: the notebook cell run again after a fit that ran its epochs, or one a rule
        stopped): it leaves the run and this callback as the last fit left them (trial 36q: the run
        became ``complete``, its stop and ``stopped_by`` dropped, and an empty training was added; the
        Lightning callback keeps them so too). Such a fit through a new callback claims no run: the
        ``out_dir`` it names stays as it is."""
        epochs = (getattr(self, "params", None) or {}).get("epochs")
        initial = _fit_local(frame, "initial_epoch", 0)
        if not (isinstance(epochs, int) and isinstance(initial, int) and initial >= epochs):
            return False
        # (trial 43d: a new callback's such fit, a resume script run again once its checkpoint says it is done,
        # turned the crashed run it was given as out_dir from failed into complete: it claims no run)
        return self._session is None or (not self._in_fit and self.session.writer is not None
                                         and self.session.writer.closed)

    def _begin_fit(self, frame: Any) -> None:
        if self._in_fit and (self._fit_list is None or _running_with(self._fit_list) is None):
            # an earlier fit through this callback never reached its end and has exited: it raised
            # where no hook of ours saw the error (a layer in its validation pass, a data pipeline),
            # which left its run open. It ends as failed now (as close() ends it), and this fit is a
            # training of its own, as after a fit whose error a hook saw (trial 29i F5: it was taken
            # for the same training, and the run recorded no boundary where tripwire watch could arm
            # its rules again)
            logger.info("tripwire: the last fit through this callback raised before its end, where no hook of it "
                        "saw the error: its run %s ends as failed, and this fit starts a new training in it",
                        self._session.out_dir if self._session is not None else "?")
            self.close()
            # (a step it began and never ended, the validation batch that raised, keeps its number:
            # the new training's steps start after it, where the run says that training began)
            mode_steps = self.session.mode_steps
            self.steps.update({m: max(n, int(mode_steps.get(m, 0))) for m, n in self.steps.items()})
        self._restore_all()  # wrappers left behind by a fit that raised outside our reach
        self._trial_waits, self._trial_told, self._trial_epochs = 0, False, (0, 0)
        self.trial_stopped = False  # (this fit's: as the Lightning callback's)
        self._resumed_epoch = None
        self._said_stop = None
        self._stop_set = False
        self._validation_freq = _fit_local(frame, "validation_freq", 1)
        # (found before the run is claimed: what tells whether this fit still runs, see _release_abandoned)
        self._fit_list = self._live_list = _calling_list(self, frame)
        fit_end, self._fit_end = self._fit_end, None
        self._epoch_ends = []
        if self.session.writer is not None and self.session.writer.closed:  # a later fit through this callback
            # (an earlier fit's stop made this one's run "stopped"; trial 17e's twin). It continues the
            # training when the model is the one the last fit ended with, its weights as it left them
            # or as one of its epochs ended (restored after it: trial 26j): the rules keep their view
            # of the earlier fits (trial 25e: judged alone, a converged model's "train some more" fit
            # was stopped by loss_not_decreasing); else a new training (trial 25a)
            continued = _continues(fit_end, self.model)
            # (a step an earlier fit began and never ended, a Ctrl-C inside its train step, keeps its
            # number, as the session counted it: this fit's steps start after it, where the run says
            # its training began; trial 30f F4: they started at it, a WARNING spoke of begin_step and
            # gradient accumulation, and Run.trainings said one step later than the records)
            mode_steps = self.session.mode_steps
            self.steps.update({m: max(n, int(mode_steps.get(m, 0))) for m, n in self.steps.items()})
            self.session.new_training(continued=continued)
            if not continued:
                self._mismatch_said = set()  # (a new training: its model's mismatch is a finding of its own)
        self._reopen()
        self.session.training = True  # (a fit is running: see _in_fit)
        self._ratios_due, self._late_ratios = None, []
        # (the reduction process ready by the first steps: see TorchBackend.warm_up)
        self.backend.warm_up(list(getattr(self.model, "weights", None) or []), self.session.config.collections.values())
        self._index_model()
        self._check_loss_output()
        params = getattr(self, "params", None) or {}
        # (the fit's own: an evaluate inside the fit sets its own on this callback, trial 43k)
        self._fit_params = dict(params)
        if isinstance(params.get("epochs"), int) and isinstance(params.get("steps"), int) and params["epochs"] * params["steps"] >= 1:
            # epochs x calls of the batch hooks per epoch (this callback's steps): one per
            # steps_per_execution batches (trial 26e: the batches, N times too many, delayed the rules
            # whose windows scale with the planned length)
            per_epoch = _hook_steps(params["steps"], getattr(self.model, "steps_per_execution", 1))
            self.session.set_planned_steps(params["epochs"] * per_epoch)
        outer = getattr(self.model, "optimizer", None)
        self._tracker, self._tracked, self._recovered = None, (0.0, 0.0), None
        self._optimizers, self._loss_scalers, self._applied_in_fit, self._before = [], [], set(), {}
        if not _native.optimizer_capture_supported():
            backend = _native.backend_name()
            self._warn_once("optimizer", f"tripwire: gradients, update ratios and the learning rate are not captured on "
                                         f"the {backend} backend (its trainer keeps the optimizer's state outside the "
                                         f"model during an epoch): the rules that read them judge nothing; the training "
                                         f"loss recorded is each batch's own, recovered from Keras's running mean "
                                         f"(docs/keras.md, \"Backends\")")
            self._empty_because(("gradients", "optimizer"),
                                f"gradients, update ratios and the learning rate are not captured on the {backend} backend")
            self.session.unavailable(("gradients", "optimizer"))  # (said: not again at close as "captured nothing")
            if any(c.accepts_kind("losses") for c in self.session.collections.values()):  # (a loss to record)
                reader = _native.loss_tracker_reader(self.model)
                self._tracker = reader if reader is not None else (lambda: None)  # (None: said at the first step)
        else:
            # every optimizer the model holds (model.optimizer, and a GAN's self.d_optimizer and
            # self.g_optimizer: trial 31a F1, only model.optimizer was wrapped, an idle RMSprop there):
            # the apply of the one that applies unscaled gradients (inside a LossScaleOptimizer), and the
            # scale_loss of model.optimizer (its batch loss: a LossScaleOptimizer's is given the unscaled
            # loss) and of each that scales the loss (was it called? see _say_unscaled_loss)
            self._optimizers = _model_optimizers(self.model)
            for label, held in self._optimizers:
                inner = _innermost(held)
                if callable(getattr(inner, "apply", None)):
                    self._patch(self._patches, inner, "apply", self._wrap_apply(inner, inner.apply))
                scales = _loss_scale_of(held) is not None
                if scales:
                    self._loss_scalers.append((label, held, id(inner)))
                if (held is outer or scales) and callable(getattr(held, "scale_loss", None)):
                    self._patch(self._patches, held, "scale_loss",
                                self._wrap_scale_loss(held.scale_loss, id(held), keeps_loss=held is outer))
                    self._loss_wrapped = self._loss_wrapped or held is outer
        train_function = getattr(self.model, "train_function", None)
        if callable(train_function):
            self._patch(self._patches, self.model, "train_function", self._guard(train_function))
        # The background thread reads a step's tensors themselves (live) unless a callback after
        # this one runs user code at the batch end (a weight it changes there through .data, unseen
        # by the version counters, would race the thread's copy); it may wait for that copy until
        # the optimizer's apply only where no callback after this one runs user code at the next
        # batch's begin (a weight written there belongs to the next step). Where the fit's
        # callback list cannot be found: live reads fenced at the batch's begin.
        if self._fit_list is not None:  # another callback that raises ends the run, the wrappers undone
            for hook in _FIT_HOOKS:
                original = getattr(self._fit_list, hook, None)
                if callable(original):
                    self._patch(self._patches, self._fit_list, hook, self._guard_hook(original))
        later = _callbacks_after(self, self._fit_list)
        # the CallbackList's on_train_begin is the call in progress (its wrapper would never run):
        # the callbacks after this one are wrapped there each, so that one raising (a second
        # TripwireCallback refused this out_dir, a user's) ends the run and undoes every wrapper
        # before the error leaves fit (trial 25a: the run read `running`, the optimizer stayed
        # wrapped, and a retry with a new callback was refused)
        for callback in later or ():
            original = getattr(callback, "on_train_begin", None)
            if callable(original):
                self._patch(self._patches, callback, "on_train_begin", self._guard_hook(original))
        self.session.live_tensors = later is None or not any(
            _runs_user_code(cb, ("on_train_batch_end", "on_batch_end")) for cb in later)
        self._late_fence_allowed = later is not None and not any(
            _runs_user_code(cb, ("on_train_batch_begin", "on_batch_begin")) for cb in later)

    def _check_loss_output(self) -> None:
        """The loss/output mismatch of the model this fit trains (:func:`_logits_mismatch`): said in a
        WARNING and kept as the finding ``loss_output_mismatch`` (severity warning, mode train), which
        :meth:`_record_mismatch` records at the fit's first train step; once a training (a fit that
        continues it says nothing again; a new model's fit does). A check of the integration, not a
        rule: it runs no action (no stop), and the run's status stays as its training makes it
        (trial 27e: the WARNING alone left no trace in the run, ``tripwire inspect`` said "findings:
        none")."""
        loss = getattr(self.model, "loss", None)
        layer, through, within = _output_source(self.model)
        message = _logits_mismatch(loss, layer, through, within)
        if message is None or message in self._mismatch_said:
            return
        self._mismatch_said.add(message)
        logger.warning(message)
        name, from_logits = _crossentropy_of(loss) or ("?", False)
        details = {"loss": name, "from_logits": from_logits,
                   "layer": "/".join([*within, str(getattr(layer, "name", "?"))]),
                   "activation": _output_activation(layer), "through": list(through)}
        self._mismatch_pending = Finding(rule="loss_output_mismatch", step=0, mode="train",
                                         message=message.removeprefix("tripwire: "),  # (as a rule's finding reads)
                                         severity="warning", worker=self.session.rank, details=details)

    def _record_mismatch(self) -> None:
        """Record the pending loss/output mismatch (:meth:`_check_loss_output`) at this fit's first
        train step: the train step count as its first epoch begins (a fit resumed at a later epoch
        counts on from there, see :meth:`on_epoch_begin`)."""
        found, self._mismatch_pending = self._mismatch_pending, None
        if found is not None and self._session is not None:
            self._session.record_finding(dataclasses.replace(found, step=self.steps["train"], wall_time=time.time()))

    def on_train_batch_begin(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._announced = True  # (the train_function guard's: this batch's step is ours)
        # The step in flight (reduced in the background) reads the weights themselves until its
        # fence. They change in place at the optimizer's apply, so the fence waits until then and
        # the copy overlaps this step's forward and backward passes; here at once where a step did
        # not go through apply (a custom train_step) or a captured variable may be assigned in the
        # forward pass (a BatchNormalization's moving statistics).
        if not self._fence_at_apply:
            self.session.fence()
        self._applied = False
        if self._applied_ids:
            self._applied_ids.clear()
        if self._scaled_ids:
            self._scaled_ids.clear()
        self._step_lrs = []
        step = self.steps["train"]
        if step >= self._quiet_to:
            self._quiet_to = self.session.quiet_until("train", step)
            self._quiet_keeps_loss = self.session.quiet_keeps("train", "losses")
        self._batch_loss = None
        if step < self._quiet_to:  # nothing to save: the loss only, if kept
            self._quiet = True
            self._want_loss = self._quiet_keeps_loss
            return
        plan = self._begin("train")
        self._want_loss = plan.keeps("losses")
        if plan and _native.optimizer_capture_supported():  # (jax: no apply wrapper, nothing missed; trial 26e)
            full = self._full_optimizer()
            if plan.wants("gradients") or (plan.wants("optimizer") and full):
                self._grad_plan = plan
            if plan.wants("optimizer"):
                self._offer_loss_scale(plan)
                self._offer_clipping(plan)
                if full:
                    self._offer_learning_rate(plan)
        elif plan and plan.wants("optimizer"):  # jax: the loss scale alone, from the trainer's state (trial 30i F1)
            self._offer_loss_scale(plan)
            self._offer_clipping(plan)

    def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._batch_logs = logs if logs is not None else {}
        if self._suspended is not None:
            self._resume_suspended()  # (an evaluate inside this batch's end raised before its on_test_end)
        try:
            self._end_train_batch(logs)
        finally:  # (after _offer_weights: what the step now in flight captured)
            self._fence_at_apply = self._late_fence_allowed and self._applied and not self._frozen_captured

    def _end_train_batch(self, logs: Mapping[str, Any] | None) -> None:
        if self._tracker is not None:  # (every step: the next step's loss needs this one's tracker state)
            self._recovered = self._recover_loss(logs)
        if self._loss_scalers and self._applied:
            self._say_unscaled_loss()
        if self._quiet:
            self._quiet = False
            step = self.steps["train"]
            self.steps["train"] = step + 1
            loss = self._train_loss(logs) if self._quiet_keeps_loss else None
            kept = () if loss is None else (("loss", loss, "losses"),)
            self._decide(lambda: self.session.quiet_step("train", step, kept), "train", step)
            self._record_late_ratios(step)
            return
        if self._grad_plan is not None and not self._applied_ids:  # gradients were due and no optimizer's apply ran
            self._apply_missed += 1
        plan, self._grad_plan = self._plan, None
        lrs, self._step_lrs = self._step_lrs, []
        if plan is not None:  # several optimizers: the learning rates of those whose apply ran at this step
            for name, key, value in lrs:
                if key in self._applied_ids and plan.select(name, "optimizer"):
                    plan.add(name, value, "optimizer")
        self._unpatch_step()
        self._take_captured()
        self._check_batch_seen()
        self._say_traced()
        loss = self._train_loss(logs) if plan is not None and plan.keeps("losses") else None
        if not plan and loss is not None:
            plan.add("loss", loss, "losses")  # type: ignore[union-attr]
        if plan:
            self._offer_logs(plan, logs or {}, "", loss=loss)
            if plan.wants("weights") or plan.wants("biases") or (plan.wants("optimizer") and self._full_optimizer()):
                _native.sync_variables(self.model)
            self._offer_weights(plan)
        step = self.steps["train"]
        self._end("train")
        self._record_late_ratios(step)

    def _say_unscaled_loss(self) -> None:
        """A WARNING (once per optimizer) where this train step applied the gradients of an optimizer
        that scales the loss (a ``LossScaleOptimizer``, mixed_float16; a ``loss_scale_factor``) without
        calling its ``scale_loss``: the optimizer divides the gradients it applies by its loss scale,
        which the loss was never multiplied by, so the applied update is that many times too small and
        the model barely learns (trial 31a F2: Keras's torch "customizing fit" train_step under
        mixed_float16 divided every gradient by 32768, accuracy stayed at chance, and the only word
        was that the loss recorded lags). Read at the steps whose Python ran the wrappers (a compiled
        tensorflow step's only as it is traced)."""
        for label, held, inner in self._loss_scalers:
            if inner not in self._applied_ids or id(held) in self._scaled_ids or f"unscaled-{label}" in self._warned:
                continue
            scale = _loss_scale_of(held)
            try:
                value = f"{_native.to_float(scale):g}"
            except Exception:  # noqa: BLE001 - (a value that cannot be read on the host: named, not given)
                value = "N"
            what = ("a LossScaleOptimizer (mixed_float16)" if isinstance(held, keras.optimizers.LossScaleOptimizer)
                    else "an optimizer with a loss_scale_factor")
            self._warn_once(
                f"unscaled-{label}",
                f"tripwire: train step {self.steps['train']} applied the gradients of model.{label}, {what}, without "
                f"calling its scale_loss: the applied gradients are divided by the loss scale {value}, which the loss "
                f"was never multiplied by, so the model barely learns (the gradients recorded are those applied, "
                f"{value} times too small); call `loss = self.{label}.scale_loss(loss)` before the backward pass, as "
                f"Keras's train_step does (docs/keras.md, \"Training loss\")")

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        self._batch_logs = None
        self._tracked = (0.0, 0.0)  # (Keras resets its metrics, the loss tracker's sums, before each epoch)
        self._start_at_epoch(epoch)
        self._record_mismatch()

    def _start_at_epoch(self, epoch: int) -> None:
        """At a fit's first epoch: one that starts at a later epoch with no steps of ours counts its
        steps on from the epochs before it (see below); called by :meth:`on_epoch_begin`, and by an
        ``evaluate`` inside the fit that reaches this callback before it (another callback's
        ``on_epoch_begin`` listed first; trial 43k: the resumed fit was taken for a new training)."""
        if epoch > 0 and self.steps["train"] == 0:
            # a fit that starts at a later epoch with no state of ours (fit(initial_epoch=...), Keras's
            # BackupAndRestore after a crash): its steps follow the model's training, not 0 again
            # (trial 18f: the resumed epochs were stored as steps 0.. over the dead run's); its eval
            # steps likewise, at its first validation (trial 19b: they restarted at 0, and the run
            # held each validation step twice)
            if self.steps["eval"] == 0:
                self._resumed_epoch = epoch
            per_epoch = (self._fit_params or getattr(self, "params", None) or {}).get("steps")
            if isinstance(per_epoch, int) and per_epoch > 0:
                per_epoch = _hook_steps(per_epoch, getattr(self.model, "steps_per_execution", 1))
                self.steps["train"] = epoch * per_epoch
                writer = self.session.writer
                if writer is not None and writer.appending:
                    # (it continues that run: not the warning that a training's steps may repeat
                    # another's, trial 19b; its rules judge the whole training, trial 29i F1)
                    logger.info("tripwire: %s holds records of an earlier training, which this fit continues from "
                                "epoch %d: its train steps count on from %d (epoch x %d steps), its eval steps from "
                                "those of epochs 0..%d", self.session.out_dir, epoch, epoch * per_epoch, per_epoch,
                                epoch - 1)
                    self._continue_run(epoch, epoch * per_epoch)
                else:
                    logger.info("tripwire: the fit starts at epoch %d: train steps count on from %d (epoch x %d "
                                "steps)", epoch, epoch * per_epoch, per_epoch)

    def _continue_run(self, epoch: int, train_from: int) -> None:
        """This fit starts at ``epoch`` (its first train step ``train_from``) with no state of its own,
        in an ``out_dir`` whose records hold the training it continues (Keras's ``BackupAndRestore``
        after a crash, ``fit(initial_epoch=...)``): the session loads a state made of those step
        counters (:meth:`tripwire.Session.load_state_dict`), as a checkpoint's would be, with its
        rules' own fresh states. So the session reads back this worker's records of the steps
        before them into the rules' history (the rules judge the whole training, as ``tripwire
        watch`` does on the run, and as after a Lightning resume), says the steps the run holds
        past them (the crashed fit's last batches, which this fit runs again), does not record
        again a finding the run holds, and a rule that found something before ``epoch`` (its
        finding in the run, at an earlier step) does not fire again, as if its state had been kept.
        Trial 29i F1: the rules started afresh there, and ``oscillating_loss`` took the converged
        loss of the resumed epochs for its initial level and stopped a healthy training that
        ``tripwire watch`` found nothing in.

        The eval steps of the epochs before ``epoch``: one past the summary step of the last
        validation among them (:func:`_validated_epochs` tells how many there were; a summary step
        holds the ``val_*`` values) as the run's records hold it, else one past the last eval
        step they hold. Where the run cannot be read, or this callback recorded steps already (an
        ``evaluate`` before: its history is not empty), the rules judge from ``epoch`` on, said in
        a WARNING (the first case) or as before (the second)."""
        session = self.session
        if session.global_step != 0:  # (an evaluate through this callback before: nothing read back)
            session.continues()
            return
        session.writer.flush()  # type: ignore[union-attr]
        try:
            run = open_run(session.out_dir)
            eval_from = _eval_steps_written_before(run, session.rank, session._global_step_at(train_from))
            if eval_from is None:  # (records without global steps: an older tripwire's)
                eval_from = _eval_steps_before(run, session.rank, _validated_epochs(epoch, self._validation_freq))
            held = run.findings
        except TripwireError as exc:
            session.continues()
            logger.warning("tripwire: %s: the earlier training's records could not be read back for the rules (%s): "
                           "they judge this fit's steps from epoch %d on", session.out_dir, exc, epoch)
            return
        until = {"train": train_from, "eval": eval_from}
        if eval_from:
            self.steps["eval"] = eval_from  # (the run's count, not the validations' alone: _count_eval_from)
        places: dict[str, list[int]] = {}
        for i, rule in enumerate(session.rules):
            places.setdefault(rule.name, []).append(i)
        fired = sorted({i for f in held if f.kind == "finding" and f.worker == session.rank
                        and 0 <= f.step < until.get(f.mode, 0) for i in places.get(f.rule, ())})
        state = session.state_dict()  # (the fresh rules' own states: nothing of them changes)
        state.pop("global_step", None)
        state["mode_steps"] = {**state["mode_steps"], **until}
        state["fired"] = fired
        session.load_state_dict(state)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        # the weights as this epoch ended, which a callback may restore at the fit's end, after this
        # one's on_train_end (EarlyStopping(restore_best_weights=True) listed after tripwire: trial
        # 26j); one fused reduction on the device and one small host read per epoch
        fingerprint = _weights_fingerprint(self.model)
        if fingerprint is not None:
            self._epoch_ends.append(fingerprint)
        self.session.fence()
        logs = logs or {}
        self._record_epoch_logs(logs)
        summary = {k: v for k, v in logs.items() if k.startswith("val_")}
        if summary:
            plan = self.session.begin_step("eval", self.steps["eval"], summary=True)
            self._plan = plan
            self._offer_logs(plan, summary, "")
            self._end("eval")
        if self.trial is not None:
            self._trial_epochs = (epoch + 1, self._trial_epochs[1])
            value = logs.get(self.trial_metric, _MISSING)  # type: ignore[arg-type]
            if value is _MISSING and _validation_skipped(str(self.trial_metric), logs):
                # fit(validation_freq=N): no validation at this epoch; the trial is told at the epochs
                # that have one (as the Lightning callback does with check_val_every_n_epoch)
                self._trial_waits += 1
                self._trial_logs = sorted(map(str, logs))
                return
            if value is _MISSING:
                error = ConfigError(
                    # (epochs counted from 1, as its reports and the tuner's stop reasons count them: trial 38m)
                    f"trial_metric: {self.trial_metric!r} is not in the logs of epoch {epoch + 1} (the step its "
                    f"report would have){_metric_hint(str(self.trial_metric), logs)}; "
                    f"available: {', '.join(sorted(logs)) or 'none'}"
                )
                self.close("failed")  # the fit ends here, through our own error: the run with it
                raise error
            self._trial_told = True
            self._trial_epochs = (epoch + 1, epoch + 1)
            if self.trial.report(step=epoch + 1, value=float(value)):
                self.model.stop_training = self._stop_set = True
                # (a rule that stopped this training already is why it ends, as on Lightning: trial 18c)
                self.trial_stopped = self.trial_stopped or self.session.stopped_by is None
                note_tuner_stop(self.session, self.trial, epoch + 1, f"epoch {epoch + 1}",
                                f"{self.trial_metric}={float(value):.6g}")

    def _record_epoch_logs(self, logs: Mapping[str, Any]) -> None:
        """The training side's epoch logs that its last batch's logs did not hold: what callbacks
        listed before this one wrote into them at their ``on_epoch_end`` (``ReduceLROnPlateau``'s and
        ``LearningRateScheduler``'s ``learning_rate``, a user's own), as metrics in a summary record
        at the epoch's last train step, mode ``train``, as the Lightning callback stores what
        training logs per epoch (trial 21c: never stored, whatever the order). Keras's own epoch
        ``loss`` and metrics are its last batch's logs again (running means over the epoch): not
        stored twice. One dict read per epoch."""
        batch, self._batch_logs = self._batch_logs, None
        if batch is None or self.steps["train"] == 0:  # (an epoch that trained no batch of ours)
            return
        added = {k: v for k, v in logs.items() if k not in batch and not str(k).startswith("val_")}
        if not added:
            return
        self._plan = self.session.begin_step("train", self.steps["train"] - 1, summary=True)
        self._offer_logs(self._plan, added, "")
        self._plan = None
        self._decide(self.session.end_step, "train", self.steps["train"] - 1)

    def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
        if self._trains_nothing:  # (see _fit_trains_nothing: nothing of this fit to record)
            self._trains_nothing = False
            return
        # (does the next fit continue this one? trials 25e, 26j): its weights now, or as an epoch ended
        self._fit_end = _fit_state(self.model, self._epoch_ends)
        self._epoch_ends = []
        if self.trial is not None and self._trial_waits and not self._trial_told:
            error = ConfigError(
                f"trial_metric: {self.trial_metric!r} was in the logs of none of this fit's {self._trial_waits} "
                f"epochs (no validation ran: give fit validation_data= or validation_split=, with a "
                f"validation_freq that validates within the fit's epochs); available: "
                f"{', '.join(self._trial_logs) or 'none'}")
            self.close("failed")
            raise error
        self._say_unreported_epochs()
        self._record_mismatch()  # (a fit that ran no epoch: at the step it would have begun with)
        self._note_outside_stop()
        self.session.training = False  # the fit reached its end: complete (or stopped), not failed
        self.close()

    def _note_outside_stop(self) -> None:
        """A fit that ends with ``model.stop_training`` set by no stop of this callback's (a rule's or
        the tuner's): Keras's ``EarlyStopping``, ``TerminateOnNaN``, another callback or the model's
        own code stopped it. Its run ends ``stopped``, as for the tuner's stop, with that as its
        ``stop_reason`` (:func:`_outside_stop_reason`: the end marker's, ``cb.stop_reason``,
        ``tripwire inspect``'s "worker 0 stopped: ..."); ``stopped_by`` stays None (no finding stopped
        it). A rule's or the tuner's stop keeps its own reason. Trial 28x2 (the twin of the Lightning
        callback's, trial 28a F7): an ``EarlyStopping`` stop read ``complete`` with no reason, like a
        fit that ran its whole budget. A tuning ``trial`` is told why
        (:meth:`~tripwire.tune.Trial.note_early_end`: its journaled reason reads ``"completed:
        EarlyStopping(monitor='val_loss'): ..."``; trial 31g)."""
        session = self._session
        if (session is None or self._stop_set or not getattr(self.model, "stop_training", False)
                or session.stopped_by is not None or session.stop_reason is not None):
            return
        session.stop_reason = _outside_stop_reason(self, self._fit_list, max(0, self.steps["train"] - 1),
                                                   self._validation_freq)
        if self.trial is not None:  # (trial 31g, as the Lightning callback: the journal's "completed: <why>")
            note_outside_stop(self.trial, session.stop_reason)

    def _say_unreported_epochs(self) -> None:
        """A WARNING when the fit trained epochs after the last it told the trial of (trial 23c:
        ``validation_freq=2`` with 3 epochs: the journal said resource 2, 'completed', silently; the
        Lightning callback's twin warning)."""
        trained, told = self._trial_epochs
        if self.trial is None or not self._trial_told or trained <= told or getattr(self.model, "stop_training", False):
            return
        logger.warning("tripwire: the last %d epoch(s) of this fit had no validation: the trial was told epoch %d "
                       "(its resource in the journal) and that epoch's value, while epoch %d was the last trained; "
                       "validate at the last epoch (a validation_freq that divides the number of epochs)",
                       trained - told, told, trained)

    # ------------------------------------------------------------------------------ eval / test
    def on_test_begin(self, logs: Mapping[str, Any] | None = None) -> None:
        self._outside_eval = not self._in_fit and _enclosing_fit_list(self, sys._getframe(1)) is not None
        if self._outside_eval:
            # an evaluate inside a fit that has not reached this callback yet (another callback's
            # on_train_begin listed first): the fit's run is not begun; the evaluate is not captured, and
            # claims and ends nothing (trial 43n: taken for an evaluate of its own, it ended the run, and
            # the resumed fit's first batch raised StoreClosedError)
            if "eval-before-fit" not in self._warned:
                self._warned.add("eval-before-fit")
                logger.info("tripwire: an evaluate inside the fit before this callback's on_train_begin (another "
                            "callback's, listed first) is not captured")
            return
        self._end_unseen_fit(sys._getframe(1))
        fresh = self._session is None
        if not self._in_fit:
            self._live_list = _calling_list(self, sys._getframe(1))
        self.session.fence()
        self._mode = "eval" if self._in_fit else "test"
        if not self._in_fit:
            self._reopen()
            if self._live_list is not None:
                # another callback that raises (or sys.exit(0)s) in the evaluate ends the run now, as in a fit
                # (trial 42l: it stayed open and ended failed at exit, a completed fit's run with it)
                for hook in _EVALUATE_HOOKS:
                    original = getattr(self._live_list, hook, None)
                    if callable(original):
                        self._patch(self._patches, self._live_list, hook, self._guard_hook(original))
                # (the list's on_test_begin is the call in progress: the callbacks after this one are
                # wrapped there each, as a fit's on_train_begin; trial 42m)
                for callback in _callbacks_after(self, self._live_list) or ():
                    original = getattr(callback, "on_test_begin", None)
                    if callable(original):
                        self._patch(self._patches, callback, "on_test_begin", self._guard_hook(original))
            if fresh:
                # (an evaluate() through a new callback on a run a fit wrote continues that run, its test steps
                # after the run's, and keeps the fit's end: trial 38p's Lightning twin, a stopped run read complete)
                self.session.continues()
                self.steps["test"] = max(self.steps["test"], self.session.count_on("test"))
        else:
            if self.steps["train"] == 0 and self.session.global_step == 0:
                epoch = _fit_epoch(sys._getframe(1))
                if epoch is not None:
                    self._start_at_epoch(epoch)
            open_plan = self.session.plan
            if open_plan is not None and open_plan.mode == "train" and self._suspended is None:
                # an evaluate inside the fit, from another callback's on_train_batch_end before this one's: the
                # train step is still open. It is taken out of the session for the evaluate's steps and put back
                # at its end (trial 43f: the evaluate's first step ended it, and its loss and weights were lost)
                self._unpatch_step()
                self._suspended = (self.session.suspend_step(), self._plan, list(self._sink))
                self._sink.clear()
                self._plan = None
            if self._resumed_epoch is not None:
                epoch, self._resumed_epoch = self._resumed_epoch, None
                self._count_eval_from(epoch)
        self._index_model()

    def _count_eval_from(self, epoch: int) -> None:
        """The first validation of a fit that started at ``epoch`` > 0 with no steps of ours: its eval
        steps follow those the epochs before it would have used (each validated epoch: a step per
        validation batch, or per ``steps_per_execution`` batches, and its summary step), as its train
        steps do (trial 19b). Where the number of validation batches is not known before the pass
        (a generator without a length): after the eval steps of the run's records, if any."""
        if self.steps["eval"] != 0:
            return
        iterator = getattr(self.model, "_eval_epoch_iterator", None)
        batches = getattr(iterator, "num_batches", None)
        validated = _validated_epochs(epoch, self._validation_freq)
        if isinstance(batches, int) and batches > 0 and validated is not None:
            per_pass = _hook_steps(batches, getattr(self.model, "steps_per_execution", 1)) + 1  # (+ the summary)
            start = validated * per_pass
            how = f"{validated} validated epoch(s) x ({per_pass - 1} batch steps + 1 summary step)"
        else:
            start = self._stored_eval_steps()
            how = "after the eval steps of the run's records"
        if start:
            self.steps["eval"] = start
            logger.info("tripwire: the fit starts at epoch %d: eval steps count on from %d (%s)", epoch, start, how)

    def _stored_eval_steps(self) -> int:
        """One past the last eval step of this worker's records in the run (0: none, or none readable)."""
        return self.session._stored_next("eval")[0]

    def on_test_batch_begin(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self._outside_eval:
            return
        self._begin(self._mode)

    def on_test_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self._outside_eval:
            return
        self._unpatch_step()
        self._take_captured()
        self._check_batch_seen()
        self._say_traced()
        if self._plan:
            self._offer_logs(self._plan, logs or {}, "")
        self._end(self._mode)

    def on_test_end(self, logs: Mapping[str, Any] | None = None) -> None:
        if self._outside_eval:
            self._outside_eval = False
            return
        if self._mode == "test":
            if logs:
                plan = self.session.begin_step("test", self.steps["test"], summary=True)
                self._plan = plan
                self._offer_logs(plan, logs, "test_")
                self._end("test")
            self.close()
        else:
            if self._fit_params is not None:
                self.params = dict(self._fit_params)  # (the evaluate inside the fit set its own: trial 43k)
            if self._suspended is not None:  # (the train step an evaluate inside the fit interrupted goes on)
                self._resume_suspended()

    def _resume_suspended(self) -> None:
        """Put back the train step an ``evaluate`` inside the fit took out (:meth:`on_test_begin`): at
        that evaluate's end, or at the train batch's end where it raised and Keras called no
        ``on_test_end`` (trial 43k: the step was lost, and its loss and weights written as eval step 0).
        An eval step the raising evaluate left open is ended first."""
        if self._suspended is None:
            return
        train_plan, plan, sink = self._suspended
        self._suspended = None
        self._unpatch_step()
        self._sink.clear()
        if self.session.plan is not None:  # (the evaluate raised inside a batch: its step ends as it is)
            self.session.end_step()
        self.session.resume_step(train_plan)
        self._plan, self._mode = plan, "train"
        self._sink.extend(sink)

    # ------------------------------------------------------------------------------ predict
    def on_predict_end(self, logs: Mapping[str, Any] | None = None) -> None:
        """``predict`` is not captured. Once a ``fit`` or ``evaluate`` claimed the run, a ``predict``
        outside ``fit`` ends it as ``evaluate`` does (an already ended run stays as it is; a later
        ``fit`` or ``evaluate`` continues it). Before any ``fit`` or ``evaluate`` there is no run:
        nothing to end, none is claimed."""
        self._end_unseen_fit(sys._getframe(1))
        if self._session is not None and not self._in_fit:
            self.close()

    def _end_unseen_fit(self, frame: Any) -> None:
        """An ``evaluate`` or ``predict`` (a ``CallbackList`` other than the fit's called this hook)
        while a ``fit`` of ours seems to run: that fit ended where no hook saw it (another callback
        raised), so its wrappers are undone and its run ends as failed now, and this call is taken
        for what it is (``evaluate``: mode ``test``, not the fit's validation). An ``evaluate`` or
        ``predict`` called inside the running fit (another callback's ``on_epoch_end``) leaves it
        running: its batches are the fit's ``eval`` steps."""
        if not self._in_fit or self._fit_list is None:
            return
        caller = _calling_list(self, frame)
        if caller is not None and caller is not self._fit_list and _running_with(self._fit_list) is None:
            self.close()

    # ------------------------------------------------------------------------------ steps
    def _begin(self, mode: str) -> StepPlan:
        plan = self.session.begin_step(mode, self.steps[mode])
        self._plan = plan
        if plan and (plan.wants("activations") or plan.wants("relu_outputs") or plan.wants("activation_inputs")
                     or (plan.wants("inputs") and self._normalizers)):
            self._patch_layers(plan)
        batch_kinds = tuple(kind for _, kind in _BATCH_KINDS if plan and plan.wants(kind))
        if batch_kinds:
            self._patch_compute_loss(batch_kinds)
        return plan

    def _end(self, mode: str) -> None:
        self._plan = None
        step = self.steps[mode]
        self.steps[mode] += 1
        self._decide(self.session.end_step, mode, step)

    def _decide(self, step_end: Callable[[], Any], mode: str, step: int) -> None:
        """End the ``mode`` step ``step`` through ``step_end`` (the session's end of a step) and act on
        its decision. A stop is said naming ``mode`` and ``step`` too where they are not the finding's
        own: training stops after this step, and a finding kept at an earlier step (a NaN loss kept
        at step 1, judged at the save step 10) would read as a stop there (trial 32c F5:
        "stopping training: rule 'exploding_tensor' at step 1 (train)" where training ran to step 10)."""
        try:
            decision = step_end()
        except TrainingStopped:
            self.close()
            raise
        if decision.stop and self.model is not None:
            self.model.stop_training = self._stop_set = True
            found = decision.stopped_by or self.session.stopped_by
            if found is not None and found is not self._said_stop:
                # (as the Lightning callback says it: the rule's own line is its log action's, trial 25a)
                self._said_stop = found
                say_stop(found, mode, step, train_step=self.session.mode_steps["train"] - 1)
            note_rule_stop(self.trial, found)  # never the tuner's best

    def _offer_logs(self, plan: StepPlan, logs: Mapping[str, Any], prefix: str, loss: Any = None) -> None:
        """The logs as losses and metrics, each kind only when a collection wants it (an offer of a
        kind nobody asked for ends the run with a warning that it "went to no collection"); ``loss``
        (a train step's): the value offered as ``loss`` in place of the log (the batch's own loss, a
        tensor: see :meth:`_train_loss`)."""
        if loss is not None:
            plan.add("loss", loss, "losses")
        wanted = {kind: plan.keeps(kind) for kind in ("losses", "metrics")}
        if not (wanted["losses"] or wanted["metrics"]):
            return
        for key, value in logs.items():
            name = prefix + key
            if loss is not None and name == "loss":
                continue
            kind = "losses" if name in ("loss", "val_loss", "test_loss") else "metrics"
            if wanted[kind] and plan.select(name, kind):
                try:
                    plan.add(name, float(value), kind)
                except (TypeError, ValueError):
                    continue  # a non-scalar log (a confusion matrix ...): not a loss or metric value

    def _full_optimizer(self) -> bool:
        """Whether the ``optimizer`` kind is captured in full (``lr/0``, update ratios), or the loss scale
        alone: where only rules that read it optionally ask for it (``loss_scale_collapse`` of the
        ``default`` set: no copy of the variables for update ratios), or a collection of the user's
        takes none of the model's learning rates and update ratios (``Session.optimizer_wanted``; trial
        36k, as the Lightning callback: a collection of one layer's tensors beside the default rules
        made every save step copy every variable). Kept per session and model index."""
        held = self._full_for
        if held is None or held[0] is not self.session or held[1] is not self._names:
            names = ["lr/0", *(f"lr/{label}.0" for label, _ in self._optimizers),
                     *(f"update_ratio/{n}" for n in self._names.values())]
            self._full, self._full_for = self.session.optimizer_wanted(names), (self.session, self._names)
        return self._full

    def _offer_loss_scale(self, plan: StepPlan) -> None:
        """``loss_scale`` (kind ``optimizer``): a ``LossScaleOptimizer``'s ``dynamic_scale`` (mixed_float16),
        read as the batch begins, the scale this step's loss is multiplied by (one host read, save steps
        only), which ``loss_scale_collapse`` reads (trial 30a). Nothing for an optimizer without a loss
        scaler, nor before the optimizer is built (no ``dynamic_scale`` yet). On jax the value is read
        where the trainer keeps it during an epoch (:func:`_jax_optimizer_value`; trial 30i F1: it was
        not recorded there, and ``loss_scale_collapse`` never judged); where it cannot be read there,
        a WARNING says once that ``loss_scale`` is not captured, and nothing is recorded."""
        optimizer = getattr(self.model, "optimizer", None)
        while optimizer is not None and getattr(optimizer, "dynamic_scale", None) is None:
            optimizer = getattr(optimizer, "inner_optimizer", None)
        scale = getattr(optimizer, "dynamic_scale", None) if optimizer is not None else None
        if scale is None or not plan.select("loss_scale", "optimizer"):
            return
        if _native.backend_name() == "jax":
            value = _jax_optimizer_value(self.model, scale)
            if value is None:
                self._warn_once("loss_scale", "tripwire: the LossScaleOptimizer's dynamic_scale could not be read from "
                                              "the jax trainer's state: loss_scale is not captured, and the rule "
                                              "loss_scale_collapse judges nothing (docs/keras.md, \"Backends\")")
                return
            plan.add("loss_scale", value, "optimizer")
            return
        plan.add("loss_scale", _native.to_float(scale), "optimizer")

    def _offer_clipping(self, plan: StepPlan) -> None:
        """The optimizer's gradient clipping (kind ``optimizer``, save steps): ``clip/global_norm``,
        ``clip/norm`` and ``clip/value`` for its ``global_clipnorm``, ``clipnorm`` and ``clipvalue``
        (each only where set; Python attributes, no device read), which ``exploding_gradient`` reads so
        as not to advise clipping to a run that clips (the gradients recorded are the unclipped ones;
        trial 31a F3). The innermost ``model.optimizer``'s (a ``LossScaleOptimizer``'s inner one);
        nothing where the model holds several optimizers (whose clipping may differ)."""
        if len(self._optimizers) > 1:
            return
        optimizer = _innermost(getattr(self.model, "optimizer", None))
        for name, attr in (("clip/global_norm", "global_clipnorm"), ("clip/norm", "clipnorm"),
                           ("clip/value", "clipvalue")):
            limit = getattr(optimizer, attr, None)
            if isinstance(limit, (int, float)) and not isinstance(limit, bool) and plan.select(name, "optimizer"):
                plan.add(name, float(limit), "optimizer")

    def _offer_learning_rate(self, plan: StepPlan) -> None:
        """``lr/0``: the rate this step's update uses, read as the batch begins. Keras evaluates a
        ``LearningRateSchedule`` at ``optimizer.iterations`` inside ``apply`` and then counts the
        step, so the value read after the step would be the next step's rate.

        A model holding several optimizers (:func:`_model_optimizers`: a GAN's ``d_optimizer`` and
        ``g_optimizer`` beside ``model.optimizer``): ``lr/<label>.0`` for each (``lr/<optimizer>.<group>``
        as the Lightning callback names several optimizers' rates; a Keras optimizer has one rate,
        group 0), read here and recorded at the step's end only for those whose ``apply`` ran in the
        step (trial 31a F1: ``lr/0`` held the rate of the idle RMSprop ``super().compile()`` makes, not
        that of either optimizer that trained)."""
        if len(self._optimizers) > 1:
            self._step_lrs = [(f"lr/{label}.0", id(inner), _native.to_float(lr)) for label, held in self._optimizers
                              for inner in (_innermost(held),)
                              for lr in (getattr(inner, "learning_rate", None),) if lr is not None]
            return
        if not plan.select("lr/0", "optimizer"):
            return
        held = self._optimizers[0][1] if self._optimizers else getattr(self.model, "optimizer", None)
        lr = getattr(_innermost(held), "learning_rate", None)
        if lr is not None:
            plan.add("lr/0", _native.to_float(lr), "optimizer")

    def _offer_weights(self, plan: StepPlan) -> None:
        """Each variable as ``weights`` or ``biases``, only of the kinds a due collection wants."""
        wanted = {kind: plan.wants(kind) for kind in ("weights", "biases")}
        self._frozen_captured = False
        if not (wanted["weights"] or wanted["biases"]):
            return
        frozen = False
        for v in self.model.weights:
            kind = _weight_kind(v)
            if wanted[kind]:
                plan.add(self._names.get(id(v)) or _var_name(v), v.value, kind)
                frozen = frozen or not getattr(v, "trainable", True)
        self._frozen_captured = frozen  # (a moving statistic is assigned in the next forward pass)

    # ------------------------------------------------------------------------------ loss
    def _wrap_scale_loss(self, original: Callable[..., Any], key: int, keeps_loss: bool = True) -> Callable[..., Any]:
        """Keras's train steps (torch, tensorflow, jax) hand the batch's loss to
        ``optimizer.scale_loss`` right before the backward pass: kept here (a detached reference,
        no host copy) on the steps whose loss is recorded, where ``keeps_loss`` (``model.optimizer``'s);
        a flag check on the others. Each call notes ``key`` (the id of the optimizer it was called on)
        in :attr:`_scaled_ids`: a loss scaler whose ``scale_loss`` a step that applied its gradients
        never called is said (:meth:`_say_unscaled_loss`)."""
        scaled = self._scaled_ids

        def scale_loss(loss: Any, *args: Any, **kwargs: Any) -> Any:
            scaled.add(key)
            if (keeps_loss and self._want_loss and loss is not None and hasattr(loss, "shape")
                    and _native.is_concrete(loss)):
                self._batch_loss = _native.detach(loss)
            return original(loss, *args, **kwargs)

        scale_loss.__wrapped__ = original  # type: ignore[attr-defined]
        return scale_loss

    def _train_loss(self, logs: Mapping[str, Any] | None) -> Any:
        """This train step's loss: the batch's own (what the step handed to ``scale_loss``; on jax,
        recovered from Keras's loss tracker: :meth:`_recover_loss`), else Keras's ``loss`` log (its
        running mean over the epoch so far; said once in a warning when the wrapper was there and
        saw nothing, or where the recovery failed)."""
        loss, self._batch_loss = self._batch_loss, None
        if loss is not None:
            return loss
        recovered, self._recovered = self._recovered, None
        if recovered is not None:
            return recovered
        logged = _logged_loss(logs)
        if logged is not None and self._loss_wrapped:
            self._warn_once(
                "running-mean-loss",
                "tripwire: this train step handed no loss to optimizer.scale_loss (a custom train_step that does "
                "not call it, or a compiled tensorflow step): the training 'loss' recorded is the step's 'loss' log as "
                "it is, which is Keras's running mean over the epoch where the step returns its metrics' results "
                "(compute_metrics), lagging the batch loss (loss rules judge it late); call "
                "`loss = self.optimizer.scale_loss(loss)` before the backward pass, as Keras's train_step does "
                "(docs/keras.md)",
            )
        return logged

    def _recover_loss(self, logs: Mapping[str, Any] | None) -> float | None:
        """This train step's own loss from Keras's loss tracker, where no optimizer wrapper sees the
        batch's loss (jax: the step runs inside ``jax.value_and_grad``). The ``loss`` log is the
        tracker's ``total / count``: ``total`` adds each batch's loss times its weight (Keras's jax
        train step weighs it by the batch's size, a partial last batch included), ``count`` the
        weights; both restart at each epoch. So the step's loss is ``(total - total_before) /
        (count - count_before)``, in float64 on the host from the float32 sums (trial 26e: the
        running mean, stored as the loss, drifted down over an epoch of a model that did not learn,
        and ``loss_not_decreasing`` never fired). With ``steps_per_execution=N`` a step spans N
        batches: their losses' mean, weighted by their sizes. Its error is the float32 rounding of
        Keras's own sum, about ``k * 6e-8`` of the running mean at the k-th step of an epoch.
        None, with a WARNING once, where the tracker cannot be read or is not what the ``loss`` log
        shows (a custom ``train_step`` logging a loss of its own): the log is recorded then."""
        step = self.steps["train"]
        read = self._tracker() if self._tracker is not None else None
        if read is None:
            self._say_running_mean(step, "the state of Keras's loss tracker (the Mean behind the 'loss' log, "
                                         "model.metrics[0]) could not be read")
            return None
        total, count = read
        before_total, before_count = self._tracked
        if count < before_count:  # (reset since the last step: a callback's reset_metrics)
            before_total, before_count = 0.0, 0.0
        self._tracked = (total, count)
        weight = count - before_count
        logged = _logged_loss(logs)
        if not weight > 0:
            # (trial 31a F5: "a custom train_step that does not update it" read as a bug of the user's
            # code, Keras's own guide's, whose loss log is a tracker of its own)
            self._say_running_mean(step, "the loss tracker tripwire reads (Keras's own, model.metrics[0], or a "
                                         "keras.metrics.Mean named 'loss' in model.metrics) did not count this step: "
                                         "the train step logs its 'loss' from a tracker or value of its own")
            return None
        if isinstance(logged, float) and not _same_mean(total / count if count else float("nan"), logged):
            self._say_running_mean(step, f"the 'loss' log ({logged!r}) is not the mean of Keras's loss tracker "
                                         f"({total!r} / {count!r}: a custom train_step that logs a loss of its own)")
            return None
        return (total - before_total) / weight

    def _say_running_mean(self, step: int, why: str) -> None:
        self._warn_once(
            "running-mean-loss",
            f"tripwire: the training 'loss' recorded at train step {step} (and at any other step where this happens) "
            f"is Keras's running mean over the epoch, not the batch's own: {why}; a running mean lags the batch "
            f"loss, and the loss rules judge it late. To record each batch's own loss, keep it in a "
            f"keras.metrics.Mean named 'loss', listed in the model's metrics and updated once a step with the "
            f"batch's loss, whose result the step logs as 'loss' (as Keras's guides to customizing fit() do): "
            f"tripwire recovers each step's loss from its total and count (docs/keras.md, \"Training loss\")")

    # ------------------------------------------------------------------------------ gradients
    def _wrap_apply(self, optimizer: Any, original: Callable[..., Any]) -> Callable[..., Any]:
        """``optimizer.apply`` for the fit (each optimizer of :attr:`_optimizers`): notes that it ran
        at this step (:attr:`_applied_ids`), and at a save step that wants them captures the gradients
        and update ratios of its first call in the step (:meth:`_apply_and_capture`; a train_step that
        calls it twice: the first call's). Several optimizers (a GAN's): each one's own."""
        key = id(optimizer)
        applied = self._applied_ids

        def apply(grads: Any, trainable_variables: Any = None, *args: Any, **kwargs: Any) -> Any:
            first = key not in applied
            self._applied = True
            if first:
                applied.add(key)
                self._applied_in_fit.add(key)
            if self._session is not None:
                self._session.fence()  # (the variables change in place below)
            plan = self._grad_plan if first else None
            if plan is None and self._ratios_due is None:
                return original(grads, trainable_variables, *args, **kwargs)
            return self._apply_and_capture(plan, optimizer, original, grads, trainable_variables, args, kwargs)

        apply.__wrapped__ = original  # type: ignore[attr-defined]
        return apply

    def _apply_and_capture(self, plan: StepPlan | None, optimizer: Any, original: Callable[..., Any], grads: Any,
                           variables: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The optimizer's ``apply`` at a step that captures: ``plan``'s gradients and update ratios
        (a save step's), or the update ratios a save step that was a gradient-accumulation
        micro-step asked for (:attr:`_ratios_due`, ``plan`` None or not wanting them): those are
        taken at the first step that updates the weights and recorded at its end in a record of
        their own (:meth:`_record_late_ratios`; trial 27e: with ``gradient_accumulation_steps=4``
        and the default interval 10 no save step ever updated, and no ratio was recorded)."""
        grads = list(grads)
        vars_ = list(variables) if variables is not None else list(getattr(self.model, "trainable_variables", []))
        if len(vars_) != len(grads) or not all(g is None or _native.is_concrete(g) for g in grads):
            self._warn_once(  # (tensorflow: on jax the optimizer is not wrapped)
                "traced",
                f"tripwire: gradients and update ratios are not captured in a compiled {_native.backend_name()} train "
                f"step (its values are symbolic); compile the model with run_eagerly=True to capture them",
            )
            return original(grads, variables, *args, **kwargs)
        names = [self._names.get(id(v)) or _var_name(v) for v in vars_]
        if plan is not None and plan.wants("gradients"):
            scale = getattr(optimizer, "loss_scale_factor", None)
            for g, name in zip(grads, names):
                if g is not None:
                    plan.add(f"gradients/{name}", g if scale is None else g / scale, "gradients")
        tracked = []
        late = False
        if plan is not None and plan.wants("optimizer") and self._full_optimizer():
            tracked = [(f"update_ratio/{n}", v) for n, v in zip(names, vars_) if plan.select(f"update_ratio/{n}", "optimizer")]
        if not tracked and self._ratios_due is not None:  # (asked at an earlier save step: a micro-step)
            due = self._ratios_due
            tracked = [(f"update_ratio/{n}", v) for n, v in zip(names, vars_) if f"update_ratio/{n}" in due]
            late = True
        if tracked:
            updates = self._updates_weights(optimizer)
            if updates is not True:
                # the weights do not move at this step (or it cannot be told): no ratio, 0 would read as
                # "frozen"; a micro-step's are taken at the next update (see _ratios_due)
                if updates is False and not late:
                    self._ratio_saves[0] += 1
                    self._ratios_due = frozenset(name for name, _ in tracked)
                elif updates is None:
                    self._ratios_due = None
                tracked = []
        if not tracked:
            return original(grads, variables, *args, **kwargs)
        self._ratio_saves[1] += 1
        self._ratios_due = None  # (an update: what any earlier save step asked is this step's ratios)
        before = self._before[id(optimizer)] = _native.copy_values([v.value for _, v in tracked],
                                                                   into=self._before.get(id(optimizer)))
        result = original(grads, variables, *args, **kwargs)
        after = [v.value for _, v in tracked]
        # (exact: another backend, or a norm that overflows the float type: the backend's l2)
        norms = _native.update_norms(before, after, lambda ts: self.backend.reduce(ts, ["l2"])[:, 0])
        k = len(tracked)
        with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero weight (a fresh bias): inf, as in Lightning
            ratios = norms[:k] / norms[k:]
        if late:
            self._late_ratios = [(name, ratio) for (name, _), ratio in zip(tracked, ratios.tolist())]
        else:
            for (name, _), ratio in zip(tracked, ratios.tolist()):
                plan.add(name, ratio, "optimizer")  # type: ignore[union-attr]
        return result

    def _record_late_ratios(self, step: int) -> None:
        """The update ratios taken at this train step for an earlier save step that was a
        gradient-accumulation micro-step (:meth:`_apply_and_capture`): recorded at ``step``, the
        update step, in a summary record of their own (``optimizer`` only) after the step's own
        (a step that saves nothing, or that saves other collections), and judged there."""
        ratios, self._late_ratios = self._late_ratios, []
        if not ratios:
            return
        plan = self._plan = self.session.begin_step("train", step, summary=True)
        for name, ratio in ratios:
            if plan.select(name, "optimizer"):
                plan.add(name, ratio, "optimizer")
        self._plan = None
        self._decide(self.session.end_step, "train", step)

    def _updates_weights(self, optimizer: Any) -> bool | None:
        """Does this ``apply`` update the variables? Not at the micro-steps of
        ``gradient_accumulation_steps=N``: Keras updates when ``(optimizer._iterations + 1) % N
        == 0`` (read here as Keras reads it, before the step; one host copy, at save steps only)
        and otherwise only adds the gradients to its accumulators. Without that counter the step
        cannot be told: None (no update ratio; a warning once), since a ratio of 0 at a
        micro-step would read as "the parameters do not move"."""
        steps = getattr(optimizer, "gradient_accumulation_steps", None)
        if not steps:
            return True
        iterations = getattr(optimizer, "_iterations", None)
        try:
            if iterations is not None:
                return (int(np.asarray(ops.convert_to_numpy(iterations)).reshape(())) + 1) % int(steps) == 0
        except (TypeError, ValueError):
            pass
        self._warn_once(
            "accumulation",
            f"tripwire: the optimizer accumulates gradients (gradient_accumulation_steps={steps!r}) and has "
            f"no iteration counter tripwire can read, so the steps that update the weights cannot be told "
            f"from the others: update ratios are not recorded (docs/keras.md)",
        )
        return None

    # ------------------------------------------------------------------------------ layers
    def _patch_layers(self, plan: StepPlan) -> None:
        """Wrap, for this step only, the layers whose outputs or activation inputs are due.

        A layer applying relu/tanh/sigmoid (fused like ``Dense(activation="tanh")`` or standalone
        like ``Activation("tanh")``/``ReLU()``) is seen as holding an activation ``<layer>/<fn>``
        whose input (the pre-activation) is ``<layer>/<fn>/input`` and whose ReLU output is
        ``<layer>/<fn>/output``; they are taken from a wrapper of ``layer.activation`` (nothing
        recomputed) or, for ``ReLU()``, of ``layer.call``. A recurrent layer's output is taken
        at the recurrent layer, its cell's activation input at the cell (see _capture_layers).
        The wrappers only hand what they see to :attr:`_sink`; it is offered at the step's end
        (:meth:`_take_captured`), and each save step that wants the same installs the same wrapper
        objects (:meth:`_patch_step`): see :meth:`_patch_step` for why."""
        self._captured = set()
        # (each kind only when a due collection wants it: select() counts a name as offered)
        outputs_due, inputs_due, relu_due = (plan.wants(k) for k in _LAYER_KINDS)
        self._layer_due = tuple(k for k, due in zip(_LAYER_KINDS, (outputs_due, inputs_due, relu_due)) if due)
        model_inputs_due = plan.wants("inputs")
        for layer, name, outputs, activation in self._layers or ():
            out_kinds = ("activations",) if outputs_due and outputs and plan.select(f"{name}/output", "activations") else ()
            if model_inputs_due and id(layer) in self._normalizers:
                # what the model makes of its inputs itself (see _NORMALIZERS): in place of the input
                # it takes, else (where the graph does not say which) as an input of its own
                taken = self._normalizers[id(layer)]
                if taken is not None:
                    self._patch_step(layer, "call", ("normalizer", name, taken), self._wrap_normalizer)
                elif plan.select(f"{name}/output", "inputs"):
                    out_kinds += ("inputs",)
            act = _activation_of(layer) if activation and (inputs_due or relu_due) else None
            in_name = relu_name = None
            if act is not None:
                if inputs_due and plan.select(f"{name}/{act}/input", "activation_inputs"):
                    in_name = f"{name}/{act}/input"
                if relu_due and act == "relu" and plan.select(f"{name}/{act}/output", "relu_outputs"):
                    relu_name = f"{name}/{act}/output"
            fused = act is not None and callable(getattr(layer, "activation", None))
            if fused and (in_name or relu_name):
                self._patch_step(layer, "activation", ("activation", in_name, relu_name), self._wrap_activation)
                in_name = relu_name = None
            if out_kinds or in_name or relu_name:
                self._patch_step(layer, "call", ("call", name, out_kinds, in_name, relu_name), self._wrap_call)

    def _patch_step(self, obj: Any, attr: str, what: tuple[Any, ...],
                    make: Callable[[Callable[..., Any], tuple[Any, ...]], Callable[..., Any]]) -> None:
        """Wrap ``obj.<attr>`` for this step with ``make(the value it wraps, what)``: a wrapper that
        appends what it is handed to :attr:`_sink` and nothing else. The first save step that wants
        ``what`` of ``obj`` makes it; a later one installs the very same function objects again
        (where ``obj.<attr>`` holds what it held then), so that a compiled step (torch's
        ``jit_compile=True``: TorchDynamo) finds the graph it compiled for them instead of compiling
        again. Trial 29i F2: new wrappers at every save step, which offered to the plan inside the
        step (set and dict mutations TorchDynamo cannot keep in one graph: a graph break in every
        layer after the first), had the layers' shared code (Keras's ``forward``) recompiled per
        layer type, mode and save step until TorchDynamo's ``recompile_limit`` (8) sent those frames
        to eager execution for the rest of the process; a ``Dropout`` run eagerly draws its mask
        from torch's generator, not from the compiled graph's seeds, and the same seeded fit ended
        with other weights than without the callback (0.025 apart after two epochs)."""
        key = (id(obj), attr, what)
        current = vars(obj).get(attr, _MISSING)
        made = self._step_wrappers.get(key)
        if made is None or made[0] is not obj or made[1] is not current:
            wrapper = make(getattr(obj, attr), what)
            entry = self._patch(self._step_patches, obj, attr, wrapper)
            self._step_wrappers[key] = (obj, current, vars(obj)[attr], entry)
            return
        _, _, patched, entry = made
        entry.undone = False
        self._step_patches.append(entry)
        object.__setattr__(obj, attr, patched)

    def _wrap_call(self, original: Callable[..., Any], what: tuple[Any, ...]) -> Callable[..., Any]:
        """A layer's ``call``: its output (and input, where its activation input is due) to the sink."""
        sink = self._sink
        wants_input = what[3] is not None

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                out = original(*args, **kwargs)
            except BaseException:
                # every wrapper undone but the train_function guard: it ends the run as failed when
                # the error leaves the training step, or (an error of the validation pass) at the
                # next training step without this callback; the run stayed open for good (trial 17c)
                self._restore_all(keep_guard=True)
                raise
            sink.append((what, (args[0] if args else kwargs.get("inputs")) if wants_input else None, out))
            return out

        return call

    def _wrap_activation(self, original: Callable[..., Any], what: tuple[Any, ...]) -> Callable[..., Any]:
        """A layer's fused ``activation``: its input and output to the sink."""
        sink = self._sink

        def activation(x: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(x, *args, **kwargs)
            sink.append((what, x, out))
            return out

        return activation

    def _take_captured(self) -> None:
        """Offer what this step's wrappers appended to :attr:`_sink` (in call order) to the step's
        plan: a layer's output, activation input and ReLU output at its first call (a layer called
        twice in a step: the first call's), the outputs of the layers that rescale the model's
        inputs, and ``model.compute_loss``'s inputs, labels and predictions (its first call's).
        Done at the step's end, outside the step: the wrappers do nothing inside it but append."""
        items = list(self._sink)
        self._sink.clear()  # (in place: the wrappers hold this list)
        plan = self._plan
        if plan is None:
            return
        normalized: dict[str, tuple[str, Any]] = {}  # input name -> (layer, its output)
        for what, *values in items:
            tag = what[0]
            if tag == "call":
                _, name, out_kinds, in_name, relu_name = what
                if name in self._captured:
                    continue
                self._captured.add(name)
                taken, out = values
                if in_name is not None:
                    self._offer(plan, in_name, taken, ("activation_inputs",))
                outs = keras.tree.flatten(out)
                if relu_name is not None and len(outs) == 1:
                    self._offer(plan, relu_name, outs[0], ("relu_outputs",))
                if len(outs) == 1:
                    self._offer(plan, f"{name}/output", outs[0], out_kinds)
                else:
                    for i, o in enumerate(outs):
                        self._offer(plan, f"{name}/output_{i}", o, out_kinds)
            elif tag == "activation":
                _, in_name, relu_name = what
                key = in_name or relu_name
                if key in self._captured:
                    continue
                self._captured.add(key)
                x, out = values
                if in_name is not None:
                    self._offer(plan, in_name, x, ("activation_inputs",))
                if relu_name is not None:
                    self._offer(plan, relu_name, out, ("relu_outputs",))
            elif tag == "normalizer":
                _, name, taken_names = what
                if taken_names[0] not in normalized:
                    for candidate in taken_names:  # (the input's name as the batch may give it: by position or by key)
                        normalized[candidate] = (name, values[0])
            elif tag == "compute_loss" and not self._batch_seen:
                self._batch_seen = True  # (a train_step that calls it twice: the first call's)
                self._offer_batch(plan, values[0], values[1], normalized)
                normalized = {}

    def _offer(self, plan: StepPlan, name: str, tensor: Any, kinds: tuple[str, ...]) -> None:
        if tensor is None or not hasattr(tensor, "shape"):
            return
        if not _native.is_concrete(tensor):
            self._note_traced(plan.mode, kinds)  # (said at the step's end: _say_traced)
            return
        for kind in kinds:
            plan.add(name, tensor, kind)

    def _note_traced(self, mode: str, kinds: tuple[str, ...]) -> None:
        """``kinds`` were handed to a wrapper as symbolic values (or, in a compiled step traced
        before, not at all) at this ``mode`` step: noted, said at the step's end. (Nothing here
        reads ``self.model``: on jax that property syncs the trainer's state into the variables,
        which inside the step's forward pass would undo the step.)"""
        noted = self._traced.setdefault(mode, [])
        noted.extend(k for k in kinds if k not in noted)

    def _say_traced(self) -> None:
        """A WARNING per cause for the kinds noted at this step that it has not named yet (trial 26e:
        one message per group of kinds, "inputs, labels and predictions", whichever of them was
        missing, and "compile with run_eagerly=True", which cannot help on jax), and the reason
        close()'s "had nothing to read" gives for their collections (not "a model with no ReLU
        layer")."""
        traced, self._traced = self._traced, {}
        for mode, kinds in traced.items():
            cause = _traced_cause(self._model, mode)
            said = self._traced_said.setdefault(cause, set())
            new = [k for k in kinds if k not in said]
            if not new:
                continue
            said.update(new)
            message, why = _traced_message(cause, new, _native.backend_name())
            self._empty_because(new, why)
            if self._session is not None:  # (said: not again at close as collections that captured nothing)
                self._session.unavailable(new)
            logger.warning(message)

    def _empty_because(self, kinds: tuple[str, ...] | list[str], why: str) -> None:
        """Tell the session why the collections of ``kinds`` (those naming them) may stay empty."""
        session = self._session
        if session is None:
            return
        names = [c.name for c in session.collections.values() if c.kinds is not None and set(kinds) & set(c.kinds)]
        if names:
            session.empty_because(names, why)

    # ------------------------------------------------------------------------------ batch
    def _patch_compute_loss(self, kinds: tuple[str, ...]) -> None:
        """Wrap ``model.compute_loss`` for this step: Keras's ``train_step`` and ``test_step`` (on
        every backend) hand it the batch's inputs, labels and the model's predictions,
        ``compute_loss(x, y, y_pred, sample_weight)``; they are offered as ``inputs``, ``labels``
        and ``predictions`` at the step's end (each kind only when a due collection wants it; see
        :meth:`_take_captured`)."""
        if not callable(getattr(self.model, "compute_loss", None)):
            return
        self._batch_due, self._batch_seen = kinds, False
        self._patch_step(self.model, "compute_loss", ("compute_loss",), self._wrap_compute_loss)

    def _wrap_compute_loss(self, original: Callable[..., Any], what: tuple[Any, ...]) -> Callable[..., Any]:
        sink = self._sink

        def compute_loss(*args: Any, **kwargs: Any) -> Any:
            sink.append((what, args, kwargs))
            return original(*args, **kwargs)

        compute_loss.__wrapped__ = original  # type: ignore[attr-defined]
        return compute_loss

    def _offer_batch(self, plan: StepPlan, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                     normalized: dict[str, tuple[str, Any]]) -> None:
        """The inputs, labels and predictions of a ``model.compute_loss(x, y, y_pred, ...)`` call
        (``args``, ``kwargs``) to ``plan``; an input the model rescales first (``normalized``: the
        output of that layer, by input name; see :data:`_NORMALIZERS`) in its place."""
        for i, (key, kind) in enumerate(_BATCH_KINDS):
            value = args[i] if i < len(args) else kwargs.get(key)
            if value is None and plan.wants(kind) and plan.mode == "train":
                # (trial 19g: Keras's torch guide writes compute_loss(y=y, y_pred=y_pred) in a
                # custom train_step: no inputs at train steps, and no word of it)
                self._warn_once(
                    f"compute-loss-without-{key}",
                    f"tripwire: a train step called model.compute_loss without {key}= (a custom "
                    f"train_step such as `self.compute_loss(y=y, y_pred=y_pred)`), so its {kind} are not "
                    f"recorded in train and the rules that read them judge nothing there; pass "
                    f"`self.compute_loss(x=x, y=y, y_pred=y_pred)` (docs/keras.md)")
            if value is None or not plan.wants(kind):
                continue
            for name, tensor in _named_leaves(kind, value):
                if kind == "inputs" and name in self._index_inputs:
                    self._say_index_input(name)
                    continue  # (token ids, category indices: no features to judge)
                if kind == "inputs" and name in normalized:  # (the model rescales it first: as it does)
                    layer_name, tensor = normalized[name]
                    normalized = {k: v for k, v in normalized.items() if v[0] != layer_name}
                if plan.select(name, kind):
                    self._offer(plan, name, tensor, (kind,))
        for layer_name, out in dict(normalized.values()).items():  # (an input named otherwise)
            if plan.select(f"{layer_name}/output", "inputs"):
                self._offer(plan, f"{layer_name}/output", out, ("inputs",))

    def _say_index_input(self, name: str) -> None:
        """Say once a model (at INFO) that its input ``name``, which goes straight into index layers
        only, is not captured as an input (see :func:`_index_inputs`)."""
        if name in self._index_said:
            return
        self._index_said.add(name)
        logger.info("tripwire: the model input %r goes straight into an index layer (an Embedding's token ids, an "
                    "IntegerLookup's or CategoryEncoding's category indices): no features, so it is not captured as "
                    "an input and input_not_normalized does not judge it (docs/keras.md)", name)

    def _wrap_normalizer(self, original: Callable[..., Any], what: tuple[Any, ...]) -> Callable[..., Any]:
        """A Rescaling/Normalization layer's ``call`` on a save step: its output to the sink, offered
        in place of the model input it takes (see :data:`_NORMALIZERS`, :meth:`_take_captured`)."""
        sink = self._sink

        def call(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            sink.append((what, out))
            return out

        return call

    def _check_batch_seen(self) -> None:
        """Say once when a step that wanted inputs, labels or predictions never called
        ``model.compute_loss`` (a custom ``train_step``/``test_step`` that computes its loss
        another way): nothing of them was recorded."""
        layer_due, self._layer_due = self._layer_due, ()
        compiled = bool(self._batch_due or layer_due) and _native.step_compiled(self._model)  # (no state sync)
        mode = self._plan.mode if self._plan is not None else "train"
        if compiled and layer_due and not self._captured:
            # (a compiled step traced before: no Python of the model runs, no wrapper is called)
            self._note_traced(mode, layer_due)
        if self._batch_due and not self._batch_seen and compiled:
            self._note_traced(mode, self._batch_due)
        elif self._batch_due and not self._batch_seen:
            wanted = " and ".join(self._batch_due)
            self._warn_once(
                "compute-loss-missed",
                f"tripwire: {wanted} are taken from the arguments of model.compute_loss(x, y, y_pred, "
                f"sample_weight), which a save step that wanted them did not call (a custom train_step or "
                f"test_step that computes its loss another way): none was recorded; call "
                f"`loss = self.compute_loss(x=x, y=y, y_pred=y_pred)` there, as Keras's own steps do "
                f"(docs/keras.md)")
            if self._session is not None:  # (said: not again at close, as collections that captured nothing)
                self._session.unavailable(self._batch_due)
        self._batch_due, self._batch_seen = (), False

    # ------------------------------------------------------------------------------ plumbing
    def _index_model(self) -> None:
        """Names for the model's variables and its leaf layers (once per model): each layer is named
        by its place in the model's layer tree (:func:`_layer_tree`) and each variable by its
        layer's name (:func:`_variable_names`), so that a layer's weights, gradients, update ratios
        and activations share one prefix."""
        if self.model is None or (self._layers is not None and self._indexed is self.model):
            return
        self._indexed = self.model
        self._step_wrappers = {}  # (made for the model indexed before)
        tree = _layer_tree(self.model)
        paths = {id(layer): name for layer, name in tree}
        self._names = _variable_names(self.model, tree)
        layers: list[tuple[Any, str, bool, bool]] = []
        for layer, outputs, activation in _capture_layers(self.model):
            if not isinstance(layer, keras.layers.InputLayer):
                name = paths.get(id(layer)) or str(layer.name)
                layers.append((layer, name, outputs, activation))
        self._layers = layers
        self._normalizers = _normalizer_inputs(self.model, [layer for layer, _, _, _ in layers])
        self._index_inputs, index_layers = _index_inputs(self.model)
        self._index_said = set()
        if self._index_inputs and all(set(n) <= self._index_inputs for n in _input_names(self.model).values()):
            # (every input of the model: the inputs collections stay empty, and the rules reading
            # them say this at the end, not "captured nothing")
            self._empty_because(("inputs",), f"the model's inputs are token ids or category indices (they go "
                                             f"straight into {' and '.join(index_layers)}), which are not captured "
                                             f"as inputs (docs/keras.md)")

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``model.train_function`` for the fit: a step that raises ends the run as failed; a call
        that no ``on_train_batch_begin`` of ours announced is another ``fit`` (or ``train_on_batch``)
        without this callback, after a fit of ours that ended where no hook saw it (another callback
        or the data pipeline raised): every wrapper is undone then, and that fit's run ends as
        failed, before the step runs unwrapped."""

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if not self._announced:
                self.close()  # (restores train_function itself: later calls go to fn directly)
                return fn(*args, **kwargs)
            self._announced = False
            try:
                return fn(*args, **kwargs)
            except BaseException as exc:
                self.close(None if exits_cleanly(exc) else "failed")  # (see close)
                raise

        guarded.__wrapped__ = fn  # type: ignore[attr-defined]
        return guarded

    def _guard_hook(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """A hook of the fit's ``CallbackList`` (each callback's, in turn): an error there (another
        callback's) ends the run as failed (stopped, where a rule had stopped training) and undoes
        every wrapper, the optimizer's included, before it leaves ``fit`` (issue 5: the optimizer
        is restored even when fit raises; it stayed wrapped until the next fit, trial 17c)."""

        def hook(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except BaseException:
                self.close()
                raise

        return hook

    @staticmethod
    def _patch(store: list[_Patch], obj: Any, attr: str, wrapper: Callable[..., Any]) -> _Patch:
        """Set ``obj.<attr>`` (an instance attribute) to ``wrapper``, through a pass-through that
        calls what was there before (``getattr(obj, attr)``, which ``wrapper`` wraps) once the patch
        is undone while another wrapper over it remains (see :meth:`_undo`). Returns the patch."""
        prior = getattr(obj, attr)
        entry = _Patch(obj, attr, vars(obj).get(attr, _MISSING))

        def patched(*args: Any, **kwargs: Any) -> Any:
            if entry.undone:  # (undone under another callback's wrapper, which still calls it)
                return prior(*args, **kwargs)
            return wrapper(*args, **kwargs)

        patched.__wrapped__ = prior  # type: ignore[attr-defined]
        patched._tripwire_patch = entry  # type: ignore[attr-defined]
        store.append(entry)
        # object.__setattr__: a plain instance attribute, without Keras's attribute tracking (which
        # costs more than the wrapper itself on every save step)
        object.__setattr__(obj, attr, patched)
        return entry

    @staticmethod
    def _undo(store: list[_Patch]) -> None:
        """Undo the patches of ``store``, last first. Several callbacks may wrap one method in turn
        (two TripwireCallbacks in one fit; a new callback's fit over the wrappers a fit that raised
        in its data pipeline left): a patch undone while another's wrapper is over it stays in that
        wrapper's chain as a pass-through, and whichever is undone last puts back the value under
        all of them (trial 21c: undoing one put back, or took away, the other's for good). A value
        set over ours by anything else (Keras's ``compile`` resets ``train_function``) is kept."""
        while store:
            entry = store.pop()
            entry.undone = True
            obj, attr = entry.obj, entry.attr
            value = vars(obj).get(attr, _MISSING)
            top = _patch_of(value)
            if top is None or not top.undone:
                continue  # another callback's wrapper over ours (it undoes ours with its own), or a value set since
            while top is not None and top.undone:  # (ours, and undone ones of other callbacks under it)
                value = top.old
                top = _patch_of(value)
            if value is _MISSING:
                vars(obj).pop(attr, None)
            else:
                object.__setattr__(obj, attr, value)

    def _unpatch_step(self) -> None:
        if self._step_patches:
            self._undo(self._step_patches)

    def _restore_all(self, keep_guard: bool = False) -> None:
        self._grad_plan = None
        self._batch_due, self._batch_seen = (), False
        self._layer_due, self._traced = (), {}
        self._want_loss, self._batch_loss, self._loss_wrapped = False, None, False
        self._undo(self._step_patches)
        self._sink.clear()
        guard = [e for e in self._patches if keep_guard and e.obj is self.model and e.attr == "train_function"]
        self._patches[:] = [e for e in self._patches if e not in guard]
        self._undo(self._patches)
        self._patches.extend(guard)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message)


# ---------------------------------------------------------------------------------- helpers
class _Patch:
    """One wrapper set as ``obj.<attr>`` (see :meth:`TripwireCallback._patch`): ``old`` is the
    instance value before it (``_MISSING``: none, the class's method showed through); ``undone``
    once :meth:`TripwireCallback._undo` took it back."""

    __slots__ = ("obj", "attr", "old", "undone")

    def __init__(self, obj: Any, attr: str, old: Any) -> None:
        self.obj, self.attr, self.old, self.undone = obj, attr, old, False


def _weights_fingerprint(model: Any) -> tuple[tuple[int, ...], np.ndarray] | None:
    """The ids of all ``model``'s weights (``model.weights``: trainable and not, so that freezing or
    unfreezing a layer between two fits changes nothing; trial 25h) and a fingerprint of their
    values: each one's L2 norm and sum, on the backend's device (:func:`_native.value_fingerprint`:
    no host copy of the weights). None where it cannot be taken (no weight): the next fit is then a
    new training."""
    variables = list(getattr(model, "weights", None) or []) if model is not None else []
    if not variables:
        return None
    variables.sort(key=id)  # (an order that a layer's trainable flag does not change)
    try:
        _native.sync_variables(model)
        host = _native.value_fingerprint([getattr(v, "value", v) for v in variables])
    except Exception as exc:  # (a fingerprint is a hint: a fit is never broken by it; the fit then counts as new)
        logger.debug("tripwire: no fingerprint of the model's weights (%s: %s): a later fit is a new training",
                     type(exc).__name__, exc)
        return None
    return tuple(id(v) for v in variables), host


def _fit_state(model: Any, epoch_ends: Sequence[tuple[tuple[int, ...], np.ndarray]] = ()
               ) -> tuple[Any, list[tuple[tuple[int, ...], np.ndarray]]] | None:
    """``(model, fingerprints)`` at a fit's end: the fingerprints (:func:`_weights_fingerprint`) of
    ``model``'s weights at the fit's epoch ends (``epoch_ends``, taken at this callback's
    ``on_epoch_end``) and now. None where none is known."""
    fingerprints = list(epoch_ends)
    now = _weights_fingerprint(model)
    if now is not None:
        fingerprints.append(now)
    return (model, fingerprints) if fingerprints else None


def _continues(fit_end: tuple[Any, list[tuple[tuple[int, ...], np.ndarray]]] | None, model: Any) -> bool:
    """Whether a fit of ``model`` continues the fit that ended with ``fit_end`` (:func:`_fit_state`):
    the same model object, the same weights (variables), their values as that fit left them or as
    one of its epochs ended (restored after the fit: ``EarlyStopping(restore_best_weights=True)``,
    whichever its place in the callback list, or a best checkpoint loaded; trial 26j). A model built
    again, or other weights initialized, loaded or set, is a new training (trial 25e); a layer
    frozen or unfrozen is not (trial 25h)."""
    if fit_end is None or fit_end[0] is not model:
        return False
    return same_as_any(fit_end[1], _weights_fingerprint(model))


def _forget(session: Session) -> None:
    """Drop ``session`` from :data:`_OPEN` (it is ending: nothing to release later)."""
    for key, (held, _) in list(_OPEN.items()):
        if held is session:
            del _OPEN[key]


def _running_with(callback_list: Any) -> str | None:
    """The name of a thread of this process whose stack holds ``callback_list`` now (a Keras
    ``fit``, ``evaluate`` or ``CallbackList`` frame with it as ``callbacks`` or ``self``: that call
    is running), else None (the call has exited; a traceback kept of it is on no stack)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, top in list(sys._current_frames().items()):
        f = top
        while f is not None:
            if str(f.f_globals.get("__name__", "")).startswith("keras"):
                held = f.f_locals
                if held.get("callbacks") is callback_list or held.get("self") is callback_list:
                    return names.get(ident, str(ident))
            f = f.f_back
    return None


def _described(cls: str, out_dir: Path | str | None, config: Config, state: str, findings: Sequence[Finding],
               stopped_by: Finding | None) -> str:
    """A callback's repr (trial 30f F6: the default ``<... at 0x...>`` said nothing in a notebook)."""
    rules = [spec.shown_name for spec in config.rules]
    parts = [f"out_dir={str(out_dir) if out_dir is not None else None!r}", f"rules={rules!r}", state,
             f"findings={len(findings)}"]
    if stopped_by is not None:
        parts.append(f"stopped_by={stopped_by.rule!r}")
    return f"{cls}({', '.join(parts)})"


def _keras_call(frame: Any) -> str:
    """The Keras ``fit``, ``evaluate`` or ``predict`` whose frame is at or above ``frame`` (a
    ``CallbackList`` it builds hands the callbacks its model), as ``"fit"``, ...; ``"call"`` where
    none is found."""
    for f in frames_above(frame, 8):
        if f.f_code.co_name in ("fit", "evaluate", "predict") and str(f.f_globals.get("__name__", "")).startswith("keras"):
            return f.f_code.co_name
    return "call"


def _patch_of(value: Any) -> _Patch | None:
    """The patch whose wrapper ``value`` is, or None (any other value)."""
    if not isinstance(value, types.FunctionType):
        return None
    entry = getattr(value, "_tripwire_patch", None)
    return entry if isinstance(entry, _Patch) else None


#: The hooks of fit's CallbackList that ``fit`` calls while it trains and validates.
_FIT_HOOKS = ("on_epoch_begin", "on_epoch_end", "on_train_batch_begin", "on_train_batch_end", "on_test_begin",
              "on_test_end", "on_test_batch_begin", "on_test_batch_end", "on_train_end")
_EVALUATE_HOOKS = ("on_test_batch_begin", "on_test_batch_end", "on_test_end")
"""The hooks of an ``evaluate``'s callback list guarded as a fit's are (:data:`_FIT_HOOKS`)."""


def _calling_list(callback: keras.callbacks.Callback, frame: Any) -> Any:
    """The ``CallbackList`` that holds ``callback`` and called its hook, found in the frames above
    ``frame`` (Keras's CallbackList loops over its callbacks there; ``fit``'s validation passes its
    own list to ``evaluate``); None where none is found."""
    for f in frames_above(frame, 4):
        owner = f.f_locals.get("self")
        if isinstance(owner, keras.callbacks.CallbackList) and any(
                cb is callback for cb in getattr(owner, "callbacks", None) or ()):
            return owner
    return None


#: Keras's own callbacks that never set ``model.stop_training`` (left out of the callbacks an outside
#: stop names: see :func:`_outside_stop_reason`).
_NEVER_STOP = ("History", "ProgbarLogger")


def _outside_stop_reason(callback: keras.callbacks.Callback, callback_list: Any, step: int,
                         validation_freq: Any = 1) -> str:
    """Why a fit whose ``model.stop_training`` ``callback`` did not set stopped, for its run's
    ``stop_reason``: ``model.stop_training was set outside tripwire (train step N): `` and then the
    stop of the ``EarlyStopping`` (or subclass) of ``callback_list`` that stopped this fit (its
    ``stopped_epoch``, set at the epoch end it stopped at, is reset at each fit's start) with its
    monitor, the epoch, the improvement it waited for and the best value; else ``by another callback
    (...)``, naming the fit's other callbacks (not Keras's History and ProgbarLogger), ``or the
    model's own code``. ``callback_list`` None (not found): no callback is named.

    ``validation_freq`` (the fit's): an ``EarlyStopping`` on a ``val_`` metric counts its patience in
    validations, skipping the epochs ``fit(validation_freq=N)`` does not validate (no ``val_`` log
    there), so the reason says ``in the last 2 validation(s), at epochs 10 and 12 (validation_freq=2)``
    (trial 31a F4: ``in the last 2 epoch(s)``, beside ``best ... at epoch 8``)."""
    head = f"model.stop_training was set outside tripwire (train step {step})"
    others = [cb for cb in (getattr(callback_list, "callbacks", None) or ()) if cb is not callback]
    for cb in others:
        stopped = getattr(cb, "stopped_epoch", 0)
        if isinstance(cb, keras.callbacks.EarlyStopping) and isinstance(stopped, int) and stopped > 0:
            monitor = getattr(cb, "monitor", None)
            wait, patience = getattr(cb, "wait", None), getattr(cb, "patience", None)
            delta = abs(float(getattr(cb, "min_delta", 0.0) or 0.0))
            best, best_epoch = getattr(cb, "best", None), getattr(cb, "best_epoch", None)
            baseline = getattr(cb, "baseline", None)
            validated = (_validation_epochs(stopped + 1, validation_freq)
                         if str(monitor).startswith("val_") and validation_freq != 1 else None)
            if validated is not None and isinstance(wait, int) and 0 < wait <= len(validated):
                at = [str(e) for e in validated[-wait:]]
                epochs = at[0] if len(at) == 1 else f"{', '.join(at[:-1])} and {at[-1]}"
                span = (f"the last {wait} validation(s), at epoch{'s' if len(at) > 1 else ''} {epochs} "
                        f"(validation_freq={validation_freq!r})")
            else:
                span = f"the last {wait} epoch(s)"
            did = (f"{monitor} did not improve by more than min_delta={delta:g} in {span} "
                   f"(patience={patience}" + (f", baseline={baseline:g}" if isinstance(baseline, (int, float)) else "")
                   + ")")
            if isinstance(best, (int, float, np.generic)):
                at = f" at epoch {best_epoch + 1}" if isinstance(best_epoch, int) else ""
                did += f"; best {float(best):.6g}{at}"
            return f"{head}: {type(cb).__name__}(monitor={monitor!r}): epoch {stopped + 1}: early stopping: {did}"
    names = [type(cb).__name__ for cb in others if type(cb).__name__ not in _NEVER_STOP
             and not (isinstance(cb, keras.callbacks.EarlyStopping) and not getattr(cb, "stopped_epoch", 0))]
    which = f" ({', '.join(dict.fromkeys(names))})" if names else ""
    return f"{head}: by another callback{which} or the model's own code (a train_step)"


def _callbacks_after(callback: keras.callbacks.Callback, callback_list: Any) -> list[Any] | None:
    """The callbacks after ``callback`` in ``callback_list`` (None: no list was found)."""
    if callback_list is None:
        return None
    callbacks = list(callback_list.callbacks)
    mine = next(i for i, cb in enumerate(callbacks) if cb is callback)
    return callbacks[mine + 1:]


def _runs_user_code(callback: Any, hooks: tuple[str, ...]) -> bool:
    """Whether ``callback`` defines one of ``hooks`` with code of the user's: its class or an
    instance attribute (as ``LambdaCallback`` sets them) overrides ``keras.callbacks.Callback``'s,
    and it is not one of Keras's own callbacks, which only read the weights at batch hooks
    (ModelCheckpoint, ProgbarLogger, TensorBoard, ...; ``LambdaCallback`` runs the user's code)."""
    own = type(callback).__module__.startswith("keras.") and not isinstance(callback, keras.callbacks.LambdaCallback)
    if own:
        return False
    return any(defines_own(callback, hook, keras.callbacks.Callback) for hook in hooks)


def _enclosing_fit_list(callback: Any, frame: Any) -> Any:
    """The ``CallbackList`` of a Keras ``fit`` running above ``frame`` that holds ``callback`` (its
    ``callbacks`` local), or None."""
    for f in frames_above(frame, 40):
        if f.f_code.co_name == "fit" and str(f.f_globals.get("__name__", "")).startswith("keras"):
            held = f.f_locals.get("callbacks")
            if isinstance(held, keras.callbacks.CallbackList) and any(cb is callback for cb in held.callbacks):
                return held
    return None


def _fit_epoch(frame: Any) -> int | None:
    """The epoch of the Keras ``fit`` running above ``frame`` (its loop's ``epoch``), None where no such
    frame holds one (an ``evaluate`` outside a fit, a fit before its epoch loop)."""
    for f in frames_above(frame, 40):
        if f.f_code.co_name == "fit" and str(f.f_globals.get("__name__", "")).startswith("keras"):
            epoch = f.f_locals.get("epoch")
            return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None
    return None


def _fit_local(frame: Any, name: str, default: Any) -> Any:
    """The argument ``name`` of the ``fit`` that called this hook (found in the frames above
    ``frame``: Keras's ``fit`` calls ``CallbackList.on_train_begin``, which calls ours); ``default``
    where no ``fit`` frame holds it (a hand-driven callback)."""
    for f in frames_above(frame, 6):
        if f.f_code.co_name == "fit" and name in f.f_locals:
            return f.f_locals[name]
    return default


def _eval_steps_written_before(run: Any, worker: int, global_step: int) -> int | None:
    """One past the last eval step of ``worker`` in ``run`` written before ``global_step`` (where a
    fit resumed at an epoch goes back over the run, :meth:`tripwire.Session._global_step_at`): every
    eval step of the epochs before it, the validations' and those of an ``evaluate`` inside the fit
    (trial 43f: counted from the validations' summaries alone, a resume wrote over the nested
    evaluates' steps); 0 where none was. None where the records hold no global steps."""
    steps = run.wall_times("eval", worker)[0]
    at = run.global_steps("eval", worker)
    if len(at) != len(steps) or (len(at) and int(at.min()) < 0):
        return None
    before = steps[at < global_step]
    return int(before.max()) + 1 if len(before) else 0


def _eval_steps_before(run: Any, worker: int, validated: int | None) -> int:
    """The eval steps that the first ``validated`` validations of ``worker``'s training in ``run``
    used: one past the summary step of the ``validated``-th (the steps holding ``val_*`` values,
    one a validation), else (not that many summaries, or ``validated`` unknown) one past the last
    eval step held; 0 where none is."""
    if validated == 0:
        return 0
    summaries = sorted({int(s) for name in run.tensor_names() if str(name).startswith("val_")
                        if "eval" in run.tensor(name).modes(worker)
                        for s in run.tensor(name).steps(mode="eval", worker=worker)})
    if validated is not None and len(summaries) >= validated:
        return summaries[validated - 1] + 1
    steps = run.steps("eval", worker=worker)
    return int(max(steps)) + 1 if len(steps) else 0


def _hook_steps(batches: int, steps_per_execution: Any) -> int:
    """The batch hooks (this callback's steps) of a pass over ``batches`` batches: one per
    ``steps_per_execution`` batches (``compile(steps_per_execution=N)``)."""
    per = steps_per_execution if isinstance(steps_per_execution, int) and steps_per_execution > 1 else 1
    return -(-batches // per)


def _validation_epochs(epochs: int, validation_freq: Any) -> list[int] | None:
    """The epochs, counted from 1, among ``1..epochs`` that ran a validation under
    ``fit(validation_freq=)``, as Keras decides it (an int N: every N-th epoch; a list: the epochs it
    names); None for a ``validation_freq`` of another kind."""
    if isinstance(validation_freq, int) and not isinstance(validation_freq, bool) and validation_freq > 0:
        return [e for e in range(1, epochs + 1) if e % validation_freq == 0]
    if isinstance(validation_freq, (list, tuple, set)):
        return [e for e in range(1, epochs + 1) if e in validation_freq]
    return None


def _validated_epochs(epoch: int, validation_freq: Any) -> int | None:
    """How many of the epochs ``0..epoch-1`` ran a validation under ``fit(validation_freq=)``, as
    Keras decides it (an int N: every N-th epoch, counted from 1; a list: the epochs it names,
    counted from 1); None for anything else (:func:`_validation_epochs`)."""
    validated = _validation_epochs(epoch, validation_freq)
    return None if validated is None else len(validated)


#: Cross-entropy losses (Keras's function names) and the output activation each expects where
#: ``from_logits=False``: the loss reads the outputs as probabilities.
_CROSSENTROPY = {"categorical_crossentropy": "softmax", "sparse_categorical_crossentropy": "softmax",
                 "categorical_focal_crossentropy": "softmax", "binary_crossentropy": "sigmoid",
                 "binary_focal_crossentropy": "sigmoid"}
#: Output activations whose outputs are logits (unnormalised scores) and those that are probabilities.
_LOGIT_ACTIVATIONS = ("linear", "log_softmax")
_PROBABILITY_ACTIVATIONS = ("softmax", "sigmoid")


def _crossentropy_of(loss: Any) -> tuple[str, bool] | None:
    """``(name, from_logits)`` of a compiled cross-entropy loss (a name such as
    ``"sparse_categorical_crossentropy"`` or ``"SparseCategoricalCrossentropy"``, a loss object, or
    Keras's loss function), or None for any other loss (several outputs' losses included)."""
    if isinstance(loss, str):
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", loss).lower() if loss[:1].isupper() else loss
        return (name, False) if name in _CROSSENTROPY else None
    config = None
    get_config = getattr(loss, "get_config", None)
    if callable(get_config):
        try:
            config = get_config()
        except Exception:  # noqa: BLE001 - a user's loss class: no cross-entropy of Keras's
            return None
    if isinstance(config, dict):
        name = config.get("name")
        if name in _CROSSENTROPY and isinstance(config.get("from_logits"), bool):
            return name, config["from_logits"]
        return None
    name = getattr(loss, "__name__", None)
    if name in _CROSSENTROPY and getattr(loss, "__module__", "").startswith("keras"):
        return name, False  # (Keras's function: from_logits defaults to False)
    return None


#: Layers that are the identity at inference (they add noise or a penalty in training only): the
#: layer whose activation makes a model's output is looked for behind them (trial 27e: logits
#: followed by a ``Dropout`` were not judged).
_IDENTITY_AT_INFERENCE: tuple[type, ...] = tuple(
    cls for cls in (getattr(keras.layers, n, None) for n in (
        "Dropout", "GaussianNoise", "GaussianDropout", "AlphaDropout", "ActivityRegularization", "Identity"))
    if isinstance(cls, type))


def _identity_at_inference(layer: Any) -> bool:
    """A layer of :data:`_IDENTITY_AT_INFERENCE`, or an ``Activation("linear")``: the identity too,
    the cast to float32 Keras's mixed-precision guide puts last (trial 42b: a softmax ``Dense``
    followed by ``Activation("linear", dtype="float32")`` was judged a layer of logits)."""
    return isinstance(layer, _IDENTITY_AT_INFERENCE) or (
        isinstance(layer, keras.layers.Activation) and _output_activation(layer) == "linear")


def _output_source(model: Any, prefix: str = "") -> tuple[Any, tuple[str, ...], tuple[str, ...]]:
    """``(layer, through, within)``: the layer that makes a single-output Sequential or functional
    model's output, looked for behind the layers that are the identity at inference
    (:data:`_IDENTITY_AT_INFERENCE`: a ``Dropout`` after the logits), whose names ``through`` lists
    in model order, and through a nested Sequential or functional model that makes the output (a
    Sequential head, a ``keras.applications`` model with its classifier: trial 32c F4), whose
    names, outermost first, ``within`` lists; a layer passed inside a nested model is named by its
    place in the model (``head/drop``, as its tensors are: :func:`_layer_tree`). ``(None, (), ())``
    for several outputs, a subclassed model (nested too), or where Keras's graph does not say."""
    layer, through = _own_output_source(model)
    through = tuple(f"{prefix}{name}" for name in through)
    if isinstance(layer, keras.Model) and layer is not model:
        inner, inner_through, within = _output_source(layer, f"{prefix}{layer.name}/")
        if inner is None:
            return None, (), ()
        return inner, inner_through + through, (str(layer.name),) + within
    return (layer, through, ()) if layer is not None else (None, (), ())


def _own_output_source(model: Any) -> tuple[Any, tuple[str, ...]]:
    """``(layer, through)`` of :func:`_output_source` in ``model``'s own layers or graph (a nested
    model that makes the output is returned as the layer)."""
    through: list[str] = []
    if isinstance(model, keras.Sequential):
        layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
        while layers and _identity_at_inference(layers[-1]):
            through.append(str(layers.pop().name))
        return (layers[-1], tuple(reversed(through))) if layers else (None, ())
    try:
        outputs = model.outputs
    except (AttributeError, ValueError):
        return None, ()
    if not isinstance(outputs, (list, tuple)) or len(outputs) != 1:
        return None, ()
    history = getattr(outputs[0], "_keras_history", None)  # (Keras's graph: operation, node, tensor index)
    while history is not None:
        operation = getattr(history, "operation", None)
        if not _identity_at_inference(operation):
            return operation, tuple(reversed(through))
        through.append(str(operation.name))
        nodes = getattr(operation, "_inbound_nodes", None) or []
        index = getattr(history, "node_index", None)
        node = nodes[index] if isinstance(index, int) and 0 <= index < len(nodes) else None
        taken = keras.tree.flatten(getattr(node, "input_tensors", None) or ()) if node is not None else []
        if len(taken) != 1:
            return None, ()
        history = getattr(taken[0], "_keras_history", None)
    return None, ()


def _output_layer(model: Any) -> Any:
    """The layer that makes a single-output Sequential or functional model's output, behind the
    layers that are the identity at inference and inside a nested model that makes it
    (:func:`_output_source`); None where it is not known."""
    return _output_source(model)[0]


def _output_activation(layer: Any) -> str | None:
    """``"softmax"``, ``"sigmoid"``, ``"linear"``, ``"log_softmax"`` ... for a layer whose
    activation is known (``Dense(..., activation=...)``, ``Activation``, ``Softmax``), else None."""
    if isinstance(layer, keras.layers.Softmax):
        return "softmax"
    activation = getattr(layer, "activation", None)
    name = getattr(activation, "__name__", None)
    return name if isinstance(name, str) else None


def _logits_mismatch(loss: Any, layer: Any, through: Sequence[str] = (), within: Sequence[str] = ()) -> str | None:
    """The WARNING (and the ``loss_output_mismatch`` finding's message) for a cross-entropy loss
    whose ``from_logits`` does not fit the layer that makes the model's output, or None.
    ``from_logits=False`` (Keras's default) on a layer without activation reads logits as
    probabilities: the loss clips them to ``[eps, 1 - eps]`` and the model can learn the opposite of
    the task (trial 18g: validation accuracy 0.005 against chance 0.25, no rule fired);
    ``from_logits=True`` on a softmax or sigmoid layer applies it twice (the gradients flatten).
    ``through``: the layers after it that are the identity at inference (:func:`_output_source`),
    named in the message; ``within``: the nested models that hold it, outermost first (the
    message names the layer by its place in the model, ``head/probs``, and the nested model)."""
    spec = _crossentropy_of(loss)
    activation = _output_activation(layer) if layer is not None else None
    if spec is None or activation is None:
        return None
    name, from_logits = spec
    expects = _CROSSENTROPY[name]
    shown = "/".join([*within, str(getattr(layer, "name", "?"))])
    inside = f" (inside the nested model {within[-1]!r})" if within else ""
    if through:
        where = (f"the layer {shown!r}{inside} that makes the model's output (through "
                 f"{', '.join(map(repr, through))}: the identity at inference)")
    else:
        where = f"the model's output layer {shown!r}{inside}"
    if not from_logits and activation in _LOGIT_ACTIVATIONS:
        how = "has no activation" if activation == "linear" else f"applies {activation}"
        cls = "".join(part.title() for part in name.split("_"))
        return (f"tripwire: the loss {name!r} has from_logits=False (Keras's default), so it reads the model's "
                f"outputs as probabilities, but {where} {how}: its outputs are logits, which the loss clips to "
                f"[1e-7, 1 - 1e-7]; training then learns little or the opposite of the task. Compile with "
                f"loss=keras.losses.{cls}(from_logits=True), or give the layer activation={expects!r}")
    if from_logits and activation in _PROBABILITY_ACTIVATIONS:
        return (f"tripwire: the loss {name!r} has from_logits=True, but {where} applies {activation}: its outputs "
                f"are probabilities, which the loss passes through {expects} again (the gradients shrink and "
                f"training slows). Remove the layer's activation, or compile with from_logits=False")
    return None


def _jax_optimizer_value(model: Any, variable: Any) -> float | None:
    """The current value of the optimizer variable ``variable`` (one of ``model.optimizer.variables``)
    as a host float, on jax, read as a batch begins: during an epoch jax's trainer keeps the
    optimizer's state in ``model._jax_state["optimizer_variables"]`` (the state the next step
    starts from) and has purged the variables themselves (a purged variable's ``value`` is its
    initializer's, not the state: a LossScaleOptimizer's would read 32768 at every step), unless
    a callback synced them (``jax_state_sync``: ``model._jax_state_synced``), as before an epoch's
    first step, where the variable holds it. None where neither can be read (a trainer of another
    layout)."""
    state = getattr(model, "_jax_state", None)
    values = state.get("optimizer_variables") if isinstance(state, dict) else None
    optimizer = getattr(model, "optimizer", None)
    variables = list(getattr(optimizer, "variables", None) or [])
    try:
        if values is not None and not getattr(model, "_jax_state_synced", True):
            at = next((i for i, v in enumerate(variables) if v is variable), None)
            if at is None or len(values) != len(variables):
                return None
            return float(np.asarray(values[at]))
        if getattr(variable, "_value", True) is None:  # purged, and no state to read it from
            return None
        return _native.to_float(variable)
    except Exception:  # noqa: BLE001 - (a state of another layout, a value that is not a scalar): None, said by the caller
        return None


def _model_optimizers(model: Any) -> list[tuple[str, Any]]:
    """``(label, optimizer)`` of each optimizer ``model`` holds: ``model.optimizer`` (label
    ``optimizer``; any object) first, then the Keras optimizers held in its own attributes, in the
    order they were set (a GAN's ``self.d_optimizer``: ``d_optimizer``; one in a list, tuple or dict
    attribute: ``<attr>[<index or key>]``). Each once, by the optimizer that applies the gradients
    (:func:`_innermost`: a ``LossScaleOptimizer`` and the optimizer inside it are one; the first
    found names it). Trial 31a F1: Keras's GAN example compiles with ``super().compile()`` (an idle
    RMSprop as ``model.optimizer``) and steps ``self.d_optimizer`` and ``self.g_optimizer``."""
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def add(label: str, value: Any) -> None:
        inner = id(_innermost(value))
        if inner not in seen:
            seen.add(inner)
            found.append((label, value))

    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:  # (whatever its class: the one Keras's own train_step steps)
        add("optimizer", optimizer)
    optimizer_types = keras.optimizers.Optimizer
    for attr, value in list(getattr(model, "__dict__", {}).items()):
        if isinstance(value, optimizer_types):
            add(attr, value)
            continue
        held = (enumerate(value) if isinstance(value, (list, tuple))
                else list(value.items()) if isinstance(value, Mapping) else ())
        for key, item in held:
            if isinstance(item, optimizer_types):
                add(f"{attr}[{key}]", item)
    return found


def _loss_scale_of(optimizer: Any) -> Any:
    """The loss scale ``optimizer`` divides the gradients it applies by, expecting a loss its
    ``scale_loss`` multiplied by it: a ``LossScaleOptimizer``'s ``dynamic_scale`` (before it is built,
    its ``initial_scale``), else a ``loss_scale_factor``; None for an optimizer that scales nothing."""
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        scale = getattr(optimizer, "dynamic_scale", None)
        return scale if scale is not None else getattr(optimizer, "initial_scale", None)
    return getattr(optimizer, "loss_scale_factor", None)


def _innermost(optimizer: Any) -> Any:
    """The optimizer that applies unscaled gradients (inside a ``LossScaleOptimizer``)."""
    while optimizer is not None and getattr(optimizer, "inner_optimizer", None) is not None:
        optimizer = optimizer.inner_optimizer
    return optimizer


def _var_name(v: Any) -> str:
    return str(getattr(v, "path", None) or v.name)


def _input_names(model: Any) -> dict[int, tuple[str, ...]]:
    """``id(tensor)`` of each symbolic input of a Sequential or functional model: the names it may
    have in a batch (as :func:`_named_leaves` names the batch's inputs: its place in
    ``model.input``, and ``inputs/<Input name>`` for a batch given as a dict); empty where the
    model's graph does not say (a subclassed model)."""
    try:
        structure = model.input  # (a functional model's: the structure its batches' inputs have)
    except (AttributeError, ValueError):  # (a Sequential has its one input in .inputs; a subclassed model none)
        flat = getattr(model, "inputs", None) if isinstance(model, keras.Sequential) else None
        structure = flat[0] if isinstance(flat, list) and len(flat) == 1 else None
    names: dict[int, tuple[str, ...]] = {}
    for name, t in (_named_leaves("inputs", structure) if structure is not None else []):
        # (a model built on a list of named Inputs may be fed a dict keyed by those names)
        by_key = f"inputs/{t.name}" if isinstance(getattr(t, "name", None), str) else None
        names[id(t)] = (name,) + ((by_key,) if by_key and by_key != name else ())
    return names


def _taken(layer: Any) -> list[Any]:
    """The symbolic tensors ``layer`` was called on, in every graph it is part of."""
    return [t for node in getattr(layer, "_inbound_nodes", None) or ()
            for t in keras.tree.flatten(getattr(node, "input_tensors", None) or ())]


def _normalizer_inputs(model: Any, layers: list[Any]) -> dict[int, tuple[str, ...] | None]:
    """``id(layer)`` of each of ``layers`` that is one of :data:`_NORMALIZERS`: the names the model
    input it takes directly may have in a batch (:func:`_input_names`), found in the model's graph
    (``model.input`` and the layer's inbound nodes); None where it is not found."""
    normalizers = [layer for layer in layers if isinstance(layer, _NORMALIZERS)]
    if not normalizers:
        return {}
    names = _input_names(model)
    out: dict[int, tuple[str, ...] | None] = {}
    for layer in normalizers:
        taken = [names.get(id(t)) for t in _taken(layer)]
        out[id(layer)] = taken[0] if len(taken) == 1 and taken[0] is not None else None
    return out


#: Layers whose input is indices, not features: token ids (``Embedding``), category indices
#: (``IntegerLookup``, ``CategoryEncoding``). A model input that only such layers take is not
#: captured as an input (see :func:`_index_inputs`).
_INDEX_LAYERS: tuple[type, ...] = tuple(
    cls for cls in (getattr(keras.layers, n, None) for n in ("Embedding", "IntegerLookup", "CategoryEncoding"))
    if isinstance(cls, type))


def _index_inputs(model: Any) -> tuple[frozenset[str], tuple[str, ...]]:
    """``(names, layers)``: the batch names (:func:`_input_names`) of the inputs of a Sequential or
    functional model that go straight into index layers only (:data:`_INDEX_LAYERS`: token ids
    into an ``Embedding``), read in the model's graph (the inbound nodes of its own layers: an input
    that a nested model or any other layer takes too is a feature), and those layers' class names.
    Empty where the graph does not say (a subclassed model). ``input_not_normalized`` would judge
    such ids as unscaled features (trial 27e: "input 'inputs' has mean 253.8 ... scale images to
    [0, 1]" on an Embedding model, 3 seeds of 3)."""
    names = _input_names(model)
    if not names:
        return frozenset(), ()
    takers: dict[int, list[Any]] = {}
    for layer in getattr(model, "layers", None) or ():
        for t in _taken(layer):
            if id(t) in names:
                takers.setdefault(id(t), []).append(layer)
    found: set[str] = set()
    kinds: list[str] = []
    for key, layers in takers.items():
        if layers and all(isinstance(layer, _INDEX_LAYERS) for layer in layers):
            found.update(names[key])
            kinds += [type(layer).__name__ for layer in layers if type(layer).__name__ not in kinds]
    return frozenset(found), tuple(kinds)


def _named_leaves(base: str, value: Any) -> list[tuple[str, Any]]:
    """``(name, tensor)`` for each tensor of ``value``: ``base`` itself for one tensor (or a
    one-element list), ``base/<key>`` in a dict, ``base/<i>`` in a list or tuple, nested alike."""
    if isinstance(value, Mapping):
        return [leaf for key, item in value.items() for leaf in _named_leaves(f"{base}/{key}", item)]
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return _named_leaves(base, value[0])
        return [leaf for i, item in enumerate(value) for leaf in _named_leaves(f"{base}/{i}", item)]
    return [(base, value)]


def _weight_kind(v: Any) -> str:
    return "biases" if "bias" in str(v.name).rsplit("/", 1)[-1] else "weights"


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or where ``taken`` holds it already ``name_1``, ``name_2`` ... (the first not taken);
    added to ``taken``."""
    unique, n = name, 0
    while unique in taken:
        n += 1
        unique = f"{name}_{n}"
    taken.add(unique)
    return unique


def _layer_tree(model: Any) -> list[tuple[Any, str]]:
    """``(layer, name)`` for each layer in ``model``'s layer tree (not the model), in model order
    (Keras's ``_flatten_layers``, depth first), each once: its name is its place in the tree, as
    ``model.summary()`` shows it: the names of the nested models and layers that hold it and its
    own, joined by ``/`` (``features/relu1``, ``backbone/enc_fc1``, ``block1/ffn/ff1``,
    ``lstm/lstm_cell``), without the model's own name. A layer held in two places (a shared layer,
    a nested model called twice) is named where the walk meets it first. A name that an earlier
    layer holds already (two sub-layers of one layer with the same name) gets ``_1``, ``_2`` ... (the
    first free) on that layer's name, and everything below it is named under the suffixed name
    (``block/proj_1/kernel``, ``block/proj_1/output``).

    Keras's own ``layer.path`` and variable paths are the name scopes a layer was built in: a layer
    of a model built on its own and then nested lacks the outer model's name there, and so does a
    layer that builds without a name scope (``ReLU``), so those are not the names (trial 32c F2, F3:
    ``relu1/output`` beside ``features/conv1/output``; ``hidden/kernel_1`` beside ``hidden_1/output``)."""
    out: list[tuple[Any, str]] = []
    seen: set[int] = {id(model)}
    taken: set[str] = set()

    def visit(layer: Any, prefix: str) -> None:
        for child in _children(layer):
            if id(child) in seen:
                continue
            seen.add(id(child))
            if isinstance(child, keras.layers.InputLayer):  # (holds no tensor: takes no name from another)
                out.append((child, f"{prefix}{child.name}"))
                continue
            name = _unique(f"{prefix}{child.name}", taken)
            out.append((child, name))
            visit(child, f"{name}/")

    visit(model, "")
    return out


def _own_variables(layer: Any) -> list[Any]:
    """The variables ``layer`` holds itself, not through a sub-layer (Keras's own lists; else its
    weights less its sub-layers')."""
    own = getattr(layer, "_trainable_variables", None)
    rest = getattr(layer, "_non_trainable_variables", None)
    if isinstance(own, list) and isinstance(rest, list):
        return own + rest
    inner = {id(v) for child in _children(layer) for v in getattr(child, "weights", None) or ()}
    return [v for v in getattr(layer, "weights", None) or () if id(v) not in inner]


def _relative_path(v: Any, layer: Any) -> str:
    """``v``'s path below the layer that holds it: Keras's variable path less the layer's path
    (``kernel``; a variable made in a name scope of the layer's own keeps that scope), else what
    follows the layer's name in it, else the variable's name."""
    path = _var_name(v)
    layer_path = getattr(layer, "path", None)
    if isinstance(layer_path, str) and layer_path and path.startswith(f"{layer_path}/"):
        return path[len(layer_path) + 1:]
    parts = path.split("/")
    name = str(getattr(layer, "name", ""))
    if name in parts[:-1]:
        return "/".join(parts[len(parts) - 1 - parts[:-1][::-1].index(name):])
    return parts[-1]


def _variable_names(model: Any, tree: Sequence[tuple[Any, str]]) -> dict[int, str]:
    """``id(v)`` -> the name of each of ``model.weights``: ``<layer>/<variable>``, the layer named as
    in ``tree`` (:func:`_layer_tree`) and the variable by :func:`_relative_path`
    (``features/conv1/kernel``, ``tower_b/hidden/kernel``, ``block1/ffn/ff1/kernel``); a variable
    of the model itself (a subclassed model's ``add_weight``) by its path less the model's name. A variable
    two layers hold as their own (tied weights) is named by the first in model order. Two variables
    whose names are still the same (two of one layer's variables given one name) get ``_1``, ``_2``
    ... in ``model.weights`` order. In a model without nested models these are Keras's variable
    paths less the model's name, as before trial 32c."""
    owner: dict[int, str] = {}
    for layer, name in tree:
        for v in _own_variables(layer):
            owner.setdefault(id(v), f"{name}/{_relative_path(v, layer)}")
    prefix = f"{getattr(model, 'name', '')}/"
    taken: set[str] = set()
    names: dict[int, str] = {}
    for v in model.weights:
        if id(v) in names:
            continue
        name = owner.get(id(v))
        if name is None:  # (the model's own, or one no layer of the tree holds: its path less the model's name)
            name = _var_name(v)
            name = name[len(prefix):] if prefix != "/" and name.startswith(prefix) else name
        names[id(v)] = _unique(name, taken)
    return names


def _logged_loss(logs: Mapping[str, Any] | None) -> Any:
    """The batch's ``loss`` log, kept for the next save step (every_step losses, the default): a
    Python float when Keras gave a number, else the backend's tensor as it is; None without one."""
    if not logs or "loss" not in logs:
        return None
    value = logs["loss"]
    return float(value) if isinstance(value, (int, float, np.generic)) else value


#: How the messages name each kind a step may hand over as symbolic values (see _traced_message).
_KIND_WORDS = {"inputs": "inputs", "labels": "labels", "predictions": "predictions",
               "activations": "layer outputs (activations)", "activation_inputs": "activation inputs (activation_inputs)",
               "relu_outputs": "ReLU outputs (relu_outputs)"}


def _traced_cause(model: Any, mode: str) -> str:
    """Why a wrapper was handed symbolic values at a ``mode`` step: ``jax-jit`` (a compiled jax
    step), ``jax-grad`` (Keras's jax train step differentiates the forward pass: tracers whatever
    ``compile()`` says), ``tensorflow`` (a ``tf.function``), else ``traced``."""
    backend = _native.backend_name()
    if backend == "jax":
        return "jax-jit" if _native.step_compiled(model) else "jax-grad"
    return "tensorflow" if backend == "tensorflow" else "traced"


def _traced_message(cause: str, kinds: list[str], backend: str) -> tuple[str, str]:
    """The WARNING for ``kinds`` not captured for ``cause`` (:func:`_traced_cause`), and the short
    reason given where a rule reading them had nothing to read. Each says what does not help and
    what does, per backend and mode (trial 26e: "compile with run_eagerly=True" was advised on jax
    with it set, where it cannot help, and inputs and labels were said not captured where they were)."""
    order = list(_KIND_WORDS)
    words = [_KIND_WORDS.get(k, k) for k in sorted(kinds, key=lambda k: order.index(k) if k in order else len(order))]
    what = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
    if cause == "jax-jit":
        helps = ("compile the model with jit_compile=False to capture inputs and labels at every step, and "
                 "predictions and layer outputs at eval and test steps (at train steps Keras's jax train step "
                 "computes those inside jax.value_and_grad: tracers, whatever compile() says)")
        return (f"tripwire: {what} are not captured in a compiled jax step (jit_compile=True, Keras's default on jax: "
                f"the step runs as one XLA program, whose values tripwire's wrappers see only as tracers, once); "
                f"{helps} (docs/keras.md, \"Backends\")",
                "a compiled jax step (jit_compile=True, Keras's default on jax) hands tripwire only tracers: compile "
                "with jit_compile=False (layer outputs and predictions are then captured at eval and test steps; at "
                "train steps never on jax, so a rule that reads them at train steps needs modes: [eval], e.g. "
                "{name: dead_relu, modes: [eval]}; an uncompiled jax step is several times slower: 10-16x in trial "
                "28h's small models)")
    if cause == "jax-grad":
        return (f"tripwire: {what} are not captured at train steps on the jax backend: Keras's jax train step runs "
                f"the forward pass inside jax.value_and_grad, so the layers' outputs and the predictions are tracers "
                f"there whatever compile() says (run_eagerly=True does not change it); eval and test steps capture "
                f"them where the step is not compiled (jit_compile=False), and inputs and labels are captured at "
                f"every step (docs/keras.md, \"Backends\")",
                "on the jax backend Keras's train step computes layer outputs and predictions inside "
                "jax.value_and_grad, as tracers (eval and test steps capture them, with jit_compile=False: a rule "
                "that reads them at train steps needs modes: [eval] there, e.g. {name: dead_relu, modes: [eval]})")
    if cause == "tensorflow":
        return (f"tripwire: {what} are not captured in a compiled tensorflow step (a tf.function, whose values are "
                f"symbolic); compile the model with run_eagerly=True to capture them (docs/keras.md, \"Backends\")",
                "a compiled tensorflow step hands tripwire symbolic tensors: compile with run_eagerly=True")
    return (f"tripwire: {what} are not captured: the {backend} step hands tripwire's wrappers symbolic values "
            f"(docs/keras.md, \"Backends\")", f"the {backend} step hands tripwire symbolic values")


def _same_mean(mean: float, logged: float) -> bool:
    """Is ``logged`` (Keras's float32 ``loss`` log) the tracker's ``total / count`` (``mean``, in
    float64)? Equal to float32 rounding (a relative 1e-6 leaves room for it), or both NaN."""
    if np.isnan(mean) or np.isnan(logged):
        return bool(np.isnan(mean) and np.isnan(logged))
    if np.isinf(mean) or np.isinf(logged):
        return mean == logged
    return abs(mean - logged) <= 1e-6 * max(abs(mean), abs(logged)) + 1e-30


def _activation_of(layer: Any) -> str | None:
    """``relu``, ``tanh`` or ``sigmoid`` when the layer applies one (fused or standalone)."""
    if isinstance(layer, keras.layers.ReLU):
        return "relu"
    fn = getattr(layer, "activation", None)
    name = getattr(fn, "__name__", None)
    return name if name in _ACTIVATIONS else None


def _children(layer: Any) -> list[Any]:
    """A layer's direct sub-layers (Keras's ``_flatten_layers``, else ``layers``)."""
    flatten = getattr(layer, "_flatten_layers", None)
    if callable(flatten):
        return list(flatten(include_self=False, recursive=False))
    return list(getattr(layer, "layers", None) or [])


def _capture_layers(model: Any) -> list[tuple[Any, bool, bool]]:
    """``(layer, output, activation)`` in model order, each layer once: whether its ``call`` output
    is captured (``<layer>/output``) and whether its ``activation`` is wrapped.

    Leaf layers (no sub-layers) give both. A recurrent layer (``keras.layers.RNN`` and its
    subclasses LSTM, GRU, SimpleRNN, ConvLSTM; ``Bidirectional``) gives its output at the outermost
    recurrent layer, since Keras's fused LSTM/GRU paths (the torch backend's, cuDNN) never call the
    cell's ``call``; its cells give only their activation, which those paths call too."""
    out: list[tuple[Any, bool, bool]] = []
    seen: set[int] = set()

    def visit(layer: Any, in_recurrent: bool) -> None:
        for child in _children(layer):
            if id(child) in seen:
                continue
            seen.add(id(child))
            recurrent = isinstance(child, (keras.layers.RNN, keras.layers.Bidirectional))
            grand = _children(child)
            if recurrent and not in_recurrent:
                out.append((child, True, False))
            if grand:
                visit(child, in_recurrent or recurrent)
            elif not recurrent:
                out.append((child, not in_recurrent, True))

    visit(model, False)
    return out


__all__ = ["TripwireCallback"]


def _validation_skipped(name: str, logs: Mapping[str, Any]) -> bool:
    """A ``val_`` metric missing from epoch logs that hold no ``val_`` value at all, while they hold
    training ones: an epoch that ``fit(validation_freq=N)`` did not validate (or a fit with no
    validation, told apart at the fit's end: no epoch had one)."""
    return name.startswith("val_") and bool(logs) and not any(str(k).startswith("val_") for k in logs)


def _metric_hint(name: str, logs: Mapping[str, Any]) -> str:
    """A likely meant name among ``logs``; for a ``val_`` name when the logs hold none, why."""
    keys = [str(k) for k in logs]
    if name.startswith("val_"):
        held_out = [k for k in keys if k.startswith("val_")]
        if not held_out:
            return " (no validation metric: give fit validation_data= or validation_split=)"
        return did_you_mean(name, held_out)
    return did_you_mean(name, keys)
