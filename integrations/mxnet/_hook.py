"""``TripwireHook``: tripwire for hand-written Gluon training loops.

One step, in the order MXNet runs it::

    hook.begin_step("train")                 # due collections; forward hooks on only if needed
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    hook.end_step(loss=loss)                 # gradients (before trainer.step), rules, decision
    if hook.should_stop:
        break
    trainer.step(batch_size)

Gradients are stored as the gradient of the stored loss, the mean of ``loss``'s elements: Gluon's
``backward`` of a per-sample loss array sums over its elements, so ``param.grad()`` is divided by
their number (``end_step(batch_size=N)``: by N, what ``trainer.step(N)`` divides by). That is the
gradient ``trainer.step(batch_size)`` applies, and the one PyTorch, Keras and Lightning store for a
mean loss (trial 27h: the batch sum was stored, and the gradient rules judged MXNet runs
batch-size times harsher). Weights are those of the step's forward pass, from before its update.

Tuning: ``TripwireHook(trial=trial, trial_metric="val_loss")`` reports ``metrics[trial_metric]`` of
each epoch's evaluation summary (``hook.begin_step("eval", summary=True)`` ...
``hook.end_step(metrics={"val_loss": ...})``) to the trial, with ``step`` = the epochs summarized so
far (1, 2, ...), and sets ``should_stop`` when the scheduler stops the trial.

Parameters are named by their place in the block tree (``0.weight``, ``fc1.bias``: the names
``save_parameters`` writes; a parameter shared by several blocks once, under its first name: trial 32g
F4), layer outputs ``<layer>/output`` (a layer returning several arrays, nested lists and tuples
flattened in order: ``<layer>/output_0``, ``output_1`` ...; a layer run on several devices in a step,
``split_and_load``'s shards, has its shards flattened and joined, as the inputs are: trial 32g F2),
activation inputs ``<layer>/input``; the batch ``end_step(inputs=x)`` gives is ``inputs``; update ratios
``update_ratio/<param>`` and, with ``register_trainer(trainer)``, the learning rate ``lr/0``
(collection ``optimizer``).

Trial 28c: ``register_trainer(trainer)`` also names, at the first train step, the parameters with a
gradient that the Trainer leaves out (they never learn); a loss block given to ``register_loss`` is
checked against the net's outputs at the first train step (``loss_output_mismatch``: a softmax before
``SoftmaxCrossEntropyLoss``); ``close()`` names a step begun and never ended.
"""

from __future__ import annotations

import copy
import logging
import math
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..._config import Config, check_overrides
from ..._errors import ConfigError, TrainingStopped
from ..._finding import Decision, Finding
from ..._history import History
from ..._session import Session, StepPlan, _failing
from ..._validate import check_trial, did_you_mean, keyword_parameters
from ...tune._trial import note_rule_stop, note_tuner_stop, reached_max_resource, trial_facts
from .._provides import PROVIDES as _PROVIDES
from ._backend import MXNetBackend, mx

nd = mx.nd
gluon = mx.gluon

_ACTIVATION_KINDS = ("activations", "activation_inputs", "relu_outputs")
# Gluon layers whose input is an activation input (pre-activation values)
_ACTIVATION_LAYERS: tuple[type, ...] = tuple(
    getattr(gluon.nn, n) for n in ("Activation", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish", "SiLU")
    if hasattr(gluon.nn, n)
)
_BIAS_SUFFIXES = ("bias", "beta")


def _is_relu(block: Any) -> bool:
    return isinstance(block, gluon.nn.Activation) and getattr(block, "_act_type", None) == "relu"


def _param_kind(name: str) -> str:
    return "biases" if name.rsplit(".", 1)[-1].endswith(_BIAS_SUFFIXES) else "weights"


def _leaves(block: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """Blocks without children, with their dotted path (``0.act``, ``fc1``); a registered block that
    is a leaf itself (a bare ``rnn.LSTM``) with ``prefix``, its ``register_block`` name: ``""`` when it
    has none (trial 30d: it was left out, and its output never captured)."""
    children = getattr(block, "_children", {})
    if not children:
        yield prefix, block
        return
    for name, child in children.items():
        yield from _leaves(child, f"{prefix}.{name}" if prefix else str(name))


def _hybrid_paths(block: Any, prefix: str) -> list[str]:
    """The dotted paths of the outermost hybridized blocks in ``block`` (``block`` itself: ``prefix``)."""
    if getattr(block, "_active", False):
        return [prefix]
    return [p for name, child in getattr(block, "_children", {}).items()
            for p in _hybrid_paths(child, f"{prefix}.{name}" if prefix else str(name))]


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _layer_name(path: str, what: str) -> str:
    """The name of a layer's ``what`` (``output``, ``output_0``, ``input``): ``<path>/<what>``, or
    ``what`` alone for the registered block itself when it is an unnamed leaf (path ``""``)."""
    return f"{path}/{what}" if path else what


logger = logging.getLogger("tripwire")

PROVIDES = _PROVIDES["mxnet"]
"""The kinds this hook captures (a rule or collection needing none of them is refused)."""


class TripwireHook:
    """Capture, rules and stopping for a Gluon training loop.

    ``config``: a YAML path, a mapping, a :class:`tripwire.Config` or None; ``overrides``: keyword
    overrides (``out_dir=``, ``rules=``, ``save_interval=``, ``collections=`` ... see
    :meth:`tripwire.Config.with_overrides`). ``rank``/``world_size``: this worker of a distributed
    job (each worker writes its own shard; decisions are per worker).

    Per step: :meth:`begin_step` before the forward pass, :meth:`end_step` after ``backward`` and
    before ``trainer.step`` (or the :meth:`step` context manager). ``should_stop`` turns True when a
    rule with the ``stop_training`` action fires; with the ``raise`` action :meth:`end_step` raises
    :class:`tripwire.TrainingStopped` as well (``should_stop`` is True then too).

    ``trial``/``trial_metric``: a tuner trial (anything with ``report(step, value) -> bool``) and the
    name of a metric of each epoch's evaluation summary (``begin_step("eval", summary=True)``, then
    ``end_step(metrics={trial_metric: value, ...})``): the hook calls ``trial.report(step=epoch,
    value=metrics[trial_metric])`` there (``epoch``: the summaries so far, from 1) and sets
    ``should_stop`` (and ``trial_stopped``) when it returns True. A rule that stops the training
    tells the trial (``trial.rule_stopped``): the tuner never ranks a broken run.
    """

    should_stop: bool = False
    """True once a rule with the ``stop_training`` action fired, or one with the ``raise`` action
    raised :class:`tripwire.TrainingStopped` (or another rank's did, or ``tripwire watch`` asked),
    or the tuner stopped the trial: end your loop when it is."""

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        rank: int = 0,
        world_size: int = 1,
        trial: Any = None,
        trial_metric: str | None = None,
        **overrides: Any,
    ) -> None:
        # trial 20c: the hook takes trial= as the Keras, Lightning and XGBoost callbacks do (it was
        # refused as an unknown keyword, and a trial the scheduler stopped left a run 'complete')
        # (trial 24h; the Session's write= and keep_arrays= pass through to it)
        check_overrides(type(self).__name__, overrides, (*keyword_parameters(type(self)), "write", "keep_arrays"))
        check_trial(trial, trial_metric, example="a metric of each epoch's evaluation summary, "
                                                 "end_step(metrics={...}), e.g. 'val_loss'")
        self.trial = trial
        self.trial_metric = trial_metric
        self.trial_stopped = False
        """True once the tuner stopped the trial (``trial.report`` returned True)."""
        self._trial_epoch = 0  # the epochs told to the trial (evaluation summaries)
        self._backend = MXNetBackend()
        self.session = Session(
            config, framework="mxnet", rank=rank, world_size=world_size, backend=self._backend, provides=PROVIDES,
            **overrides
        )
        if trial is not None:
            self.session.set_meta(trial=trial_facts(trial, trial_metric))
        self.should_stop = False
        self._summary = False  # the step in progress is an evaluation summary (begin_step("eval", summary=True))
        self._roots: list[tuple[str, Any]] = []
        self._loss_blocks: list[Any] = []
        self._handles: list[Any] = []
        self._plan: StepPlan | None = None
        # the layer outputs of the step in progress: name -> ({context: its last call's array there}, kind)
        # (trial 32g F2: one device's shard only, where split_and_load spread the batch over several)
        self._captured: dict[str, tuple[dict[Any, Any], str]] = {}
        self._loss_outputs: list[Any] = []
        self._closed = False
        self._hybrid_said: tuple[str, ...] = ()  # the hybridized blocks last named (see _say_hybridized)
        self._activation_steps = 0  # steps that wanted layer outputs so far (see _say_hybridized)
        self._unregistered_said = False  # (see _say_unregistered)
        self._unscaled_said = False  # (see _grad_divisor)
        # trial 28c: the Trainers (register_trainer): the parameters they leave out (F1), the learning rate and
        # which parameters an update moves (F2)
        self._trainers: list[Any] = []
        # (how the WARNING names the Trainers that leave parameters out; the estimator's handler: its own)
        self._trainer_source = "no Trainer given to register_trainer"
        self._unheld_checked = False  # (see _say_unheld)
        # update ratios (F2): any collection may save the optimizer kind; the weights copied at the end of the
        # train step before a save step that wants them (see _snapshot_weights)
        # (session 30: only where the config's own collections or a rule that needs it ask for the optimizer
        # kind: the default set's loss_scale_collapse reads it optionally, and MXNet has no loss scale to offer,
        # so a default run copies no parameter for update ratios and records no lr, as before that rule)
        self._ratios_possible = self.session.optimizer_in_full
        self._snapshot: _Snapshot | None = None
        # the last train step ended and the one the weights were copied for (see _snapshot_weights)
        self._last_train_step: int | None = None
        self._expected_step: int | None = None
        self._uneven_said = False
        self._no_update_said = False
        self._lr_unread_said = False
        self._counts_at_begin: tuple[int, ...] | None = None  # (see _say_inner_update)
        self._fresh_known = False  # (the step ran no trainer.step: MXNet's fresh-gradient state tells stale ones)
        self._inner_update_said = False
        self._inputs_said = False  # (see _say_no_inputs; F3)
        # the loss/output check (F5): done once; the first prediction a registered loss block got
        self._output_checked = False
        self._output_probe: tuple[Any, Any] | None = None

    # ------------------------------------------------------------------------------ registration
    def register_block(self, block: Any, name: str | None = None) -> None:
        """Capture ``block``'s parameters, gradients and (on save steps) its layers' outputs.

        ``name`` prefixes every tensor of this block (needed when several blocks are registered).
        Layer outputs come from forward hooks, which Gluon runs only for blocks that are not
        hybridized (a hybridized block runs its children inside one cached graph).
        """
        if not isinstance(block, gluon.Block):
            raise ConfigError(f"register_block: got {type(block).__name__}; accepted: a mxnet.gluon.Block")
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigError(f"register_block.name: got {name!r}; accepted: None or a non-empty string")
        prefix = name or ""
        for other_prefix, other in self._roots:
            if other is block:
                raise ConfigError(f"register_block: this block is already registered (name {other_prefix!r})")
            if other_prefix == prefix:
                raise ConfigError(
                    f"register_block.name: {prefix!r} is already used by another block; pass a distinct name= "
                    "to each block so their tensor names do not collide"
                )
        self._roots.append((prefix, block))

    def register_loss(self, loss_fn: Any) -> None:
        """Capture the value of ``loss_fn`` (a ``gluon.loss.Loss`` or any Block returning per-sample
        losses) as ``loss`` at every train step (kept between save steps, as every-step losses are):
        the mean over all of its calls in the step."""
        if not isinstance(loss_fn, gluon.Block):
            raise ConfigError(
                f"register_loss: got {type(loss_fn).__name__}; accepted: a mxnet.gluon.loss.Loss (or a Block); "
                "or pass the loss to end_step(loss=...)"
            )
        if any(b is loss_fn for b in self._loss_blocks):
            raise ConfigError("register_loss: this loss block is already registered")
        self._loss_blocks.append(loss_fn)

    def register_trainer(self, trainer: Any) -> None:
        """Tell the hook the ``gluon.Trainer`` that updates the registered blocks (call it once per
        Trainer, when several update parts of one model after the same backward, each ``trainer.step``
        after ``end_step``; a GAN's players, which step one after the other, take a hook each:
        docs/mxnet.md). With it the hook

        - says in a WARNING, at the first train step, which parameters of the registered blocks that
          have a gradient (``grad_req`` not ``'null'``) no registered Trainer holds: ``trainer.step``
          never updates them (trial 28c: ``gluon.Trainer(net[2].collect_params(), ...)`` trained the
          output layer alone, without a word);
        - records the learning rate, ``lr/0`` (``lr/<i>`` for the i-th Trainer registered), in the
          ``optimizer`` collection at its save steps: :func:`step_learning_rate`, the rate that this
          step's ``trainer.step`` applies;
        - takes update ratios (``update_ratio/<param>``, see :meth:`end_step`) of the parameters the
          Trainers hold only, and only where the Trainer holding one made an update since the step
          before (its optimizer's update count moved);
        - says in a WARNING (once) a Trainer that updates inside a step, between :meth:`begin_step`
          and :meth:`end_step`, naming the parameters whose gradients a backward after its update
          overwrote (trial 30d)."""
        if not isinstance(trainer, gluon.Trainer):
            raise ConfigError(f"register_trainer: got {type(trainer).__name__}; accepted: a mxnet.gluon.Trainer")
        if any(t is trainer for t in self._trainers):
            raise ConfigError("register_trainer: this Trainer is already registered")
        self._trainers.append(trainer)
        self._unheld_checked = False

    def _use_trainers(self, trainers: Sequence[Any], source: str) -> None:
        """The estimator's handler: the fit's Trainer(s), named ``source`` in the messages; the
        parameters they leave out are looked for again when they changed."""
        if len(trainers) != len(self._trainers) or any(a is not b for a, b in zip(trainers, self._trainers)):
            self._trainers = list(trainers)
            self._unheld_checked = False
        self._trainer_source = source

    # ------------------------------------------------------------------------------------ steps
    def begin_step(self, mode: str = "train", step: int | None = None, *, summary: bool = False) -> StepPlan:
        """Start a step of ``mode`` (``train``, ``eval``, ``test``, ``predict``); ``step=None``
        counts steps per mode. ``summary=True``: epoch-level values that must not be skipped (the
        validation metrics of an epoch, offered once per epoch): every collection enabled in
        ``mode`` is due, whatever its save interval (without it, an evaluation step per epoch is
        saved every 10th epoch with the default interval). Turns the forward hooks on when this step
        saves layer outputs or the loss. Returns the session's plan (falsy when nothing is due)."""
        if self._closed:
            raise RuntimeError("TripwireHook.begin_step: the hook is closed")
        if self._plan is not None:  # (a forgotten end_step: that step would vanish, and every later one shift)
            open_step = self._plan
            raise RuntimeError(f"TripwireHook.begin_step: {open_step.mode} step {open_step.step} is still in progress; "
                               f"call end_step() first (again, with valid arguments, after one that raised a "
                               f"ConfigError), or use `with hook.step(...)`, which ends a step that raises")
        self._captured = {}
        self._loss_outputs = []
        plan = self.session.begin_step(mode, step, summary=summary)
        # (the registered Trainers' update counts as the step begins: one that moves before end_step is
        # said, _say_inner_update; trial 30d)
        self._counts_at_begin = (self._update_counts() if mode == "train" and self._trainers
                                 and not self._inner_update_said else None)  # (said once: no read after)
        self._plan = plan
        self._summary = bool(summary) and mode == "eval"
        if plan or plan.keeps("losses") or self._probing_output(plan):
            self._attach(plan)
        return plan

    def _probing_output(self, plan: StepPlan) -> bool:
        """Does this step read the prediction a registered loss block gets, for the loss/output
        check (:meth:`_check_loss_output`: the first train step that calls one)?"""
        return plan.mode == "train" and not self._output_checked and bool(self._loss_blocks)

    def end_step(
        self,
        loss: Any = None,
        metrics: Mapping[str, Any] | None = None,
        *,
        capture_parameters: bool | None = None,
        batch_size: int | None = None,
        inputs: Any = None,
    ) -> Decision:
        """Finish the step: offer the loss, metrics, inputs, parameters and gradients, reduce, run the rules.

        Call it after ``loss.backward()`` and before ``trainer.step``. ``loss``: an NDArray of
        per-sample losses (its mean is saved), a list of them (one per device), or a number;
        ``None`` uses the registered loss block. ``metrics``: ``{name: value}`` (numbers or
        one-element arrays); a name containing "loss" (``val_loss``, ``aux_loss``; any case) goes
        to the ``losses`` collection, kept at every train step as the loss is, the others to
        ``metrics``. ``capture_parameters``: offer weights, biases and gradients (default:
        in ``train`` mode only). Returns the :class:`tripwire.Decision`; ``should_stop`` follows it
        (and the tuner's stop, with ``trial=``: at an evaluation summary, ``metrics[trial_metric]``
        is reported to the trial; the decision stays the rules').

        Gradients are stored as the gradient of the mean loss: ``param.grad()`` (summed over the
        devices) divided by the number of elements ``backward`` summed over, which is the number
        of elements of ``loss`` (all arrays of a list; the registered loss block's outputs in the
        step when ``loss`` is None; 1 for a one-element loss, a mean already). ``batch_size``: divide
        by this instead (an integer >= 1: what you pass to ``trainer.step``, so that the gradient
        stored is the one the update applies). With neither an array loss nor ``batch_size`` the
        gradients are stored as ``backward`` left them, said once in a WARNING. The loss's mean and a
        float16 gradient's division are computed in float32 at least, whatever the net's dtype (a
        float16 loss summed in float16 overflowed past 65504; trial 30d).

        Every argument is checked before anything of the step is recorded: an invalid one is a
        ConfigError naming it, and the step stays open (nothing recorded; ``begin_step`` refuses to
        start another): call ``end_step`` again with valid arguments. (:meth:`step` discards it.)

        A registered Trainer that updates between :meth:`begin_step` and ``end_step`` (a GAN's
        discriminator stepped before the generator's backward) is said once in a WARNING, naming the
        parameters whose gradients a later backward overwrote: their stored gradients are not the ones
        the Trainer applied (use one hook per Trainer's step, docs/mxnet.md).

        ``inputs``: the batch the net was given (an NDArray, or a list of them, one per device: their
        values are joined, flattened, on the first one's device), saved as ``inputs`` at the steps
        that save that collection (``input_not_normalized`` reads it); nothing is done with it at
        other steps.

        Update ratios (``optimizer`` collection, ``weight_update_ratio``): at the end of the train
        step before a step that saves them, the parameters' values are copied on their device; at
        that save step ``update_ratio/<param>`` = ||w(s) - w(s-1)|| / ||w(s-1)||, the update that
        brought the weights to the ones this step's forward pass used (made by the step before's
        ``trainer.step``; the weights are one update behind, as they are stored). With a Trainer
        (:meth:`register_trainer`), only its parameters, and none where it made no update in between.
        """
        if self._plan is None:
            raise RuntimeError("TripwireHook.end_step: no step in progress; call begin_step() first")
        # Every argument is checked before the step is touched (trial 30d: a bad batch_size left the step
        # open, a bad metric ended it and the next begin_step recorded it): on an error it stays open.
        # (trial 25c: capture_parameters="yes" was taken as True)
        if capture_parameters is not None and not isinstance(capture_parameters, bool):
            raise ConfigError(f"end_step.capture_parameters: got {capture_parameters!r}; accepted: True, False or None "
                              "(None: offer parameters and gradients in train mode only)")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer))
                                       or batch_size < 1):
            raise ConfigError(f"end_step.batch_size: got {batch_size!r}; accepted: None (divide the gradients by the "
                              "number of elements of the loss) or an integer >= 1 (the batch size given to "
                              "trainer.step)")
        _check_inputs(inputs)
        _check_loss(loss)
        checked = _checked_metrics(metrics)
        plan, self._plan = self._plan, None
        summary, self._summary = self._summary, False
        self._detach()
        params = plan.mode == "train" if capture_parameters is None else capture_parameters
        if plan.mode == "train":
            if self._trainers and not self._unheld_checked:
                self._say_unheld(plan.step)
            self._say_inner_update(plan.step)
            probe, self._output_probe = self._output_probe, None
            if probe is not None and not self._output_checked:
                self._check_loss_output(probe[0], probe[1], plan.step)
        try:
            if plan:
                self._offer(plan, loss, checked, params, None if batch_size is None else int(batch_size), inputs)
            elif plan.keeps("losses"):  # every_step losses: the mean stays an NDArray until the next save step
                value = _mean_loss(loss if loss is not None else self._loss_outputs)
                if value is not None:
                    plan.add("loss", value, "losses")
                _offer_metrics(plan, checked, losses_only=True)  # (an 'aux_loss' metric is an every-step loss too)
        except Exception:
            # (what the checks above cannot see: a metric named as another tensor of the step, with another
            # value; the step stays open, as on the errors above: an end_step with valid arguments ends it)
            self._plan, self._summary = plan, summary
            raise
        self._captured = {}
        self._loss_outputs = []
        if plan.mode == "train" and params and self._ratios_possible:
            self._snapshot_weights(plan.step)  # (for the next step's update ratios, when it saves them)
            self._last_train_step = plan.step
        try:
            decision = self.session.end_step()
        except TrainingStopped:
            # the raise action stops training too (trial 33g F3: should_stop stayed False, and a loop that
            # caught the exception and read should_stop trained on)
            self.should_stop = True
            raise
        if decision.stop:
            self.should_stop = True
            note_rule_stop(self.trial, decision.stopped_by or self.session.stopped_by)  # never the tuner's best
        if summary and self.trial is not None:
            self._tell_trial(metrics)
        return decision

    def _tell_trial(self, metrics: Mapping[str, Any] | None, how: str | None = None, step: int | None = None) -> bool:
        """Report ``metrics[trial_metric]`` of one epoch to the trial (``step``: the epochs told so
        far, from 1, unless given: the estimator's handler passes the epoch number, so that a
        validation every k epochs reports steps k, 2k ..., the epochs trained; trial 25c); returns
        True when the tuner stops the trial (``should_stop`` and ``trial_stopped`` turn True, and the
        run will end ``stopped``, with the stop reason "the tuner stopped the trial after epoch N
        (metric=value)", unless the trial ran its whole budget). :meth:`end_step` calls it at each
        evaluation summary; the estimator's handler at each epoch that holds the metric. A metric missing from ``metrics`` ends the run ``failed`` and raises ConfigError,
        whose last words are ``how`` to log it (by default: the ``end_step`` call that passes it)."""
        if self.trial is None:
            return False
        if self.trial_stopped:  # told to stop already: an epoch trained after it is not the trial's
            return True
        metrics = metrics or {}
        if self.trial_metric not in metrics:
            names = sorted(map(str, metrics))
            error = ConfigError(
                f"trial_metric: {self.trial_metric!r} is not among the metrics of epoch {self._trial_epoch + 1}'s "
                f"evaluation summary{did_you_mean(str(self.trial_metric), names)}; available: "
                f"{', '.join(names) or 'none'} ("
                + (how or f"pass it as end_step(metrics={{{self.trial_metric!r}: value}}) at the step begun with "
                          "begin_step('eval', summary=True)") + ")")
            self.close("failed")  # the loop ends here, through our own error: the run with it
            raise error
        value = _host_float(metrics[self.trial_metric], f"end_step.metrics[{self.trial_metric!r}]")
        self._trial_epoch = self._trial_epoch + 1 if step is None else step
        epoch = self._trial_epoch
        if not self.trial.report(step=epoch, value=value):
            return False
        self.should_stop = True
        if not self.trial_stopped:
            self.trial_stopped = True
            note_tuner_stop(self.session, self.trial, epoch, f"epoch {epoch}", f"{self.trial_metric}={value:.6g}")
        return True

    @contextmanager
    def step(self, mode: str = "train", step: int | None = None, *, summary: bool = False) -> Iterator[_StepScope]:
        """``with hook.step("train") as s: ...; s.loss = loss`` runs :meth:`begin_step` on entry and
        :meth:`end_step` on a normal exit (with ``s.loss``, ``s.metrics``, ``s.batch_size`` and
        ``s.inputs``). A block that raises, or values that :meth:`end_step` refuses (its
        ConfigError propagates), discard the step: nothing of it is recorded, and the next step
        begins as usual (its number counts on)."""
        plan = self.begin_step(mode, step, summary=summary)
        scope = _StepScope(plan)
        try:
            yield scope
        except BaseException:
            self._plan = None
            self._detach()
            raise
        try:
            scope.decision = self.end_step(scope.loss, scope.metrics, batch_size=scope.batch_size,
                                           inputs=scope.inputs)
        except BaseException:
            if self._plan is plan:  # (its end_step refused the values set: the step is discarded, trial 30d)
                self._plan = None
                self._summary = False
                self._detach()
            raise

    # ----------------------------------------------------------------------------- extraction
    def _attach(self, plan: StepPlan) -> None:
        if plan and not self._roots and not self._unregistered_said and plan.mode == "train":
            self._say_unregistered(plan)
        if plan and any(plan.wants(k) for k in _ACTIVATION_KINDS):
            self._say_hybridized()
            for prefix, root in self._roots:
                for path, leaf in _leaves(root, prefix):
                    self._handles.append(leaf.register_forward_hook(self._layer_hook(path, plan)))
        if plan.keeps("losses") or plan.wants("gradients") or self._probing_output(plan):
            # (its outputs count what backward summed over; its first prediction: _check_loss_output)
            for block in self._loss_blocks:
                self._handles.append(block.register_forward_hook(self._loss_hook))

    def _say_unregistered(self, plan: StepPlan) -> None:
        """A WARNING at the first train save step that wants a block's tensors while no block is
        registered: the rules that read them would learn it only at ``close()`` (trial 17e: the
        default rules' gradient checks read nothing for 300 steps)."""
        kinds = [k for k in ("weights", "biases", "gradients", *_ACTIVATION_KINDS) if plan.wants(k)]
        if not kinds:
            return
        self._unregistered_said = True
        rules = sorted({r.name for r in self.session.rules
                        if any(q.collection in kinds and not q.optional for q in r.requirements())})
        logger.warning(
            "tripwire: no block is registered (hook.register_block(net)), so %s %s not captured%s; register "
            "the network before its first step", ", ".join(kinds), "is" if len(kinds) == 1 else "are",
            f" and {', '.join(map(repr, rules))} {'reads' if len(rules) == 1 else 'read'} nothing" if rules else "")

    def _say_hybridized(self) -> None:
        """A WARNING at a step that wants layer outputs, naming the hybridized blocks (Gluon runs the
        children of a hybridized block in one cached graph: no forward hook of a child runs, so
        their outputs are not captured) and the rules that then have nothing to read; said again
        when more blocks are hybridized later (``hybridize()`` after a few eager steps)."""
        earlier, self._activation_steps = self._activation_steps, self._activation_steps + 1
        hybrid = tuple(p or type(root).__name__ for prefix, root in self._roots for p in _hybrid_paths(root, prefix))
        if not hybrid:
            return
        said, self._hybrid_said = set(self._hybrid_said), hybrid
        if set(hybrid) <= said:
            return
        whole = {prefix or type(root).__name__ for prefix, root in self._roots if getattr(root, "_active", False)}
        rules = sorted({r.name for r in self.session.rules
                        if any(q.collection in _ACTIVATION_KINDS and not q.optional for q in r.requirements())})
        # "by step N" only for blocks hybridized after this hook's earlier steps (trial 23a: not for a net
        # hybridized before a run that starts at step 20, a resumed one)
        later = f" by step {self.session.mode_steps['train'] - 1}" if earlier else ""
        judged = ""
        if set(hybrid) <= whole:  # every registered block: close() says why these rules read nothing
            self.session.empty_because(_ACTIVATION_KINDS, f"{', '.join(map(repr, hybrid))} "
                                       f"{'is' if len(hybrid) == 1 else 'are'} hybridized, and no forward hook runs "
                                       "inside a hybridized block (train without hybridize() to capture them)")
            if rules:
                judged = f" and {', '.join(rules)} will have nothing to judge"
        elif rules:
            judged = f" ({', '.join(rules)} {'judges' if len(rules) == 1 else 'judge'} the layers outside them only)"
        logger.warning(
            "tripwire: %s %s hybridized%s: Gluon runs the children of a hybridized block in one cached graph, where "
            "no forward hook runs, so the layer outputs inside %s (activations, activation_inputs, relu_outputs) "
            "are not captured%s; parameters, gradients and the loss still are. To capture them, train without "
            "hybridize() (docs/mxnet.md)",
            ", ".join(map(repr, hybrid)), "is" if len(hybrid) == 1 else "are", later,
            "it" if len(hybrid) == 1 else "them", judged)

    def _detach(self) -> None:
        for handle in self._handles:
            handle.detach()
        self._handles = []

    def _layer_hook(self, path: str, plan: StepPlan) -> Any:
        wants_out = plan.wants("activations")
        wants_in = plan.wants("activation_inputs")
        wants_relu = plan.wants("relu_outputs")

        def keep(name: str, array: Any, kind: str) -> None:
            # one array per device: a call on another device (split_and_load's next shard) adds its shard,
            # a call on the same device replaces that device's (the last call counts)
            shards = self._captured.get(name)
            if shards is None:
                self._captured[name] = ({array.context: array}, kind)
            else:
                shards[0][array.context] = array

        def hook(block: Any, inputs: Sequence[Any], output: Any) -> None:
            outs = _flat_outputs(output)
            if not outs:  # symbolic pass (deferred shape inference, hybridization)
                return
            if wants_out:
                if len(outs) == 1:
                    keep(_layer_name(path, "output"), outs[0], "activations")
                else:
                    for i, o in enumerate(outs):
                        keep(_layer_name(path, f"output_{i}"), o, "activations")
            if isinstance(block, _ACTIVATION_LAYERS):
                if wants_in and inputs and isinstance(inputs[0], nd.NDArray):
                    keep(_layer_name(path, "input"), inputs[0], "activation_inputs")
                if wants_relu and _is_relu(block):
                    keep(_layer_name(path, "output#relu"), outs[0], "relu_outputs")

        return hook

    def _loss_hook(self, block: Any, inputs: Sequence[Any], output: Any) -> None:
        if isinstance(output, nd.NDArray):
            self._loss_outputs.append(output)
        if (self._output_probe is None and not self._output_checked and inputs
                and isinstance(inputs[0], nd.NDArray)):
            self._output_probe = (block, inputs[0])

    def _offer(self, plan: StepPlan, loss: Any, metrics: Sequence[tuple[str, Any, str]], params: bool,
               batch_size: int | None = None, inputs: Any = None) -> None:
        if plan.keeps("losses"):  # (due, or kept at every step: a step that saves only weights keeps it too)
            value = _mean_loss(loss if loss is not None else self._loss_outputs)
            if value is not None:
                plan.add("loss", value, "losses")
        _offer_metrics(plan, metrics)
        if plan.wants("inputs"):  # (trial 28c: not captured at all; input_not_normalized could not run)
            if inputs is not None:
                plan.add("inputs", _joined(inputs), "inputs")
            elif plan.mode == "train" and not self._inputs_said:
                self._say_no_inputs(plan)
        joined: dict[tuple[int, ...], Any] = {}  # (one join of the same shards: a ReLU's output is offered twice)
        for name, (shards, kind) in self._captured.items():
            # (several devices: their shards flattened and joined on the first one's, as the inputs are)
            arrays = list(shards.values())
            key = tuple(map(id, arrays))
            if key not in joined:
                joined[key] = _joined(arrays)
            plan.add(name.split("#", 1)[0], joined[key], kind)
        if not params:
            return
        if plan.mode == "train" and self._ratios_possible and plan.wants("optimizer"):
            self._offer_optimizer(plan)
        want_w, want_b, want_g = plan.wants("weights"), plan.wants("biases"), plan.wants("gradients")
        if not (want_w or want_b or want_g):
            return
        divisor = self._grad_divisor(loss, batch_size) if want_g else None
        for name, param in self._named_params():
            data = _param_data(param)
            if data is None:  # deferred initialization: no value yet
                continue
            kind = _param_kind(name)
            # (a BatchNorm's running_mean/running_var are statistics, not weights: no gradient
            # ever; poor_weight_initialization stopped a healthy ResNet on them; trial 17e)
            learnt = getattr(param, "_differentiable", True) is not False
            if learnt and ((want_w and kind == "weights") or (want_b and kind == "biases")):
                plan.add(name, data, kind)
            if want_g and param.grad_req != "null" and not (self._fresh_known and not _fresh_grad(param)):
                # (trial 43i: a branch not used in this step, its gradient a step before's, was stored as this
                # step's; its record is left out where the step ran no trainer.step, so the state is known)
                grad = _param_grad(param)
                if grad is not None:
                    # (a float16 gradient divided in float32: in float16, a small gradient divided by
                    # the batch size fell to 0, as the update, which rescales in float32, never sees it)
                    plan.add(f"gradients/{name}", grad if divisor is None or divisor == 1
                             else _float32_at_least(grad) / divisor, "gradients")

    def _grad_divisor(self, loss: Any, batch_size: int | None) -> int | None:
        """What the gradients of this step are divided by (see :meth:`end_step`): ``batch_size``, else
        the number of loss elements ``backward`` summed over (``loss``'s, or the registered loss
        block's outputs in the step); None, said once in a WARNING, when neither is known."""
        if batch_size is not None:
            return batch_size
        count = _loss_elements(loss if loss is not None else self._loss_outputs)
        if count is None and not self._unscaled_said:
            self._unscaled_said = True
            got = (f"a loss that is not an NDArray ({type(loss).__name__})" if loss is not None
                   else "no loss, and its registered loss block returned nothing in this step" if self._loss_blocks
                   else "no loss and no registered loss block")
            logger.warning(
                "tripwire: end_step got %s and no batch_size, so the number of per-sample losses that backward "
                "summed over is not known: the gradients are stored as param.grad() holds them, a sum over the "
                "batch (batch-size times the gradient of the mean loss that PyTorch, Keras and Lightning store, "
                "and that exploding_gradient's max_norm and vanishing_gradient's min_abs_mean are set for); pass "
                "end_step(loss=<the per-sample loss NDArray>) or end_step(batch_size=<what trainer.step gets>) "
                "(docs/mxnet.md)", got)
        return count

    # ----------------------------------------------------------------------- trainers (trial 28c)
    def _named_params(self) -> Iterator[tuple[str, Any]]:
        """``(name, parameter)`` of the registered blocks' parameters, in the order Gluon lists them
        (``_collect_params_with_prefix``, the names ``save_parameters`` writes), each ``Parameter`` object
        once: a parameter shared by several blocks (``nn.Dense(16, params=other.collect_params())``) under
        its first name only (trial 32g F4: it was stored under every block's name, identical series, and
        the copy counted as one more layer in the first/last-layer order of the gradient rules)."""
        seen: set[int] = set()
        for prefix, root in self._roots:
            for pname, param in root._collect_params_with_prefix().items():
                if id(param) in seen:
                    continue
                seen.add(id(param))
                yield _join(prefix, pname), param

    def _tracked_params(self) -> Iterator[tuple[str, Any]]:
        """``(name, parameter)`` of the registered blocks' parameters that have a gradient (``grad_req``
        not ``'null'``; a BatchNorm's running statistics never do), each once (:meth:`_named_params`)."""
        for name, param in self._named_params():
            if param.grad_req != "null" and getattr(param, "_differentiable", True) is not False:
                yield name, param

    def _holders(self) -> dict[int, int]:
        """``id(parameter)`` -> the index of the first registered Trainer that holds it."""
        held: dict[int, int] = {}
        for i, trainer in enumerate(self._trainers):
            for param in getattr(trainer, "_params", ()):
                held.setdefault(id(param), i)
        return held

    def _say_unheld(self, step: int) -> None:
        """A WARNING (once per set of Trainers) at the first train step: the registered blocks'
        parameters with a gradient that no registered Trainer holds; ``trainer.step`` never updates
        them, so they keep their initial values (trial 28c: ``gluon.Trainer(net[2].collect_params(),
        ...)`` trained the output layer alone; ``unchanged_tensor`` reads every weight together, and no
        rule fired). As the Lightning callback says it (docs/lightning.md)."""
        self._unheld_checked = True
        held = self._holders()
        tracked = list(self._tracked_params())
        unheld = [name for name, param in tracked if id(param) not in held]
        if not unheld:
            return
        shown = ", ".join(unheld[:8]) + (f" and {len(unheld) - 8} more" if len(unheld) > 8 else "")
        logger.warning(
            "tripwire: %d of the %d parameters of the registered block(s) that have a gradient (grad_req not 'null') "
            "at train step %d are held by %s, so trainer.step never updates them and they keep their initial values: "
            "%s. Did the Trainer get only part of the network (gluon.Trainer(net[2].collect_params(), ...), a "
            "collect_params('...') pattern that misses them)? Pass them to the Trainer (net.collect_params()), or "
            "freeze them (param.grad_req = 'null') if they are meant to stay as they are. Their gradients are "
            "captured with the others' (gradients/<name>)",
            len(unheld), len(tracked), step, self._trainer_source, shown)

    def _update_counts(self) -> tuple[int, ...]:
        """The update count of each registered Trainer's optimizer: the sum of its parameters' own
        counts, which each update of a parameter advances (``num_update`` is the highest of them, which
        an update of every parameter but the most updated one leaves as it was: ``trainer.step(...,
        ignore_stale_grad=True)`` on a branch not used at every step, trial 43i), else ``num_update``."""
        return tuple(sum(_index_counts(t).values()) or int(getattr(getattr(t, "_optimizer", None), "num_update", 0)
                                                         or 0) for t in self._trainers)

    def _param_counts(self) -> dict[int, int]:
        """``id(parameter)`` -> its own update count in the first registered Trainer that holds it
        (where the optimizer keeps one: ``_all_index_update_counts``, per device; the highest)."""
        out: dict[int, int] = {}
        for trainer in self._trainers:
            counts = _index_counts(trainer)
            index = getattr(trainer, "_param2idx", None) or {}
            for param in getattr(trainer, "_params", ()):
                i = index.get(getattr(param, "name", None))
                if i is not None:
                    out.setdefault(id(param), counts.get(i, 0))
        return out

    def _say_inner_update(self, step: int) -> None:
        """A WARNING (once) at the end of a train step in which a registered Trainer updated (its
        optimizer's ``num_update`` moved since :meth:`begin_step`): ``trainer.step`` ran inside the
        step, so the weights stored for it are after that update, and where a backward pass ran after
        the update (the gradient state MXNet keeps per parameter, ``_fresh_grad``, which
        ``trainer.step`` clears and ``backward`` sets, is set again) the gradients read now are not
        the ones the Trainer applied: a GAN with one hook holding both players' Trainers stored the
        discriminator's gradients of the generator's backward (trial 30d: 0.23 stored, 0.60 applied),
        without a word. One hook per player records each one's step as it is applied."""
        before, self._counts_at_begin = self._counts_at_begin, None
        self._fresh_known = False
        if before is None or self._inner_update_said or len(before) != len(self._trainers):
            return
        moved = [i for i, (a, b) in enumerate(zip(before, self._update_counts())) if b > a]
        if not moved:
            # (no trainer.step inside the step: a gradient no backward wrote since the last update is stale,
            # trainer.step(..., ignore_stale_grad=True) leaves it unapplied; see _offer)
            self._fresh_known = True
            return
        self._inner_update_said = True
        holders = self._holders()
        parts: list[str] = []
        for i in moved:
            trainer = self._trainers[i]
            names = [name for name, param in self._tracked_params() if holders.get(id(param)) == i]
            # (a Trainer updating on its kvstore leaves the gradient state set: nothing to read there)
            on_kvstore = bool(getattr(trainer, "_kvstore", None) and getattr(trainer, "_update_on_kvstore", False))
            fresh = names if on_kvstore else [name for name, param in self._tracked_params()
                                              if holders.get(id(param)) == i and _fresh_grad(param)]
            head = f"Trainer {i} made an update (trainer.step) inside train step {step}, between begin_step and end_step"
            if fresh:
                shown = ", ".join(fresh[:8]) + (f" and {len(fresh) - 8} more" if len(fresh) > 8 else "")
                parts.append(
                    f"{head}, and a backward pass after it {'may have written' if on_kvstore else 'wrote'} new "
                    f"gradients to {shown}: the gradients stored for them at that step are not the ones that Trainer "
                    f"applied (those of the later backward: a GAN generator's loss through the discriminator, say), "
                    f"and the weights stored for that step are those after its update")
            else:
                parts.append(f"{head}: the gradients stored are the ones it applied, but the weights stored for that "
                             f"step are those after its update, not the ones its forward pass used")
        logger.warning(
            "tripwire: %s; exploding_gradient, vanishing_gradient and the weight rules judge what is stored. One hook "
            "records one training step: call end_step before trainer.step, and give each Trainer's step its own hook "
            "(a GAN: one hook per player, each with its block, its Trainer and its out_dir, its begin_step/end_step "
            "around that player's backward and before its trainer.step; docs/mxnet.md); said once",
            "; ".join(parts))

    def _snapshot_weights(self, step: int) -> None:
        """At the end of train step ``step`` (before its ``trainer.step``): when the next train step
        saves update ratios, copy on their devices the parameters whose ratio it saves (a Trainer's
        only, where Trainers are registered), for :meth:`_offer_optimizer`. Nothing at other steps.
        The next train step is taken to be ``step`` plus the last stride between train steps (1 at
        first, or after a step that went back): a loop that numbers its steps itself, by 2 say
        (``begin_step(step=2 * i)``), has its update ratios at the save steps (trial 38g: the copy was
        made at the end of step 9 for a save at 10, a step that never ran, and no ratio was stored)."""
        self._snapshot = None
        last = self._last_train_step
        nxt = self._expected_step = step + (step - last if last is not None and step > last else 1)
        # (a save due at a step the loop's stride skips comes at the next step taken: trial 42j, its update
        # ratios were missing there)
        cols = [c for c in self.session.due_collections("train", nxt, self.session.mode_steps["train"])
                if c.accepts_kind("optimizer")]
        if not cols:
            return
        held = self._holders() if self._trainers else None
        copies: dict[str, tuple[Any, Any]] = {}
        for name, param in self._tracked_params():
            if held is not None and id(param) not in held:
                continue
            if not any(c.matches(f"update_ratio/{name}", "optimizer") for c in cols):
                continue
            data = _param_data(param)
            if data is not None and not isinstance(data, nd.sparse.BaseSparseNDArray):
                copies[name] = (param, data.copy())
        if copies:
            self._snapshot = _Snapshot(step, self._update_counts(), copies, self._param_counts())

    def _offer_optimizer(self, plan: StepPlan) -> None:
        """The ``optimizer`` kind at a train save step: ``lr/<i>`` of each registered Trainer (the rate
        its coming ``trainer.step`` applies), and ``update_ratio/<param>`` of the update made since the
        weights were copied at the end of the step before (:meth:`_snapshot_weights`)."""
        for i, trainer in enumerate(self._trainers):
            if not plan.select(f"lr/{i}", "optimizer"):
                continue
            try:
                plan.add(f"lr/{i}", step_learning_rate(trainer), "optimizer")
            except ConfigError as exc:
                if not self._lr_unread_said:
                    self._lr_unread_said = True
                    logger.warning("tripwire: the learning rate of Trainer %d is not recorded (lr/%d): %s", i, i, exc)
        snap, self._snapshot = self._snapshot, None
        before_this = self._last_train_step if self._last_train_step is not None else plan.step - 1
        if snap is None or snap.step != before_this:
            expected, self._expected_step = self._expected_step, None
            if expected is not None and expected != plan.step and not self._uneven_said:
                self._uneven_said = True
                logger.warning(
                    "tripwire: no update ratio at train step %d: the weights are copied at the end of the train step "
                    "before a step that saves them, and after step %d the next was taken to be %d (the steps' last "
                    "stride); number the train steps evenly (or leave step= out: they are counted), or the ratios "
                    "are recorded only at save steps that come at that stride; said once",
                    plan.step, before_this, expected)
            return
        holders = self._holders() if self._trainers else {}
        counts = self._update_counts()
        own = self._param_counts()
        names: list[str] = []
        before: list[Any] = []
        moved: list[Any] = []
        idle: list[str] = []
        stale: list[str] = []
        for name, (param, old) in snap.copies.items():
            if not plan.select(f"update_ratio/{name}", "optimizer"):
                continue
            i = holders.get(id(param))
            if i is not None and i < len(snap.counts) and counts[i] <= snap.counts[i]:
                idle.append(name)  # (its Trainer made no update: a ratio of 0 would read as "not learning")
                continue
            if id(param) in own and id(param) in snap.param_counts and own[id(param)] <= snap.param_counts[id(param)]:
                stale.append(name)  # (its Trainer updated others, not it: ignore_stale_grad, a branch not used)
                continue
            now = _param_data(param)
            if now is None or now.shape != old.shape:
                continue
            names.append(name)
            before.append(old)
            moved.append(now - old)
        if idle and not self._no_update_said:
            self._no_update_said = True
            logger.warning(
                "tripwire: no update ratio at train step %d for %s: the Trainer's update count did not change since "
                "step %d (no trainer.step between them: gradients accumulated over several begin_step/end_step "
                "pairs, where one pair per trainer.step is meant, or updates made on a kvstore's servers); said once",
                plan.step, ", ".join(idle[:5]) + (f" and {len(idle) - 5} more" if len(idle) > 5 else ""), snap.step)
        if not names:
            return
        norms = self._backend.reduce(moved + before, ["l2"])[:, 0]  # (on the devices; one host copy)
        k = len(names)
        if not snap.param_counts:
            # a copy loaded from a checkpoint holds no parameter's own update count: one that did not move is
            # taken for one its Trainer did not update (trial 43k: a branch not used read a ratio of 0.0 there)
            keep = [i for i in range(k) if norms[i] != 0]
            names = [names[i] for i in keep]
            norms = np.concatenate([norms[:k][keep], norms[k:][keep]])
            k = len(names)
            if not k:
                return
        with np.errstate(divide="ignore", invalid="ignore"):  # an all-zero weight (a fresh bias): inf, as elsewhere
            ratios = norms[:k] / norms[k:]
        for name, ratio in zip(names, ratios.tolist()):
            plan.add(f"update_ratio/{name}", float(ratio), "optimizer")

    def _say_no_inputs(self, plan: StepPlan) -> None:
        """A WARNING at the first train save step that saves ``inputs`` while ``end_step`` got none."""
        self._inputs_said = True
        rules = sorted({r.name for r in self.session.rules
                        if any(q.collection == "inputs" and not q.optional for q in r.requirements())})
        logger.warning(
            "tripwire: train step %d saves 'inputs'%s, but end_step got no inputs: pass the batch the net is given, "
            "hook.end_step(..., inputs=x) (docs/mxnet.md)", plan.step,
            f" ({', '.join(rules)} {'reads' if len(rules) == 1 else 'read'} them)" if rules else "")

    def _check_loss_output(self, loss_block: Any, pred: Any, step: int) -> None:
        """The loss/output check (trial 28c), once: a ``SoftmaxCrossEntropyLoss`` that applies
        log_softmax to outputs that are already probabilities (every row in [0, 1], summing to 1:
        a softmax at the end of the net), or one with ``from_logits=True`` given outputs that are
        not log-probabilities (a row's log-sum-exp is not 0). Said in a WARNING and recorded as
        the finding ``loss_output_mismatch`` (severity warning, mode train, at ``step``) through
        :meth:`tripwire.Session.record_finding`: a check, not a rule; it runs no action."""
        self._output_checked = True
        found = _loss_output_mismatch(loss_block, pred)
        if found is None:
            return
        message, details = found
        logger.warning("tripwire: %s", message)
        self.session.record_finding(Finding(rule="loss_output_mismatch", step=int(step), mode="train", message=message,
                                            severity="warning", worker=self.session.rank, details=details))

    # ------------------------------------------------------------------------------- results
    @property
    def findings(self) -> list[Finding]:
        return self.session.findings

    @property
    def stopped_by(self) -> Finding | None:
        """The finding that stopped training, or None (as on the other integrations)."""
        return self.session.stopped_by

    @property
    def stop_reason(self) -> str | None:
        """Why training stopped, or None: the finding that stopped it (a rule's, another rank's, one
        ``tripwire watch`` sent), or the tuner's stop ("the tuner stopped the trial after epoch 3
        (val_loss=0.412)"); what the run's end marker records and :attr:`tripwire.Session.why_stopped`
        and the XGBoost callback's ``stop_reason`` give. None for a trial stopped after its whole
        budget (its training completed)."""
        return self.session.why_stopped

    @property
    def history(self) -> History:
        return self.session.history

    @property
    def out_dir(self) -> Path:
        return self.session.out_dir

    def state_dict(self) -> dict[str, Any]:
        """The hook's state for a checkpoint: ``{"session": ..., "should_stop": ..., "trial_epoch":
        ...}``, plain Python values to pickle beside the net's and the Trainer's files
        (``net.save_parameters``, ``trainer.save_states``). ``session`` is
        :meth:`tripwire.Session.state_dict`: the step counters of each mode, each rule's state (a
        loss's first values, its best, patience counts ...), the rules that fired or were disabled,
        the planned steps; ``should_stop`` whether a stop was asked; ``trial_epoch`` the epochs told
        to a tuner trial. The records themselves are in the run (``out_dir``), not here: this call
        writes the every-step losses kept since the last save step and waits for the writer, so the
        checkpoint never holds a step the run lacks.

        Call it between steps, where you save the checkpoint: after the last checkpointed step's
        ``end_step`` and ``trainer.step``, before the next ``begin_step`` (a step begun is counted
        already, and would be skipped by the resumed training). Resume with :meth:`load_state_dict`.

        Where the next train step saves update ratios, ``update_ratio_weights`` holds the weights
        copied at the end of the last step for them (:meth:`_snapshot_weights`, numpy arrays by
        parameter name): the ratio ``||w(s) - w(s-1)||`` of that step needs ``w(s-1)``, which the
        net's checkpoint does not hold (trial 36f: a checkpoint taken before a save step lost that
        step's ratios)."""
        state: dict[str, Any] = {"session": self.session.state_dict(), "should_stop": self.should_stop,
                                 "trial_epoch": self._trial_epoch}
        snap = self._snapshot
        if snap is not None:
            counts = self._update_counts()
            state["update_ratio_weights"] = {
                "step": snap.step,
                # whether each Trainer updated since the copy (its trainer.step of that step ran)
                "updated": [i < len(counts) and counts[i] > c for i, c in enumerate(snap.counts)],
                "values": {name: old.asnumpy() for name, (_, old) in snap.copies.items()},
            }
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a checkpoint's :meth:`state_dict`: build the hook as the first training did (the
        same config and the same ``out_dir``, so that the run goes on), register the blocks and
        Trainers, load the net's parameters and the Trainer's states, then call this before the first
        ``begin_step``. The steps count on from the checkpoint's, the rules get their state back and
        read the run's records up to it (they judge the whole training), and steps the run holds past
        the checkpoint (the process died later) are kept, said in a WARNING (see
        :meth:`tripwire.Session.load_state_dict`). Anything but what ``state_dict`` returned is a
        ConfigError."""
        if not isinstance(state, Mapping) or "session" not in state:
            got = (f"a mapping with the keys {sorted(map(str, state))[:8]}" if isinstance(state, Mapping)
                   else f"a {type(state).__name__}")
            raise ConfigError(f"TripwireHook.load_state_dict: got {got}; accepted: what TripwireHook.state_dict() "
                              f"returned (keys session, should_stop, trial_epoch)")
        self.session.load_state_dict(state["session"])
        self.should_stop = bool(state.get("should_stop", False))
        self._trial_epoch = int(state.get("trial_epoch", 0))
        self._snapshot = self._loaded_snapshot(state.get("update_ratio_weights"))
        self._last_train_step = self._snapshot.step if self._snapshot is not None else None
        self._expected_step = None

    def _loaded_snapshot(self, saved: Mapping[str, Any] | None) -> _Snapshot | None:
        """The weights copy of :meth:`state_dict`'s ``update_ratio_weights`` on the registered
        parameters' devices (a parameter no longer registered, or of another shape, has none); the
        Trainers' update counts as if the copy had been taken one update ago where it was."""
        if not saved:
            return None
        params = dict(self._tracked_params())
        copies: dict[str, tuple[Any, Any]] = {}
        for name, values in saved.get("values", {}).items():
            param = params.get(name)
            data = _param_data(param) if param is not None else None
            if data is not None and tuple(data.shape) == tuple(np.shape(values)):
                copies[name] = (param, nd.array(values, ctx=data.context, dtype=data.dtype))
        if not copies:
            return None
        updated = list(saved.get("updated", []))
        counts = tuple(c - 1 if (updated[i] if i < len(updated) else True) else c
                       for i, c in enumerate(self._update_counts()))
        return _Snapshot(int(saved["step"]), counts, copies, {})

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ended the run (:meth:`reopen` continues it)."""
        return self._closed

    def reopen(self, continued: bool | None = None) -> None:
        """Continue a closed run (a second ``fit`` of the estimator through the same handler): its
        steps count on; a stop asked before is not this training's. ``continued``: whether it goes
        on training the same net with the weights the last training left (its built-in rules keep
        their view of the earlier trainings), else a new training, whose rules judge its steps alone
        (see ``Session.new_training``)."""
        if not self._closed:
            return
        self.session.new_training(continued)
        self.session.reopen()
        self._closed = False
        self.should_stop = False

    def close(self, status: str | None = None) -> None:
        """Detach hooks and write the run's end marker (``complete``, ``stopped`` or ``status``)."""
        if self._closed:
            return
        if status is None and _failing(sys.exc_info()[1]):
            # (in an except or finally block while an exception is at hand: failed, as Session.close takes it;
            # trial 41k: the open step's "call end_step() once per step" WARNING blamed the user's code)
            status = "failed"
        self._detach()
        open_plan, self._plan = self._plan, None
        self._snapshot = None
        if open_plan is not None and status != "failed":
            # (trial 28c: dropped without a word, and the run read 'complete')
            logger.warning(
                "tripwire: close() while %s step %d was begun (begin_step) and never ended: nothing of it is recorded "
                "and no rule judged it; call end_step() once per step begun, after loss.backward() (or use `with "
                "hook.step(...)`)", open_plan.mode, open_plan.step)
        self._closed = True
        if status is None and self.trial_stopped and not reached_max_resource(self.trial, self._trial_epoch):
            status = "stopped"  # the tuner cut the training short (a trial that ran its budget is complete)
        if (self.trial is not None and status != "failed" and not self._trial_epoch
                and self.session.mode_steps.get("train", 0) and self.session.stopped_by is None):
            logger.warning("tripwire: this training told the trial nothing: the hook reports trial_metric=%r at "
                           "each epoch's evaluation summary, hook.begin_step('eval', summary=True); "
                           "hook.end_step(metrics={%r: value})", self.trial_metric, self.trial_metric)
        self.session.close(status)

    def __enter__(self) -> TripwireHook:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # (as Session's: sys.exit(0), sys.exit() and StopIteration end no run failed; trial 42j)
        self.close("failed" if exc_type is not None and _failing(exc) else None)


class _StepScope:
    """What ``with hook.step(...) as s`` yields: set ``s.loss`` / ``s.metrics`` (and ``s.batch_size``,
    ``s.inputs``, see :meth:`TripwireHook.end_step`); ``s.decision`` holds the decision after the block."""

    def __init__(self, plan: StepPlan) -> None:
        self.plan = plan
        self.loss: Any = None
        self.metrics: Mapping[str, Any] | None = None
        self.batch_size: int | None = None
        self.inputs: Any = None
        self.decision: Decision | None = None


def step_learning_rate(trainer: Any) -> float:
    """The learning rate that ``trainer.step`` applies next: the one of the step in progress.

    Call it before ``trainer.step`` and pass it to :meth:`TripwireHook.end_step` as a metric
    (``metrics={"lr": step_learning_rate(trainer)}``): the value stored for each step is the rate
    applied in that step. ``trainer.learning_rate`` is one step late under an ``lr_scheduler``:
    MXNet evaluates the scheduler at the optimizer's update count, and ``trainer.step`` increments
    that count before it computes the rate it uses (trial 26g). This reads the scheduler (a copy of
    it) at the count the coming ``trainer.step`` reaches, ``num_update + 1`` where every parameter
    has a fresh gradient (:func:`_coming_update_count`; or the optimizer's ``lr`` without a scheduler, as
    ``trainer.set_learning_rate`` left it): the base rate, which a parameter's ``lr_mult``
    multiplies. Under a ``dist_*`` kvstore that updates on the servers, the optimizer there counts
    the updates, not this one: a ConfigError."""
    if not isinstance(trainer, gluon.Trainer):
        raise ConfigError(f"step_learning_rate: got {type(trainer).__name__}; accepted: a mxnet.gluon.Trainer")
    optimizer = trainer._optimizer
    if not isinstance(optimizer, mx.optimizer.Optimizer):
        raise ConfigError("step_learning_rate: the trainer has no optimizer yet; accepted: a Trainer built with one")
    kvstore = getattr(trainer, "_kvstore", None)
    if (getattr(trainer, "_kv_initialized", False) and getattr(trainer, "_update_on_kvstore", False)
            and kvstore is not None and "dist" in str(getattr(kvstore, "type", ""))):
        raise ConfigError(
            f"step_learning_rate: the trainer updates on the servers of its {kvstore.type!r} kvstore, whose "
            "optimizer counts the updates (this process's does not advance), so the rate of a step is not known "
            "here; accepted: a Trainer that updates locally (gluon.Trainer(..., update_on_kvstore=False))")
    scheduler = optimizer.lr_scheduler
    if scheduler is None:
        return float(optimizer.lr)
    # (a copy: MXNet's FactorScheduler and MultiFactorScheduler move their own state when called, and a
    # call at a count the next update does not reach, ignore_stale_grad leaving num_update as it was,
    # decayed the training's rate one update early; trial 43i)
    return float(copy.copy(scheduler)(_coming_update_count(trainer, optimizer)))


def _coming_update_count(trainer: Any, optimizer: Any) -> int:
    """The optimizer's ``num_update`` once ``trainer.step`` has updated the parameters it will: each
    parameter with a fresh gradient gets its own count + 1, and ``num_update`` is the highest count
    (MXNet's ``Optimizer._update_count``); ``num_update + 1`` where no parameter's state tells it.
    Under ``ignore_stale_grad`` a step that updates only parameters counted less than the most
    updated one leaves ``num_update`` as it was (trial 43k: ``lr/0`` was one update ahead there)."""
    counts = _index_counts(trainer)
    index = getattr(trainer, "_param2idx", None) or {}
    base = int(getattr(optimizer, "begin_num_update", 0) or 0)
    coming = []
    for param in getattr(trainer, "_params", ()):
        i = index.get(getattr(param, "name", None))
        if i is None or getattr(param, "grad_req", "null") == "null" or not _fresh_grad(param):
            continue
        coming.append(counts.get(i, base) + 1)
    current = int(optimizer.num_update)
    return max(current, *coming) if coming else current + 1


def _flat_outputs(output: Any) -> list[Any]:
    """A block's output arrays in order, nested lists and tuples flattened depth-first (an
    ``rnn.LSTM`` called with states returns ``(output, [h, c])``: ``[output, h, c]``; trial 26g: the
    states, a list inside the tuple, were dropped); what is not an NDArray (a symbol, None) is left
    out. Stored as ``<layer>/output`` when there is one, else ``<layer>/output_<i>``, ``i`` the
    position in this list."""
    if isinstance(output, nd.NDArray):
        return [output]
    if isinstance(output, (list, tuple)):
        return [o for item in output for o in _flat_outputs(item)]
    return []


def _param_data(param: Any) -> Any:
    try:
        datas = param.list_data()
    except (RuntimeError, mx.gluon.parameter.DeferredInitializationError):
        return None
    return datas[0] if datas else None


def _param_grad(param: Any) -> Any:
    try:
        grads = param.list_grad()
    except (RuntimeError, mx.gluon.parameter.DeferredInitializationError):
        return None
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    ctx = grads[0].context
    # what the trainer applies in total (a float16 gradient summed in float32: trial 30d)
    return nd.add_n(*[_float32_at_least(g).as_in_context(ctx) for g in grads])


def _fresh_grad(param: Any) -> bool:
    """Whether a backward pass wrote ``param``'s gradient since the last ``trainer.step`` that
    updated it (MXNet's gradient state of its arrays, ``_fresh_grad``; on any device)."""
    try:
        return any(bool(getattr(d, "_fresh_grad", False)) for d in param.list_data())
    except (RuntimeError, mx.gluon.parameter.DeferredInitializationError):
        return False


def _metric_kind(name: str) -> str:
    """The collection kind of a metric offered by name: ``losses`` for a name containing "loss" (any
    case: ``val_loss``, ``aux_loss``, the estimator's ``validation softmaxcrossentropyloss``), else
    ``metrics``. Trial 19d: ``val_loss`` went to ``metrics``, where docs/config.md's collections table
    and docs/rules.md put it in ``losses`` (and the Lightning integration does): with
    ``collections: [losses]`` it was dropped."""
    return "losses" if "loss" in name.lower() else "metrics"


def _checked_metrics(metrics: Mapping[str, Any] | None) -> list[tuple[str, Any, str]]:
    """``end_step``'s ``metrics`` checked (before the step is touched: trial 30d) as ``(name, value,
    kind)``: each value a float or a one-element NDArray, its kind :func:`_metric_kind`'s; a
    ConfigError naming the first that is not a mapping of non-empty names to such values."""
    if metrics is None:
        return []
    if not isinstance(metrics, Mapping):
        raise ConfigError(f"end_step.metrics: got {type(metrics).__name__}; accepted: a mapping {{name: value}}")
    checked: list[tuple[str, Any, str]] = []
    for key, value in metrics.items():
        name = str(key)
        if not name:  # (trial 25c: the session's "add: name=''" named no argument of ours)
            raise ConfigError(f"end_step.metrics[{key!r}]: an empty name; accepted: a non-empty metric name "
                              "(e.g. 'val_loss', 'val_acc')")
        checked.append((name, _scalar(value, f"end_step.metrics[{key!r}]"), _metric_kind(name)))
    return checked


def _offer_metrics(plan: StepPlan, metrics: Sequence[tuple[str, Any, str]], *, losses_only: bool = False) -> None:
    """Offer ``end_step``'s checked ``metrics`` (:func:`_checked_metrics`) each under its kind;
    ``losses_only``: only the loss-named ones (a step that saves nothing but keeps every-step losses)."""
    for name, value, kind in metrics:
        if losses_only and kind != "losses":
            continue
        plan.add(name, value, kind)


def _loss_elements(loss: Any) -> int | None:
    """The number of loss elements ``backward`` summed over: an NDArray's size, the sum of a list's
    (one per device, or the loss block's calls in a step); None for anything else (a number, an
    empty list), which tells nothing about it."""
    if isinstance(loss, nd.NDArray):
        return int(loss.size) or None
    if isinstance(loss, (list, tuple)) and loss and all(isinstance(x, nd.NDArray) for x in loss):
        return sum(int(x.size) for x in loss) or None
    return None


_LOSS_ACCEPTED = "an NDArray (per-sample losses: their mean), a list of NDArrays (one per device) or a number"


def _check_loss(loss: Any) -> None:
    """``end_step``'s ``loss``: None, an NDArray, a list or tuple of NDArrays (one per device; empty:
    no loss) or a number; anything else is a ConfigError (checked before the step is touched)."""
    if loss is None or isinstance(loss, nd.NDArray):
        return
    if isinstance(loss, (list, tuple)):
        if not all(isinstance(x, nd.NDArray) for x in loss):
            raise ConfigError(
                f"end_step.loss: got a {type(loss).__name__} with non-NDArray items; accepted: an NDArray, "
                "a list of NDArrays (one per device) or a number"
            )
        return
    _scalar(loss, "end_step.loss", _LOSS_ACCEPTED)


def _float32_at_least(x: Any) -> Any:
    """``x`` itself when it is float32 or float64, else a float32 copy on its device (float16,
    bfloat16, integers): what a loss is reduced in and a float16 gradient divided in, whatever the
    dtype the net computes in (trial 30d: a float16 loss was averaged in float16, so a batch whose
    loss sum passed 65504 was stored as inf or NaN and ``exploding_tensor`` stopped a healthy run).
    A sparse array is left as it is."""
    dtype = np.dtype(x.dtype)
    if (dtype.kind == "f" and dtype.itemsize >= 4) or isinstance(x, nd.sparse.BaseSparseNDArray):
        return x
    return x.astype("float32")


def _mean_loss(loss: Any) -> Any:
    """The mean per-sample loss as a one-element array (or a float); None when there is none. The
    elements are summed in float32 at least (:func:`_float32_at_least`), on their device (no host
    copy); a list's (one array per device) on the first one's."""
    if loss is None:
        return None
    if isinstance(loss, nd.NDArray):  # (a 0-d array: MXNet's mean cannot infer its shape; trial 17e)
        return loss.reshape((1,)) if loss.size == 1 else nd.mean(_float32_at_least(loss)).reshape((1,))
    if isinstance(loss, (list, tuple)):
        _check_loss(loss)
        if not loss:
            return None
        ctx = loss[0].context
        total = nd.add_n(*[_float32_at_least(x.reshape((1,)) if x.size == 1 else nd.sum(_float32_at_least(x)))
                           .as_in_context(ctx).reshape((1,)) for x in loss])
        return total / sum(int(x.size) for x in loss)
    return _scalar(loss, "end_step.loss", _LOSS_ACCEPTED)


def _host_float(value: Any, path: str) -> float:
    """A metric value as a Python float (a one-element NDArray is copied to the host)."""
    value = _scalar(value, path)
    return float(value.asscalar()) if isinstance(value, nd.NDArray) else float(value)


def _scalar(value: Any, path: str, accepted: str = "a number or a one-element NDArray") -> Any:
    """A metric or loss value: a one-element NDArray (reduced on the device) or a float."""
    if isinstance(value, nd.NDArray):
        if value.size != 1:
            raise ConfigError(f"{path}: got an NDArray of shape {value.shape}; accepted: one element")
        return value.reshape((1,))
    if isinstance(value, np.generic) and value.dtype.kind in "iuf":
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path}: got {value!r}; accepted: {accepted}")
    return float(value)



def _index_counts(trainer: Any) -> dict[int, int]:
    """The update count of each parameter index of ``trainer``'s optimizer (the highest over its
    devices' counts, ``Optimizer._all_index_update_counts``); empty where it keeps none yet."""
    every = getattr(getattr(trainer, "_optimizer", None), "_all_index_update_counts", None)
    merged: dict[int, int] = {}
    if isinstance(every, dict):
        for counts in every.values():
            if isinstance(counts, dict):
                for k, v in counts.items():
                    merged[k] = max(merged.get(k, 0), int(v))
    return merged


class _Snapshot(NamedTuple):
    """The parameters copied at the end of train step ``step`` (before its ``trainer.step``), for the
    update ratios of the next step (:meth:`TripwireHook._offer_optimizer`): ``counts``, the registered
    Trainers' update counts then; ``copies``, ``{name: (parameter, its values copied on its device)}``."""

    step: int
    counts: tuple[int, ...]
    copies: dict[str, tuple[Any, Any]]
    param_counts: dict[int, int]  # (id(parameter) -> its own update count then; see _param_counts)


def _check_inputs(inputs: Any) -> None:
    """``end_step``'s ``inputs``: None, an NDArray, or a non-empty list or tuple of NDArrays (one per
    device); anything else is a ConfigError (checked at every step: a mistake shows at once, not at
    the first save step)."""
    if inputs is None or isinstance(inputs, nd.NDArray):
        return
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(x, nd.NDArray) for x in inputs):
        return
    raise ConfigError(f"end_step.inputs: got {type(inputs).__name__}; accepted: an NDArray (the batch the net is "
                      "given), a list of NDArrays (one per device, as split_and_load makes) or None")


def _joined(inputs: Any) -> Any:
    """The batch's inputs, or a layer's outputs on several devices, as one NDArray: a list's arrays
    flattened and joined on the first one's device (only at the save steps that save them); one
    array as it is."""
    if isinstance(inputs, nd.NDArray):
        return inputs
    if len(inputs) == 1:
        return inputs[0]
    ctx = inputs[0].context
    return nd.concat(*[nd.reshape(x.as_in_context(ctx), shape=(-1,)) for x in inputs], dim=0)


#: How far a row of probabilities may be from summing to 1, or a row of log-probabilities' log-sum-exp
#: from 0, in the loss/output check (float32 softmax rows are within 1e-6).
_ROW_TOLERANCE = 1e-3


def _loss_output_mismatch(loss_block: Any, pred: Any) -> tuple[str, dict[str, Any]] | None:
    """The message and details of a ``SoftmaxCrossEntropyLoss`` that does not fit the net's outputs
    ``pred`` (the first prediction of a training), or None. ``from_logits=False`` (the default)
    applies log_softmax: outputs whose every row lies in [0, 1] and sums to 1 are probabilities
    already (a softmax at the end of the net), whose softmax is flat, so the loss keeps a floor of
    about ``log(e + C - 1) - 1`` for C classes (1.46 for 10) and the gradients shrink, however
    well the net classifies (trial 28c: under Adam it trained to that floor and no rule fired).
    ``from_logits=True`` takes ``-pred[label]`` as the loss: the outputs must be log-probabilities,
    each row's log-sum-exp 0 (raw logits then make a loss without lower bound). One small host read
    (three numbers), once a training."""
    if not isinstance(loss_block, gluon.loss.SoftmaxCrossEntropyLoss) or not isinstance(pred, nd.NDArray):
        return None
    if isinstance(pred, nd.sparse.BaseSparseNDArray) or pred.ndim < 1 or not pred.size:
        return None
    axis = int(getattr(loss_block, "_axis", -1))
    try:
        classes = int(pred.shape[axis])
    except IndexError:
        return None
    if classes < 2:
        return None
    from_logits = bool(getattr(loss_block, "_from_logits", False))
    sparse = bool(getattr(loss_block, "_sparse_label", True))
    x = pred.astype("float64")
    top = nd.max(x, axis=axis, keepdims=True)
    lse = nd.log(nd.sum(nd.exp(x - top), axis=axis)) + nd.squeeze(top, axis=axis)
    low, high, off_one, off_zero = nd.concat(nd.min(x).reshape((1,)), nd.max(x).reshape((1,)),
                                             nd.max(nd.abs(nd.sum(x, axis=axis) - 1)).reshape((1,)),
                                             nd.max(nd.abs(lse)).reshape((1,)), dim=0).asnumpy().tolist()
    probabilities = low >= -1e-6 and high <= 1 + 1e-6 and off_one <= _ROW_TOLERANCE
    name = f"SoftmaxCrossEntropyLoss(from_logits={from_logits}{'' if sparse else ', sparse_label=False'})"
    details: dict[str, Any] = {"loss": type(loss_block).__name__, "from_logits": from_logits, "sparse_label": sparse,
                               "classes": classes, "axis": axis, "min": low, "max": high}
    if not from_logits and probabilities:
        floor = math.log(math.e + classes - 1) - 1
        message = (f"the loss {name} applies log_softmax to the net's outputs, but they are probabilities already: "
                   f"every row of the first batch lies in [0, 1] and sums to 1 (a softmax at the end of the net). "
                   f"The loss then reads a softmax of probabilities, which is nearly flat: the gradients shrink "
                   f"and the loss keeps a floor of about {floor:.2f} for {classes} classes however well the net "
                   f"classifies. Remove the softmax from the net (output the logits), or end it in log_softmax and "
                   f"use SoftmaxCrossEntropyLoss(from_logits=True)")
        details["kind"] = "probabilities under log_softmax"
        return message, details
    if from_logits and off_zero > _ROW_TOLERANCE:
        what = ("probabilities (every row in [0, 1], summing to 1: a softmax at the end of the net)" if probabilities
                else f"not log-probabilities (a row's log-sum-exp is up to {off_zero:.3g} from 0: raw logits?)")
        message = (f"the loss {name} takes the net's outputs as log-probabilities (the loss is -output[label]), but "
                   f"the outputs of the first batch are {what}; the loss then has no meaning as a cross-entropy "
                   f"(on logits it falls without bound as the label's logit grows). End the net in log_softmax, or "
                   f"output the logits and use SoftmaxCrossEntropyLoss() (from_logits=False), which applies "
                   f"log_softmax itself")
        details["kind"] = "not log-probabilities under from_logits=True"
        details["logsumexp_off"] = off_zero
        return message, details
    return None


__all__ = ["TripwireHook", "step_learning_rate"]
