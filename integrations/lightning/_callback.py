"""``TripwireCallback``: the Lightning adapter (thin: extract tensors, call the session, set the
stop flag). What it captures and when is described in docs/lightning.md."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import subprocess
import sys
import threading
import weakref
from collections.abc import Container, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from lightning.pytorch.trainer.states import TrainerStatus
from lightning.pytorch.utilities.exceptions import SIGTERMException

from tripwire._config import Config, check_overrides, load_config
from tripwire._errors import ConfigError, TrainingStopped
from tripwire._finding import Decision, Finding, log_line
from tripwire._history import History
from tripwire._format import RUN_FILE
from tripwire._run import CHECK_SOURCE
from tripwire._session import _EXITED, _TERMINATED, Session, StepPlan, check_config, exits_cleanly, unregistered_rule_notes_muted
from tripwire._validate import check_trial, did_you_mean, keyword_parameters
from tripwire.rules import build_rules
from tripwire.integrations._provides import PROVIDES as _PROVIDES
from tripwire.tune._trial import (TrialLike, note_outside_stop, note_rule_stop, note_tuner_stop, reached_max_resource,
                                  trial_facts)

from .._hooks import defines_own, ended_as, say_stop, stopper_entry, stopper_said
from .. import _torch
from .._torch import ActivationCapture, TorchBackend, background_allowed, bind_activation_kinds, clean_name, learning_rates, offer, param_kind, scaler_found_inf, snapshot, update_ratios

logger = logging.getLogger("tripwire")

PROVIDES = _PROVIDES["lightning"]
"""The kinds this callback captures (a rule or collection needing none of them is refused)."""

_STATE_VERSION = 1
_INPUT_KEYS = ("inputs", "input", "x", "features", "image", "images")
_LABEL_KEYS = ("labels", "label", "y", "target", "targets")
_ACTIVATION_KINDS = ("activations", "activation_inputs", "relu_outputs")
#: Under manual optimization the planned length is scaled by the optimizer steps per batch seen in
#: the fit's first batches, this many of them (trial 21a).
_LEARN_BATCHES = 16


_PREDICTION_KEYS = ("predictions", "preds", "logits", "y_hat")
_COMPILE_DOC = 'docs/lightning.md, "torch.compile"'


def _rules_reading(session: Session | None, collections: Container[str]) -> list[str]:
    """The names of the session's rules that read one of ``collections`` (sorted)."""
    return sorted({r.name for r in (session.rules if session is not None else ())
                   for req in r.requirements() if req.collection in collections})


def _compiled(module: torch.nn.Module) -> list[tuple[torch.nn.Module, frozenset[str]]] | None:
    """The parts of the LightningModule compiled with ``torch.compile`` (trial 22c): ``None`` for the
    whole module (it reaches the callback unwrapped by Lightning, ``_compiler_ctx`` set), else each
    compiled submodule's wrapper with the (clean) names of its leaf layers; empty: nothing compiled."""
    if getattr(module, "_compiler_ctx", None) is not None:
        return None
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")  # (never imported: nothing was compiled)
    optimized = getattr(eval_frame, "OptimizedModule", None)
    if optimized is None:
        return []
    # (by identity: a layer reachable under another name too, self.plain = the compiled module's
    # _orig_mod, is hooked and named under its first name)
    leaves = [(clean_name(n), id(sub)) for n, sub in module.named_modules()
              if n and not any(True for _ in sub.children())]
    regions = []
    for m in module.modules():
        if isinstance(m, optimized):
            inner = {id(sub) for sub in m.modules()}
            regions.append((m, frozenset(n for n, key in leaves if key in inner)))
    return regions


def _fitting(trainer: Trainer) -> bool:
    """Whether ``trainer`` runs a fit (its validations too), not a ``validate()``, ``test()`` or
    ``predict()`` on its own, which has no training to stop (a Trainer with no state: a fit)."""
    fn = getattr(getattr(trainer, "state", None), "fn", None)
    return fn is None or str(getattr(fn, "value", fn)) == "fit"


def _no_labels_by_layout(kind: str, batch: Any, mode: str) -> bool:
    """Whether a batch holds no labels by its layout (:meth:`TripwireCallback.split_batch`'s: a bare
    tensor is the inputs, a one-element tuple or list too), or ``mode`` has none (predict)."""
    return kind == "labels" and (mode == "predict" or isinstance(batch, torch.Tensor) or (
        isinstance(batch, (list, tuple)) and len(batch) < 2))


def _batch_layout(batch: Any) -> str:
    """A batch's type as a WARNING names it: a mapping's keys (the first 6), a sequence's length."""
    name = type(batch).__name__
    if isinstance(batch, Mapping):
        keys = [repr(k) for k in list(batch)[:6]]
        more = f", ... {len(batch)} in all" if len(batch) > 6 else ""
        return f"a {name} with keys {', '.join(keys)}{more}" if keys else f"an empty {name}"
    if isinstance(batch, (list, tuple)):
        return f"a {name} of {len(batch)}: {', '.join(type(b).__name__ for b in batch[:6])}" + (
            ", ..." if len(batch) > 6 else "")
    return f"a {name}"


#: per module class: whether its ``forward`` reads ``self.training`` (:func:`_mode_effect`)
_FORWARD_READS_TRAINING: dict[type, bool] = {}


def _mode_effect(module: torch.nn.Module) -> str | None:
    """What ``module`` itself (not its submodules) does otherwise in eval mode than in training, or
    None where nothing: ``"dropout"`` (every ``nn.Dropout*`` with ``p > 0``; an RNN or
    ``MultiheadAttention`` with ``dropout > 0``), ``"norm"`` (a BatchNorm or InstanceNorm that
    tracks running statistics: in eval it normalises with them; one that does not uses the batch's
    in both modes), ``"other"`` (any other module whose ``forward`` reads ``self.training``: timm's
    DropPath, torchvision's StochasticDepth, a module of your own). Attribute reads on the host
    only."""
    if isinstance(module, torch.nn.modules.dropout._DropoutNd):
        return "dropout" if float(module.p) > 0 else None
    if isinstance(module, torch.nn.modules.batchnorm._NormBase):
        return "norm" if module.running_mean is not None else None
    if isinstance(module, (torch.nn.RNNBase, torch.nn.MultiheadAttention)):
        return "dropout" if float(module.dropout) > 0 else None
    cls = type(module)
    reads = _FORWARD_READS_TRAINING.get(cls)
    if reads is None:
        code = getattr(getattr(cls, "forward", None), "__code__", None)
        reads = _FORWARD_READS_TRAINING[cls] = code is not None and "training" in code.co_names
    return "other" if reads else None


@dataclass
class _EvalModules:
    """The modules of a LightningModule in eval mode whose own computation differs in training
    (:func:`_mode_effect`), as ``"name (Class)"``, by whether they can learn, with the modules
    ``.eval()`` was called on (the topmost in eval mode above them; ``""``: the LightningModule)."""

    trainable: list[tuple[str, str]] = field(default_factory=list)  # (label, effect)
    frozen: list[tuple[str, str]] = field(default_factory=list)
    trainable_roots: list[str] = field(default_factory=list)
    frozen_roots: list[str] = field(default_factory=list)


def _in_eval_mode(pl_module: torch.nn.Module, held: set[int] | None) -> _EvalModules:
    """:class:`_EvalModules` of ``pl_module`` (its ``training`` flags; nothing read on the device).
    A parameter learns when it has ``requires_grad`` and an optimizer holds it (``held``: the ids
    of the optimizers' parameters; None: no optimizer holds any of the module's, so
    ``requires_grad`` alone). A module counts as frozen when none of its own parameters learns or,
    having none (a Dropout, a BatchNorm without affine parameters), when none of the parameters
    under its topmost eval-mode ancestor (the module ``.eval()`` was called on) does: a pretrained
    backbone kept in eval on purpose, an EMA copy of the model."""
    found = _EvalModules()

    def learns(p: torch.Tensor) -> bool:
        return p.requires_grad and (held is None or id(p) in held)

    roots: dict[str, tuple[str, bool]] = {}  # an eval-mode module's name -> (its eval root's name, frozen)
    for name, module in pl_module.named_modules():
        if module.training:
            continue
        parent = name.rpartition(".")[0] if name else None
        root = roots.get(parent) if parent is not None else None
        if root is None:
            params = list(module.parameters())
            root = (name, bool(params) and not any(map(learns, params)))
        roots[name] = root
        effect = _mode_effect(module) if name else None
        if effect is None:
            continue
        own = list(module.parameters(recurse=False))
        frozen = not any(map(learns, own)) if own else root[1]
        label = f"{name} ({type(module).__name__})"
        (found.frozen if frozen else found.trainable).append((label, effect))
        kept = found.frozen_roots if frozen else found.trainable_roots
        if root[0] not in kept:
            kept.append(root[0])
    return found


def _eval_effects(effects: set[str], others: list[str]) -> str:
    """What eval mode changes in training, for the ``effects`` :func:`_mode_effect` named."""
    said = []
    if "dropout" in effects:
        said.append("dropout is off (no regularisation)")
    if "norm" in effects:
        said.append("BatchNorm/InstanceNorm normalise with their running statistics instead of the batch's, and do "
                    "not update them")
    if "other" in effects:
        said.append(f"{', '.join(others[:3])} take{'s' if len(others) == 1 else ''} the path their forward takes "
                    f"when self.training is False")
    return "; ".join(said)


def _shown(labels: list[str], first: int = 5) -> str:
    """The first ``first`` of ``labels``, and how many more."""
    return ", ".join(labels[:first]) + (f" and {len(labels) - first} more" if len(labels) > first else "")


def _predictions_in(outputs: Any) -> torch.Tensor | None:
    """Predictions a validation/test/predict step returned: a tensor with a batch dimension, one under
    ``predictions``/``preds``/``logits``/``y_hat`` in a returned mapping, or a returned tuple's first
    such tensor (``return logits, y``; trial 42a: a predict_step's dict or tuple stored nothing). Not a
    list's: a list of per-sample outputs (a detector's, a generator's) is no batch's predictions
    (trial 42g: sample 0's were stored as the batch's)."""
    if isinstance(outputs, Mapping):
        outputs = next((outputs[k] for k in _PREDICTION_KEYS if isinstance(outputs.get(k), torch.Tensor)), None)
    elif isinstance(outputs, tuple):
        outputs = next((o for o in outputs if isinstance(o, torch.Tensor) and o.ndim >= 1), None)
    return outputs if isinstance(outputs, torch.Tensor) and outputs.ndim >= 1 else None


@dataclass
class _Window:
    """One session step in progress: a train optimizer step (all micro-batches of a gradient
    accumulation window) or one eval/test/predict batch."""

    mode: str
    step: int
    plan: StepPlan
    added: set[str] = field(default_factory=set)
    before: list[torch.Tensor] = field(default_factory=list)
    after: list[torch.Tensor] = field(default_factory=list)
    grads: list[torch.Tensor] = field(default_factory=list)  # gradient copies (fits that change them in place)
    ratio_names: list[str] = field(default_factory=list)
    captured_batch: bool = False
    forward_out: Any = None  # the LightningModule's own forward output (eval/test predictions)
    # where user code logs after this callback's batch end: the metrics read then, and the loop's
    # result collection, read again at the step's true end (see _offer_late_metrics)
    early: dict[str, Any] | None = None
    results: Any = None
    # a train step's loss as offered under "loss": the step's (the mean of its micro-batches') and its
    # last micro-batch's, which a value the module logs as "loss" is compared with (_offer_logged)
    loss: tuple[torch.Tensor, torch.Tensor] | None = None
    # a train step: whether a validation inside its gradient accumulation window took its plan out of
    # the session (_suspend_train: Session.suspend_step)
    suspended: bool = False
    # a train step: whether it asked for gradients, and whether fp16's GradScaler skipped an optimizer
    # step of it (no gradient captured: counted for the run's end, _say_scaler_skipped)
    grads_asked: bool = False
    grads_skipped: bool = False


def _checkpointed_out_dir(state: Mapping[str, Any]) -> str:
    """The run a checkpoint's state continues: its ``out_dir`` as it was given (a relative one is read
    from the working directory), unless no run is there and one is at the absolute path the
    checkpoint also holds (trial 38d: a fit with ``out_dir="runs/x"`` resumed from another directory
    wrote a second run under it, ``elsewhere/runs/x``, its rules' history empty)."""
    given = str(state["out_dir"])
    absolute = state.get("out_dir_absolute")
    if (isinstance(absolute, str) and not os.path.isabs(given) and not os.path.exists(os.path.join(given, RUN_FILE))
            and os.path.exists(os.path.join(absolute, RUN_FILE))):
        return absolute
    return given


_EVALUATION_MODES = {"validate": "eval", "test": "test", "predict": "predict"}
"""The stages that train nothing, and the mode whose steps each counts (see Session.count_on)."""


class TripwireCallback(Callback):
    """Capture tensors of a Lightning fit, apply tripwire's rules, and stop when one fires.

    ``config``: a YAML path, a mapping or None (defaults); ``overrides``: keyword overrides of the
    config (``out_dir=``, ``rules=[...]``, ``save_interval=``, ``collections=``, ... see
    :meth:`tripwire.Config.with_overrides`). ``trial``/``trial_metric``: a tuning trial (anything
    with ``report(step, value) -> bool``) and the logged metric to report at each validation end
    (step: the epoch number, from 1); ``True`` stops the fit.

    After ``fit``: ``findings`` (every finding this callback's fits and stages made; a callback that
    resumed a fit from a checkpoint starts with none, and the run holds every finding:
    ``tripwire.open_run(out_dir).findings``), ``stopped_by`` (the finding that stopped training, or
    None), ``stop_reason`` (why training stopped: a rule's finding, the tuner, another rank's rule, or
    ``trainer.should_stop`` set by another callback, such as EarlyStopping's own reason, or by the
    LightningModule; None when nothing stopped it), ``history`` (the :class:`tripwire.History` of the
    callback's last session, or None before one), ``trial_stopped`` (the tuner stopped the fit) and
    ``out_dir`` (where the run is stored; read it with ``tripwire.open_run(out_dir)``). ``close()``
    ends a run left open; Lightning's teardown ends it at every stage's end.

    A rule's stop sets ``trainer.should_stop``: the fit ends after the current batch, and Lightning
    still runs the epoch's validation on the weights as they are then (its own rule for an early
    stop); the callback records that validation as any other (docs/lightning.md, "Stopping"). A
    ``validate()``, ``test()`` or ``predict()`` run on its own has no training to stop: a finding there
    asking ``stop_training`` is recorded and stops nothing (a WARNING says so; ``stopped_by`` stays
    None, and the run is not marked ``stopped`` for it).

    Two TripwireCallbacks in one Trainer need a distinct ``name=`` each: Lightning keeps a
    callback's state in checkpoints under its ``state_key``, which the name sets (``out_dir`` does
    not). ``Trainer(callbacks=[...])`` refuses two alike with a RuntimeError ("more than one
    stateful callback"), the callback's setup with a :class:`~tripwire.ConfigError` (those from
    ``LightningModule.configure_callbacks``, which Lightning lets through), before any training.
    """

    def __init__(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
        *,
        trial: TrialLike | None = None,
        trial_metric: str | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        check_overrides(type(self).__name__, overrides, keyword_parameters(type(self)))  # (trial 24h)
        with unregistered_rule_notes_muted():  # (check_config refuses an unknown rule: said once, trial 26h)
            self.config: Config = load_config(config, **overrides)
        check_config(self.config, framework="lightning", provides=PROVIDES)  # rules, actions, what they need: now, not at fit
        check_trial(trial, trial_metric, example="the name of a metric logged by validation, e.g. 'val_loss'")
        self.trial = trial
        self.trial_metric = trial_metric
        self.trial_stopped = False
        self._trial_pending: int | None = None  # an epoch whose last validation came before its end
        # the epoch-level metrics the last validation logged (None: not known, trainer.callback_metrics)
        self._val_metrics: dict[str, Any] | None = None
        self._stop_reason: str | None = None  # why the last fit stopped (kept by a later test's run end)
        self._backend = TorchBackend()
        self._session: Session | None = None
        self._history: History | None = None  # the last session's (kept after it closed)
        self._out_dir: str | None = self.config.out_dir
        self._carry: dict[str, Any] | None = None  # session state between fits / from a checkpoint
        self._stage: str | None = None  # the trainer's current stage (setup's), for load_state_dict
        self._findings: list[Finding] = []
        self._stopped_by: Finding | None = None
        self._pending_stop = False
        self._stopped = False
        # under DDP: the last train step ended was a save step, so the next train step's end combines the
        # stop decision across ranks too (a save step reduced in the background has its findings then)
        self._combine_next = False
        # under DDP with manual optimization: stop decisions combined at every batch's end (on_train_start)
        self._batch_sync = False
        # trainer.should_stop was found set at the fit's end by no stop of this callback's (EarlyStopping's)
        self._outside_stop = False
        self._earlier_last = -1  # the last train step of an earlier fit through this callback (a new fit's warning)
        self._epoch_first_step = -1  # trainer.global_step when this epoch began
        self._said_no_step = False
        self._said_spawned = False  # (see _say_spawned_run)
        self._said_foreign = False  # (see _say_foreign_optimizer)
        self._said_unheld = False  # (see _say_unheld_parameters)
        self._looked_unheld = False  # the first optimizer step looked for them (later: save steps only)
        # (see _note_gradless_step): said once; the train step whose optimizer step found no parameter
        # of the module with a gradient, until its batch end; the parameter that had one last time
        self._said_gradless = False
        self._gradless_step: int | None = None
        # (see _say_eval_modules): per fit, what was said ("warning", "info"), and whether the next train
        # batch end looks (set at each epoch's start)
        self._said_eval: set[str] = set()
        self._eval_look = False
        self._grad_probe: torch.Tensor | None = None
        self._train: _Window | None = None
        self._eval: _Window | None = None
        self._cut = False  # a validation came inside the train step in progress (see _suspend_train)
        self._said_split: set[str] = set()  # the modes whose batches split_batch found nothing wanted in
        self._last_train_step: int | None = None
        self._claimed: str | None = None  # a default out_dir this callback created (setup), until used
        self._epoch_summary: int | None = None  # the last step of an epoch whose epoch-level metrics are due
        # the train step in progress: the sum of its micro-batches' losses and their number
        self._loss_sum: torch.Tensor | None = None
        self._loss_count = 0
        self._loss_last: torch.Tensor | None = None  # the last micro-batch's loss of the step in progress
        self._said_logged_loss = False  # a logged "loss" other than the returned one was said (_offer_logged)
        # a quiet train step in progress (nothing due: Session.quiet_until), and the end of the
        # quiet range with whether the loss is kept there (every_step)
        self._quiet: int | None = None
        self._quiet_to = -1
        self._fence_late = False  # fence at on_before_zero_grad, not at the batch start (see on_train_start)
        self._weights_in_flight = False  # the last train save step offered weights: fence at the batch start
        self._weight_copies: list[torch.Tensor] | None = None  # (see _offer_weights)
        self._loss_owned = False  # quiet steps keep the loss without a copy (see on_train_start)
        self._quiet_keeps_loss = False
        self._last_trial_step = 0
        self._acts = ActivationCapture()
        # torch.compile (trial 22c): whether the model is compiled; whether this callback set
        # torch._dynamo.config.skip_nnmodule_hook_guards = False for the stage (restored at _close);
        # per (mode, due collections) the most layers a save step's hooks caught; per mode the
        # save steps whose hooks caught nothing or fewer layers (first step, count, collections)
        self._compiled = False
        self._regions: list[tuple[torch.nn.Module, frozenset[str]]] | None = []  # (see _compiled)
        self._set_hook_guards = False
        self._caught: dict[tuple[str, int], int] = {}
        self._lost: dict[str, tuple[int, int, tuple[str, ...]]] = {}
        self._forward_hook: Any = None  # on the LightningModule, only during eval/test save steps wanting predictions
        self._param_names: dict[int, str] = {}
        self._params: list[tuple[str, torch.Tensor, str]] = []  # (name, parameter, kind)
        self._params_due = False  # (the parameters looked at again at the epoch's first save step: _note_grown)
        self._snapshots: list[torch.Tensor] | None = None  # parameter copies reused from step to step
        self._late: _torch.LateValues | None = None  # the last save step's update ratios (see _offer_ratios)
        self._prior_stop: tuple[int, Finding | None, str | None] | None = None  # (see setup and teardown)
        self._grad_copies: list[torch.Tensor] | None = None  # gradient copies reused from save step to save step
        # whether the optimizer kind is captured in full (learning rates, update ratios), or only the loss
        # scale (optimizer_read_in_full: only rules that read it optionally ask for it); set per session
        self._full_optimizer = True
        # trial 30a F2: this session's train save steps that asked for gradients, those of them whose
        # gradients fp16's GradScaler skipped (none captured), and the last loss scale read
        self._grad_saves = 0
        self._skipped_saves = 0
        self._last_scale: float | None = None
        # user code runs after this callback's on_train_batch_end: a save step of weights ends at
        # the next hook (trial 21a), held here until then as (window, trainer)
        self._defer_end = False
        self._deferred: tuple[_Window, Trainer] | None = None
        # per mode: user code runs after this callback's on_{validation,test}_batch_end (trial 23e)
        self._eval_defers: dict[str, bool] = {}
        # manual optimization: batches left to learn the optimizer steps per batch from, and
        # (global_step at the fit's start, batches seen) (trial 21a)
        self._learn_batches = 0
        self._learn_from = (0, 0)
        # the stage this callback was last set up for: (its Trainer, the thread that runs it, the
        # stage); while that Trainer runs in another thread, another Trainer's stage is refused
        # (see _refuse_if_busy)
        self._stage_run: tuple[weakref.ref[Trainer], threading.Thread, str] | None = None
        self._ended: str | None = None  # how the run last ended (its end marker's status; see __repr__)
        # (rule, mode, step) of the findings that asked a stop in a validate/test/predict run on its own,
        # said once each (_no_training_to_stop); a stage's own
        self._unstopped: set[tuple[str, str, int]] = set()
        # the epoch of the validation at which this fit's stop was agreed (trainer.current_epoch; None for
        # a stop at a train step), and each other callback's stop request (EarlyStopping's stopped_epoch,
        # stopping_reason_message) as the fit found it at its start: another callback's request at the
        # same validation is named in the stop reason (trial 32d F10)
        self._stop_epoch: int | None = None
        self._requests_before: dict[int, tuple[Any, Any]] = {}

    # ------------------------------------------------------------------------------ results
    def __getstate__(self) -> dict[str, Any]:
        """What a copy takes (``pickle``, ``copy.deepcopy``; ``ddp_spawn`` copies the callback into each
        process): all but the stage running through this callback, a weak reference to its Trainer and
        its thread (trial 36q: a callback that had run a stage could not be copied, and a ``ddp_spawn``
        fit after a first fit failed with "cannot pickle 'weakref.ReferenceType' object")."""
        state = dict(self.__dict__)
        state["_stage_run"] = None
        return state

    def __repr__(self) -> str:
        """``TripwireCallback(out_dir='runs/x', rules=['default'], STATE, findings=N[, stopped_by='rule'])``,
        STATE: ``not fitted`` (no stage ran yet), ``fitting, N train steps`` (a ``trainer.fit`` in
        progress; ``in trainer.validate()``, ... for another stage) or ``run <status>`` (its end marker's:
        ``complete``, ``stopped``, ``failed``)."""
        session = self._session
        held = self._stage_run
        trainer = held[0]() if held is not None else None
        running = (held[2] if trainer is not None and getattr(getattr(trainer, "state", None), "status", None)
                   == TrainerStatus.RUNNING else None)
        if session is not None or running is not None:
            # (a fit's sanity validation runs before its session: trial 38d, "not fitted" inside trainer.fit)
            # (without a session: a sanity validation before it, or a close() in the fit, trial 40c F1: "0
            # train steps" at step 5; the trainer's count then)
            steps = session.mode_steps["train"] if session is not None else int(getattr(trainer, "global_step", 0) or 0)
            stage = self._stage if session is not None else running
            state = f"fitting, {steps} train steps" if stage == "fit" else f"in trainer.{stage}()"
        elif self._ended is not None:
            state = f"run {self._ended}"
        else:
            state = "not fitted"
        rules = [spec.shown_name for spec in self.config.rules]
        parts = [f"out_dir={self._out_dir!r}", f"rules={rules!r}", state, f"findings={len(self.findings)}"]
        if self.stopped_by is not None:
            parts.append(f"stopped_by={self.stopped_by.rule!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    @property
    def findings(self) -> list[Finding]:
        """Every finding this callback made so far (all its fits and stages); a callback that resumed a
        fit from a checkpoint starts with none (the run holds every finding:
        ``tripwire.open_run(out_dir).findings``)."""
        current = self._session.findings if self._session is not None else []
        return self._findings + list(current)

    @property
    def stopped_by(self) -> Finding | None:
        """The finding that stopped training (None when no rule stopped it, and after a ``validate()``,
        ``test()`` or ``predict()`` run on its own, which has no training to stop)."""
        return self._stopped_by

    @property
    def stop_reason(self) -> str | None:
        """Why the last fit stopped, as its run's end marker says it (:attr:`tripwire.Session.why_stopped`):
        the finding of the rule that stopped it (this rank's, or the ``distributed_stop`` naming another
        rank's), the tuner's reason, or where another callback or the LightningModule set
        ``trainer.should_stop`` (EarlyStopping, a Timer), ``"trainer.should_stop was set outside tripwire
        (train step N): ..."`` with EarlyStopping's own reason; None when nothing stopped it (a trial stopped at its
        ``max_resource`` ran its whole budget: None). A rule's stop at a validation where another callback
        (EarlyStopping) asked to stop at that validation too: the finding, then
        ``(EarlyStopping(monitor='val_loss') asked to stop in the same epoch (18) too: <its reason>)``, once
        the fit has ended. Known as soon as the stop
        is; a new fit through this callback starts at None, and a ``validate``/``test``/``predict`` after a
        stopped fit keeps it."""
        session = self._session
        if session is not None and session.why_stopped is not None:
            return session.why_stopped
        return self._stop_reason

    @property
    def history(self) -> History | None:
        """The :class:`tripwire.History` the rules read: the live session's during a stage, the last
        session's after it (a fit's, or that of a ``validate``/``test``/``predict`` after it, which holds
        the fit's records read back from the run); None before the callback's first session."""
        return self._session.history if self._session is not None else self._history

    @property
    def out_dir(self) -> Path | None:
        """Where the run is stored, a :class:`pathlib.Path` as on every integration (trial 27i: a
        ``str`` here and on Keras, a ``Path`` on XGBoost and MXNet); known once the trainer set the
        callback up (None before)."""
        return Path(self._out_dir) if self._out_dir is not None else None

    def close(self, status: str | None = None) -> None:
        """End the run if one is open: what Lightning's ``teardown`` (or ``on_exception``) does at
        every stage's end, so after a ``fit``, ``validate``, ``test`` or ``predict`` there is nothing
        left to end and this does nothing. ``status``: ``'complete'``, ``'stopped'`` or ``'failed'``;
        None: ``stopped`` when a rule or the tuner stopped training, else as the session's close
        decides. Called during a stage, it ends the run there; a later hook of the stage opens a
        session that continues it. Refuses another status with a ConfigError, before ending anything."""
        if status not in (None, "complete", "stopped", "failed"):
            raise ConfigError(f"TripwireCallback.close: status={status!r}; accepted: None, 'complete', 'stopped', "
                              f"'failed'")
        self._close(status)

    @property
    def session(self) -> Session | None:
        """The live session during a fit (None outside one)."""
        return self._session

    @property
    def state_key(self) -> str:
        key = self.__dict__.get("_state_key")  # Lightning reads it at every hook call
        if key is None:
            # (not out_dir: a resumed fit's new callback without one, or with another one, must
            # find its state; two callbacks in one trainer need distinct names)
            key = self._state_key = self._generate_state_key(name=self.config.name)
        return key

    # ---------------------------------------------------------------------------- lifecycle
    @property
    def log(self) -> Any:
        """The LightningModule's ``log``, which the Trainer hands every callback as a stage starts."""
        return self.__dict__.get("_module_log")

    @log.setter
    def log(self, fn: Any) -> None:
        # Lightning's Trainer sets it on every callback in _run (_attach_model_logging_functions): the
        # first point of a stage where a callback can act, before the strategy sets up its processes
        # (the ddp process group; setup() comes after it) but after its launcher started the other ranks
        trainer = getattr(getattr(fn, "__self__", None), "_trainer", None)
        if self._busy_in(trainer if isinstance(trainer, Trainer) else None) is not None:
            return  # (a stage running in another thread keeps its module's log; setup() refuses this one)
        self.__dict__["_module_log"] = fn
        if self.trial is not None:
            if isinstance(trainer, Trainer):
                _refuse_processes(trainer, self.trial)

    def _busy_in(self, trainer: Trainer | None) -> tuple[str, str] | None:
        """(the stage, its thread's name) of a stage of another Trainer through this callback that runs
        now in another thread (the Trainer's status still ``running``, its thread alive), else None
        (none runs, or it runs in this very thread: a call nested in it)."""
        held = self._stage_run
        if held is None:
            return None
        ref, thread, stage = held
        running = ref()
        if running is None or running is trainer or thread is threading.current_thread() or not thread.is_alive():
            return None
        if getattr(getattr(running, "state", None), "status", None) != TrainerStatus.RUNNING:
            return None
        return stage, thread.name

    def _refuse_if_busy(self, trainer: Trainer, stage: str) -> None:
        """Refuse a stage of this Trainer (``fit``, ``validate``, ``test``, ``predict``) while another
        Trainer's stage through this callback runs in another thread (the notebook pattern: a fit
        started in a ``threading.Thread``, the fit cell run again with the same callback): a
        ConfigError naming that thread, at this stage's setup, before anything of the running one is
        touched; its ``on_exception`` (Lightning calls it for the refused stage) ends nothing (trial
        30f F1: the second fit failed with an internal ``quiet_step: ... not quiet`` error)."""
        busy = self._busy_in(trainer)
        if busy is None:
            return
        running, thread = busy
        out_dir = self._out_dir
        raise ConfigError(
            f"callbacks: this trainer.{stage}() was given a TripwireCallback (out_dir "
            f"{out_dir if out_dir is not None else 'not claimed yet'!r}) that a trainer.{running}() running in "
            f"thread {thread!r} is using, and one callback records one stage at a time; accepted: wait until that "
            f"{running} ends (join its thread) and run this one with the callback then, or give this Trainer a new "
            f"TripwireCallback with an out_dir of its own (the running {running} is left as it is; docs/lightning.md)")

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        stage = str(getattr(stage, "value", stage))
        self._refuse_if_busy(trainer, stage)  # (first: nothing of a stage running in another thread is touched)
        self._stage_run = (weakref.ref(trainer), threading.current_thread(), stage)
        if self.trial is not None:  # (where Lightning set no log first: another version)
            _refuse_processes(trainer, self.trial)
        self._check_distinct_state_key(trainer)  # (first: before a default out_dir is claimed)
        self._stage = str(getattr(stage, "value", stage))
        self._eval_defers = {}  # (this stage's callbacks and module: see _eval_defer)
        self._unstopped = set()
        if stage == "fit":
            # A fit's stop is its own: the last fit's carried over and ended the next one after a
            # step (trial 17a). A new training (a new Trainer, global step 0) starts with fresh rules
            # too; a fit resumed from a checkpoint gets its state after this (load_state_dict).
            # (the last fit's stop, given back at this fit's end where it trains nothing: trial 36q, the notebook
            # cell run again after a stopped fit read stopped_by None while the run still said stopped)
            self._prior_stop = (trainer.global_step, self._stopped_by, self._stop_reason)
            self._pending_stop = self._stopped = self.trial_stopped = self._outside_stop = False
            self._combine_next = False
            self._stopped_by = None
            self._trial_pending = None
            self._stop_reason = None
            self._stop_epoch = None
            trained = int((self._carry or {}).get("mode_steps", {}).get("train", 0))
            if trainer.global_step == 0 and self._carry is not None and trained > 0:
                self._earlier_last = trained - 1  # (for the warning)
                self._carry = None
            # (after a trainer.validate() or test() with no training, the run continues: its eval
            # steps count on, and no "already holds records of an earlier training" warning; 18h)
        if self._out_dir is None and trainer.global_rank == 0:  # (a default one is claimed: rank 0's only)
            self._out_dir = str(self.config.resolved_out_dir())
            self._claimed = self._out_dir if self.config.out_dir is None and not self.config.name else None
        if trainer.world_size > 1:  # every rank writes into rank 0's directory
            self._out_dir = trainer.strategy.broadcast(self._out_dir, src=0)
        self._regions = _compiled(pl_module)
        self._compiled = self._regions is None or bool(self._regions)
        if self._compiled:
            self._guard_hooks(self._stage)

    def _check_distinct_state_key(self, trainer: Trainer) -> None:
        """Refuse a Trainer holding another callback with this one's ``state_key`` (two
        TripwireCallbacks with the same ``name``, None included), at every stage's setup, before
        anything runs. ``Trainer(callbacks=[...])`` refuses them itself, with a RuntimeError ("more
        than one stateful callback"); those added later (``LightningModule.configure_callbacks``,
        ``trainer.callbacks.append``) it let train, and a checkpoint kept one state under the shared
        key, the last callback's, which a resumed fit gave to both (trial 26a). ``out_dir`` does
        not tell them apart: a resumed fit's callback finds its state by its name alone."""
        key = self.state_key
        self._check_distinct_out_dir(trainer)
        alike = [cb for cb in getattr(trainer, "callbacks", None) or () if cb is not self
                 and getattr(cb, "state_key", None) == key]
        if not alike:
            return
        cls = type(self).__name__
        dirs = ", ".join(repr(str(d)) if d else "default"
                         for d in (getattr(cb, "out_dir", None) for cb in [self, *alike]))
        raise ConfigError(
            f"name: this Trainer holds {len(alike) + 1} {cls}s with name={self.config.name!r} (out_dir {dirs}), so "
            f"they share Lightning's callback state_key {key!r}: a checkpoint keeps one callback state under that key "
            f"(the last one's), and a fit resumed from it with ckpt_path= would give that state to both; accepted: a "
            f"distinct name= for each {cls} of one Trainer, e.g. {cls}(name=\"main\", ...) and {cls}(name=\"probe\", "
            f"...); out_dir does not tell them apart (a resumed fit finds each one's state by its name: keep the names "
            f"when resuming)")

    def _check_distinct_out_dir(self, trainer: Trainer) -> None:
        """Refuse a Trainer holding another TripwireCallback that names this one's ``out_dir``, at setup,
        before either touches the run (trial 38k: the second one's writer refused the directory at the
        first step, after the first had reopened the run, which then ended ``failed`` and held a
        training of its own, though nothing trained). Callbacks without an ``out_dir`` claim
        directories of their own."""
        mine = self._named_out_dir()
        if mine is None:
            return
        for cb in getattr(trainer, "callbacks", None) or ():
            if cb is self or not isinstance(cb, TripwireCallback) or cb._named_out_dir() != mine:
                continue
            raise ConfigError(
                f"out_dir: this Trainer holds two {type(self).__name__}s writing {str(self._out_dir or self.config.out_dir)!r} "
                f"(name={self.config.name!r} and name={cb.config.name!r}): one run has one writer per worker; accepted: "
                f"one callback per out_dir (give each its own out_dir, or leave it out for a new directory each)")

    def _named_out_dir(self) -> str | None:
        """This callback's ``out_dir`` resolved, where it is given or known already (else None)."""
        given = self._out_dir or self.config.out_dir
        if not given:
            return None
        try:
            return str(Path(os.path.expanduser(os.path.expandvars(str(given)))).resolve())
        except OSError:
            return None

    def _guard_hooks(self, stage: str) -> None:
        """trial 22c: a compiled model captured activations at the first save step only. TorchDynamo
        skips the guards on empty forward-hook dicts by default, so the graph compiled on the first
        step without hooks ran on every later save step too, and the hooks attached there never
        fired. Where activations are captured, ``torch._dynamo.config.skip_nnmodule_hook_guards``
        is set to False from here (before the sanity check compiles anything) to this stage's end
        (:meth:`_close` restores it): the graphs with and without hooks are told apart, compiled
        once each. Said at INFO; a value of False set by the user is left alone."""
        if self._set_hook_guards or not self._wants_activations():
            return
        import torch._dynamo.config as dynamo_config

        if dynamo_config.skip_nnmodule_hook_guards is not True:
            return
        dynamo_config.skip_nnmodule_hook_guards = False
        self._set_hook_guards = True
        logger.info(
            "tripwire: the model is compiled with torch.compile and activations are captured at save steps: "
            "torch._dynamo.config.skip_nnmodule_hook_guards is set to False until this trainer.%s() ends (then back "
            "to True), so that TorchDynamo runs the graph holding the forward hooks at save steps (%s)", stage, _COMPILE_DOC)

    def _restore_hook_guards(self) -> None:
        if self._set_hook_guards:
            import torch._dynamo.config as dynamo_config

            dynamo_config.skip_nnmodule_hook_guards = True
            self._set_hook_guards = False

    def _wants_activations(self) -> bool:
        """Does the config (its collections, or the collections its rules add) capture activations?"""
        if self._session is not None:
            cols = list(self._session.collections.values())
            needs: set[str] = set()
        else:
            cols = list(self.config.collections.values())
            try:
                needs = {req.collection for r in build_rules(self.config.rules) for req in r.requirements()}
            except Exception:  # pragma: no cover - (the session's creation says what is wrong)
                needs = set(_ACTIVATION_KINDS)
        return any(c.accepts_kind(k) for c in cols for k in _ACTIVATION_KINDS) or bool(needs & set(_ACTIVATION_KINDS))

    def _ensure_session(self, trainer: Trainer, pl_module: LightningModule) -> Session:
        if self._session is None:
            self._session = Session(
                self.config,
                framework="lightning",
                provides=PROVIDES,
                rank=trainer.global_rank,
                world_size=trainer.world_size,
                backend=self._backend,
                out_dir=self._out_dir or str(self.config.resolved_out_dir()),
            )
            self._out_dir = str(self._session.out_dir)
            self._say_spawned_run(trainer)
            self._history = self._session.history
            # the background reduction may read the step's tensors themselves: this callback
            # fences (_fence) at the next hook, before training can change them in place
            self._session.live_tensors = True
            if self.trial is not None:
                self._session.set_meta(trial=trial_facts(self.trial, self.trial_metric))
            self._acts.forget()  # the remembered layers are keyed by this session's due collections
            evaluating = _EVALUATION_MODES.get(self._stage or "fit")
            if self._carry is not None:
                # (a stage that trains nothing resumes no training: the run's steps after its checkpoint
                # are not run again, and no WARNING says they are; trial 38d)
                self._session.load_state_dict({**self._carry, "carried": True} if evaluating else self._carry)
            if evaluating:
                if self._carry is None:
                    # (an evaluation goes on with the run, no training of its own: trial 38j, Run.trainings and
                    # tripwire inspect said "a new training (judged alone)", and its records sat before training)
                    self._session.continues()
                self._session.count_on(evaluating)  # (its steps after the run's: trial 38d)
            bound = bind_activation_kinds(pl_module, self._session.rules)
            if bound:
                self._session.bind_inputs(bound)
            self._index_params(pl_module)
            self._grad_saves = self._skipped_saves = 0
            self._last_scale = None
        return self._session

    def _index_params(self, pl_module: LightningModule) -> None:
        """The module's parameters, as captured (names, kinds), and what the optimizer's values need."""
        self._params = [(name, p, param_kind(name)) for name, p in ((clean_name(n), p) for n, p in pl_module.named_parameters())]
        self._param_names = {id(p): n for n, p, _ in self._params}
        self._full_optimizer = self._session.optimizer_wanted(  # type: ignore[union-attr]
            ["lr/0", "lr/0.0"] + [f"update_ratio/{n}" for n, p, _ in self._params if p.requires_grad])

    def _note_grown(self, pl_module: LightningModule, step: int) -> None:
        """At an epoch's first save step (a list of the parameters costs some 50 us in a step's cold
        caches: once an epoch, not at every save step): where the module's parameters are no longer
        those indexed (a layer added
        during the fit, ``optimizer.add_param_group`` for it: progressive growing; a layer replaced by a
        new one of the same size, trial 43f: its old weights were stored under its name), they are indexed
        again, and the layers to hook for activations found again, so the new ones are captured from
        this step on; one INFO line says so. Trial 43e: a layer added at epoch 1 was never captured
        (weights, gradients, activations, update ratios), without a word."""
        now = list(pl_module.parameters())
        if len(now) == len(self._params) and all(p is q for p, (_, q, _) in zip(now, self._params)):
            return
        count = len(now)
        known = set(self._param_names)
        self._index_params(pl_module)
        self._acts.forget()
        added = [n for n, p, _ in self._params if id(p) not in known]
        shown = ", ".join(added[:6]) + (f" and {len(added) - 6} more" if len(added) > 6 else "")
        logger.info("tripwire: the LightningModule's parameters changed during the fit (%d now): captured from train "
                    "step %d on%s", count, step, f", the new ones included: {shown}" if added else "")
        world = getattr(getattr(pl_module, "trainer", None), "world_size", 1)
        if added and isinstance(world, int) and world > 1:
            # (trial 43m: their gradients differed across the ranks, and the replicas drifted apart, unsaid)
            logger.warning("tripwire: %d parameter(s) added to the LightningModule during a fit of %d processes (%s): "
                           "DistributedDataParallel registered the module's parameters when the fit began, so it does "
                           "not average their gradients across the ranks, and each rank's copy of them trains apart "
                           "(their recorded gradients differ by rank). Build every layer before the fit (or restart it "
                           "from a checkpoint after growing the model)", len(added), world, shown)

    def _say_spawned_run(self, trainer: Trainer) -> None:
        """A WARNING from rank 0, once, where the stage runs in processes that Lightning's launcher
        started for it (``ddp_spawn``, ``ddp_fork``, ``ddp_notebook``: its ``_MultiProcessingLauncher``)
        and no ``out_dir`` was given: each process works on a copy of this callback, and nothing of
        it comes back to the process that called ``trainer.fit()``, whose ``callback.out_dir`` stays
        None (trial 31b F4: nothing said where the run went). The line names the run's directory, as
        decided here, after a resumed fit took its checkpoint's, and the fix (``out_dir=``). That
        process runs no hook of this callback, so it is said from rank 0's process, on the same
        console; the launching process cannot learn the directory from it."""
        if self._said_spawned or self.config.out_dir is not None or trainer.global_rank != 0:
            return
        from lightning.pytorch.strategies.launchers import _MultiProcessingLauncher

        if not isinstance(getattr(trainer.strategy, "launcher", None), _MultiProcessingLauncher):
            return
        self._said_spawned = True
        stage = self._stage or "fit"
        logger.warning(
            "tripwire: strategy %r runs this trainer.%s() in processes of its own, each with a copy of the "
            "TripwireCallback, and nothing of them comes back: in the process that called trainer.%s(), "
            "callback.out_dir stays None and callback.findings empty. This run is stored in %s (read it with "
            "tripwire.open_run(%r)); to know where in that process, give TripwireCallback(out_dir=...)",
            _strategy_name(trainer.strategy), stage, stage, self._out_dir, self._out_dir)

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        session = self._ensure_session(trainer, pl_module)
        if trainer.world_size > 1:
            _check_same_schedule(trainer, session)
        # The background thread reads a step's tensors themselves (live) only where no user code
        # runs after this callback's batch end (the LightningModule's own on_train_batch_end, a
        # callback listed after this one): a weight clipped there through .data, unseen by the
        # version counters, raced the thread's copy (each run stored a different mix). It waits
        # for that copy at the next step's zero_grad (the copy overlaps the forward pass) only
        # under automatic optimization with no user code after this callback's batch start.
        # Under automatic optimization the step's loss is Lightning's own clone, which nothing
        # changes in place: quiet steps keep it without a copy (a manual training_step may return a buffer).
        # Where user code runs after this callback's batch end, a step that saves weights ends at
        # the next hook, after that code (_finish_train's defer; trial 21a).
        warm_up = getattr(session.backend, "warm_up", None)
        if warm_up is not None:  # (the reduction process ready by the first steps: see TorchBackend.warm_up)
            warm_up([p for _, p, _ in self._params], session.config.collections.values())
        automatic = bool(getattr(pl_module, "automatic_optimization", True))
        self._defer_end = _user_hook_after(trainer, pl_module, self, "on_train_batch_end", lightning_own=False)
        self._deferred = None
        session.live_tensors = not self._defer_end
        self._fence_late = automatic and not _user_hook_after(trainer, pl_module, self, "on_train_batch_start",
                                                              lightning_own=False)
        self._loss_owned = automatic
        last, self._earlier_last = max(session.mode_steps["train"] - 1, self._earlier_last), -1
        repeats = trainer.global_step <= last and not session._warned_repeat
        appended = False
        if repeats:
            session._warned_repeat = True  # (the session's own warnings speak of begin_step, of an earlier training)
            appended, session._appending = session._appending, False
            logger.warning(
                "tripwire: this fit starts at global step %d and %s already holds train steps up to %d (an earlier "
                "fit through this callback): its steps repeat those, several records each. To continue one training, "
                "resume it with trainer.fit(..., ckpt_path=...); to keep fits apart, give each its own out_dir (or its "
                "own callback)", trainer.global_step, session.out_dir or "the run", last)
        planned = _planned_steps(trainer)
        if planned is not None:
            session.set_planned_steps(planned)
        if appended:
            # the run records this fit as a training of its own (the worker meta file's trainings, as
            # fresh: judged alone, as this callback's new session judges it), where tripwire watch arms
            # its rules again and tripwire inspect shows the boundary; the session's own warning about
            # an earlier training's records not said (say=False), the one above says it (trial 30f F3: Run.trainings
            # was {} for the notebook's fit cell run again with the same callback)
            session._training_appended(say=False)
        # trial 21a: under manual optimization global_step counts every optimizer's steps (0, 2, 4,
        # ... with two), estimated_stepping_batches counts batches: the planned length is scaled
        # by the steps per batch of the first batches (_learn_steps_per_batch)
        self._learn_batches = 0 if automatic else _LEARN_BATCHES
        self._learn_from = (int(trainer.global_step), 0)
        # under DDP with manual optimization each rank's global_step is its own (a rank may step an
        # optimizer the others do not), and so are its save steps: the stop decisions are combined at
        # every batch's end instead, which every rank reaches together (one all_reduce of a flag a batch,
        # as Lightning's own SIGTERM broadcast; trial 42k: rank 1 saved at step 10 and waited in its
        # all_reduce, rank 0 in Lightning's broadcast: a hang; trial 42m: combined every save_interval
        # batches, a stop found after the last such batch never stopped the fit)
        self._batch_sync = trainer.world_size > 1 and not automatic
        self._said_eval = set()  # (said once per fit: _say_eval_modules)
        self._eval_look = True  # (looked for at the next train batch end, then at each epoch's first)
        # (after a resumed fit's checkpoint restored them: a request the checkpoint holds is no new one)
        self._requests_before = {id(cb): _stop_request(cb) for cb in getattr(trainer, "callbacks", None) or ()}

    def _learn_steps_per_batch(self, trainer: Trainer) -> None:
        """At a batch end of a manual-optimization fit's first ``_LEARN_BATCHES`` batches: the
        planned length in train steps as ``global_step`` counts them, ``estimated_stepping_batches``
        times the optimizer steps per batch taken since the fit began (a few integer reads; the
        session is told only when the number changes)."""
        self._learn_batches -= 1
        start, batches = self._learn_from
        batches += 1
        self._learn_from = (start, batches)
        steps = int(trainer.global_step) - start
        session = self._session
        if steps <= 0 or session is None:  # (no optimizer step yet: the batches' count stays)
            return
        planned = _planned_steps(trainer, per_batch=steps / batches)
        if planned is not None and planned != session.history.planned_steps:
            session.set_planned_steps(planned)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._params_due = True  # (the module's own on_train_epoch_start, after this one, may grow it)
        self._fence()
        self._eval_look = True
        self._record_epoch_metrics(trainer)
        self._epoch_first_step = int(trainer.global_step)

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # recorded at the next epoch's start or the training's end: the LightningModule's own
        # on_train_epoch_end runs after this hook, and what it logs is an epoch-level metric too
        self._end_deferred(sync=False)
        if getattr(pl_module, "automatic_optimization", True):  # (each epoch starts a new window)
            self._drop_cut_window(trainer, "the epoch")
        self._fence()
        self._epoch_summary = self._last_train_step
        session = self._session
        if trainer.current_epoch == 0 and session is not None and session.writer is not None and not trainer.sanity_checking:
            session.flush()  # (the losses kept since the last save step: in the history, as what was captured)
            session.name_unread_inputs()
        self._say_no_step(trainer)
        if self._trial_pending is not None and self._trial_pending == int(trainer.current_epoch) + 1:
            # the epoch's last validation came before its end (val_check_interval: N steps): its
            # value is the epoch's, reported now (every rank is here: the stop is agreed)
            self._trial_pending = None
            self._sync_stop(trainer, self._report_trial(trainer), sync=True, mode="train",
                            step=self._last_train_step or 0)

    def _trial_at_validation(self, trainer: Trainer) -> bool:
        """Report to the trial at a validation that ends an epoch. An epoch that validates more than
        once (``val_check_interval=0.5``) reports its last validation, not its first as "epoch N"
        (trial 18c: the mid-epoch value was reported, the epoch's own dropped, and a trial stopped
        at a rung, or one that "reached max_resource", stopped mid-epoch); a validation that ends no
        epoch is reported at the epoch's end."""
        if self.trial is None:
            return False
        fn = getattr(getattr(trainer, "state", None), "fn", None)
        if fn is not None and fn != "fit":
            # trainer.validate() before a fit (a baseline) was reported as epoch 1, one after it as
            # epoch N + 1, past max_resource (trial 18h): only a fit's validations are its epochs
            return False
        progress = _batch_progress(trainer)
        if fn == "fit" and progress is not None and not getattr(progress, "is_last_batch", True):
            self._trial_pending = int(trainer.current_epoch) + 1
            return False
        self._trial_pending = None
        return self._report_trial(trainer)

    def _say_no_step(self, trainer: Trainer) -> None:
        """A WARNING (once) for an epoch of training batches that took no optimizer step: the model
        did not train, and the run holds those batches as one step (trial 17i: manual optimization
        without optimizer.step(): 450 batches, no rule could tell, the run ended complete)."""
        progress = _batch_progress(trainer)
        batches = int(getattr(getattr(progress, "current", None), "completed", 0) or 0)
        if self._said_no_step or batches < 2 or int(trainer.global_step) != self._epoch_first_step:
            return
        self._said_no_step = True
        logger.warning(
            "tripwire: epoch %d ran %d training batches and trainer.global_step stayed at %d: no optimizer step was "
            "taken, so the model did not train (under manual optimization Lightning counts a step when "
            "optimizer.step() runs: is it called? Under automatic optimization, a training_step that returns None "
            "skips the step). tripwire numbers train steps by the global step: these batches are one step, %d, in "
            "the run", trainer.current_epoch, batches, trainer.global_step, trainer.global_step)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end_deferred(sync=False)
        self._drop_unagreed_stop(trainer)
        self._drop_cut_window(trainer, "training")
        self._fence()
        self._record_epoch_metrics(trainer)
        self._say_unreported_epochs(trainer)
        self._note_joint_stop(trainer)
        self._note_outside_stop(trainer)

    def _drop_unagreed_stop(self, trainer: Trainer) -> None:
        """Under DDP, a stop this rank took in between the points where the ranks agree on one (train
        save steps, the step after one, validation ends), which the fit ended before reaching: a
        ``tripwire.request_stop`` (or ``tripwire watch --stop``) read at a step that saves nothing,
        with no save step or validation left. Nothing was stopped, so the run is not marked
        ``stopped`` for it and ``stopped_by`` is None; the finding stays recorded, and a WARNING says
        so (trial 43m: the fit trained its whole length, and the run read ``stopped`` by the request)."""
        session = self._session
        if trainer.world_size <= 1 or not self._pending_stop or self._stopped or session is None:
            return
        found = session.stopped_by
        self._pending_stop = False
        session.stopped_by = None
        session._stop_held = None
        if found is not None:
            logger.warning(
                "tripwire: rank %d: %s asked to stop training at a step where the ranks do not agree on a stop (under "
                "DDP they do at train save steps and validation ends), and the fit ended before the next such point: "
                "nothing was stopped; the finding is recorded, and the run is not marked stopped for it",
                trainer.global_rank, f"rule {found.rule!r} at step {found.step} ({found.mode})")

    def _note_joint_stop(self, trainer: Trainer) -> None:
        """A fit that a rule stopped at a validation (this rank's rule, or another rank's:
        ``distributed_stop``) where another callback asked to stop at that validation too
        (``EarlyStopping``, which checks it at the validation's end or at the epoch's end after it;
        Lightning 2.6 keeps its reason, ``stopping_reason_message``, and its epoch, ``stopped_epoch``):
        the rule's stop stays the run's (``stopped_by``: a rule's finding says what went wrong), and its
        ``stop_reason`` (``callback.stop_reason``, the end marker's, ``tripwire inspect``'s) names the
        other request after the finding: ``... (EarlyStopping(monitor='val_loss') asked to stop in the
        same epoch (18) too: Monitored metric val_loss did not improve in the last 10 records. ...)``
        (trial 32d F10: only the rule was named). Not for a rule's stop at a train step (a request at the
        validation Lightning runs after it judged the weights the stop left), nor for a request that the
        callback held before this fit (an earlier fit's, a checkpoint's)."""
        session = self._session
        if (not self._stopped or self._stop_epoch is None or session is None or session.stopped_by is None
                or session.stop_reason is not None):
            return
        asked = []
        for cb in getattr(trainer, "callbacks", None) or ():
            if cb is self:
                continue
            epoch, said = request = _stop_request(cb)
            if (not isinstance(said, str) or not said or epoch != self._stop_epoch
                    or self._requests_before.get(id(cb)) == request):
                continue
            monitor = getattr(cb, "monitor", None)
            asked.append(f"{type(cb).__name__}{f'(monitor={monitor!r})' if monitor else ''} asked to stop in the "
                         f"same epoch ({epoch}) too: {' '.join(said.split())}")
        if asked:
            session.stop_reason = f"{session.why_stopped} ({'; '.join(asked)})"

    def _note_outside_stop(self, trainer: Trainer) -> None:
        """A fit that ends with ``trainer.should_stop`` set by no stop of this callback's (a rule's,
        another rank's, the tuner's): Lightning's ``EarlyStopping``, its ``Timer`` (``max_time``),
        another callback or the LightningModule stopped it. Its run ends ``stopped``, as for the
        tuner's stop, with that as its ``stop_reason`` (:func:`_outside_stop_reason`; the end marker's,
        ``callback.stop_reason``, ``tripwire inspect``'s "worker 0 stopped: ..."); ``stopped_by``
        stays None (no finding stopped it). Trial 28a F7: such a run read ``complete`` with no reason,
        like one that ran its whole budget. A tuning ``trial`` is told why (rank 0:
        :meth:`~tripwire.tune.Trial.note_early_end`), so that its journaled reason reads
        ``"completed: EarlyStopping(monitor='val_acc'): ..."``, not ``"completed"`` (trial 31g)."""
        session = self._session
        if (not trainer.should_stop or self._stopped or self.trial_stopped or session is None
                or session.stopped_by is not None or session.stop_reason is not None):
            return
        self._outside_stop = True
        session.stop_reason = _outside_stop_reason(trainer, max(0, session.mode_steps["train"] - 1), self)
        if self.trial is not None and trainer.is_global_zero:
            note_outside_stop(self.trial, session.stop_reason)

    def _say_unreported_epochs(self, trainer: Trainer) -> None:
        """A WARNING when the fit trained epochs it told the trial nothing of (trial 18h: with
        check_val_every_n_epoch=2 and 3 epochs the journal said resource 2, 'completed'; with no
        validation loop the trial failed at its end with 'reported no value')."""
        if self.trial is None or not trainer.is_global_zero or self._stopped or self.trial_stopped:
            return
        epochs = int(trainer.current_epoch)
        told = self._last_trial_step
        if epochs <= told:
            return
        if told == 0:
            logger.warning("tripwire: this fit ran %d epoch(s) and no validation: the trial was told nothing (the "
                           "callback reports trial_metric=%r at the validation that ends an epoch); give fit a "
                           "validation dataloader that logs it", epochs, self.trial_metric)
        else:
            logger.warning("tripwire: the last %d epoch(s) of this fit had no validation: the trial was told %d "
                           "epochs (its resource in the journal) and its value is epoch %d's, while %d were trained; "
                           "validate at the last epoch (a check_val_every_n_epoch that divides max_epochs)",
                           epochs - told, told, told, epochs)

    def _record_epoch_metrics(self, trainer: Trainer) -> None:
        """The finished epoch's training metrics logged with ``on_epoch=True`` (``train_acc`` logged
        with ``on_step=False``; ``train_loss_epoch``, the aggregate of one logged per step too): a
        summary record at the epoch's last train step, mode ``train``."""
        step, self._epoch_summary = self._epoch_summary, None
        session = self._session
        if step is None or session is None:
            return
        values = _epoch_metrics(trainer)
        if not values:
            return
        if self._train is not None or self._quiet is not None:  # pragma: no cover - a window that never stepped
            self._finish_train(trainer, sync=False)
        plan = session.begin_step("train", step, summary=True)
        window = _Window("train", plan.step, plan)
        if plan.wants("metrics") or plan.wants("losses"):
            for name, value in values.items():
                _offer_metric(plan, window, name, value)
        decision = session.end_step()
        self._after_decision(trainer, decision, "train", step, sync=False)

    def on_validation_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end_deferred(sync=False)
        self._fence()
        if trainer.sanity_checking:
            return
        self._ensure_session(trainer, pl_module)
        if self._train is not None or self._quiet is not None:  # validation inside a gradient accumulation window
            self._suspend_train()

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._ensure_session(trainer, pl_module)

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._ensure_session(trainer, pl_module)

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self._busy_in(trainer) is not None:
            return  # (a stage refused at its setup: the one running in another thread goes on)
        self._close(None)
        prior, self._prior_stop = self._prior_stop, None
        if (str(getattr(stage, "value", stage)) == "fit" and prior is not None and trainer.global_step == prior[0]
                and self._stopped_by is None and self._stop_reason is None):
            # a fit that trained nothing (its Trainer had run its epochs already): the last fit's stop stands,
            # as the run, which it did not touch, says
            _, self._stopped_by, self._stop_reason = prior

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if self._busy_in(trainer) is not None:
            return  # (a stage refused at its setup: the one running in another thread goes on)
        if self._deferred is not None:
            # (the step itself was complete: recorded, weights as they are; a stop it asks for no
            # longer matters, and the raise action's TrainingStopped would hide the exception)
            with contextlib.suppress(TrainingStopped):
                self._end_deferred(sync=False)
        self._fence()
        if isinstance(exception, TrainingStopped) and self._stopped_by is None:  # the raise action
            self._stopped_by = getattr(exception, "finding", None) or (self._session.stopped_by if self._session else None)
        if isinstance(exception, SIGTERMException) and self._session is not None and self._session.stop_reason is None:
            # (trial 41d: the run's reason read "lightning.pytorch.utilities.exceptions.SIGTERMException", where
            # Keras's and a hand loop's say SIGTERM and why; stop_reason says it too, as theirs do)
            self._session.stop_reason = (f"SIGTERM: {_TERMINATED}; Lightning stopped its loop (SIGTERMException), the "
                                         "callback wrote its records and ended the run failed")
        if (exits_cleanly(exception) and not isinstance(exception, SIGTERMException)
                and self._session is not None):  # (Lightning's SIGTERMException is a SystemExit with no code)
            # (sys.exit() or sys.exit(0) inside the fit, e.g. a callback ending a preempted job for its
            # requeue: the program's own end, not a failure, and not a complete training either)
            self._session.stop_reason = self._session.stop_reason or _EXITED
            self._close("stopped")
            return
        self._close("stopped" if isinstance(exception, TrainingStopped) else "failed")

    def _close(self, status: str | None) -> None:
        self._deferred = None
        self._grad_probe = self._gradless_step = None
        self._acts.detach()
        self._restore_hook_guards()
        self._grad_copies = None
        self._remove_forward_hook()
        session = self._session
        if session is None:
            return
        self._train = self._eval = None  # a step cut short (an exception) is not recorded
        self._cut = False
        self._say_lost_activations()
        self._say_scaler_skipped(session)
        self._quiet, self._quiet_to, self._loss_sum, self._loss_count, self._loss_last = None, -1, None, 0, None
        if status is None:
            # (a trial stopped at its max_resource ran its whole budget: a complete training)
            full = self.trial_stopped and reached_max_resource(self.trial, self._last_trial_step)
            cut = (self._stopped or self.trial_stopped or self._outside_stop) and not full
            # (None: the session's close decides, after judging the losses kept since the last
            # save step: a finding there that asks to stop is recorded and stops nothing, the
            # training having ended: "complete", trial 29j F2; a "raise" action still fails it)
            status = "stopped" if (session.stopped_by is not None or cut) else None
        if session.why_stopped is None and status == "stopped":
            # a test/validate/predict after a stopped fit keeps the fit's reason (trial 18h: the end
            # marker lost it, and tripwire inspect no longer said why the run stopped)
            session.stop_reason = self._stop_reason
        try:
            session.close(status)
            self._ended = ended_as(session, status)
        finally:
            self._stop_reason = session.why_stopped or self._stop_reason
            # (carried to the next stage in this process, not a checkpoint: a run holding steps past its
            # counters holds an earlier training's, which the next stage does not run again; trial 36q: a
            # validate after a second, fresh fit warned of steps "written after this checkpoint")
            self._carry = {**session.state_dict(), "carried": True}
            self._findings.extend(session.findings)
            if self._stopped_by is None and session.stopped_by is not None:
                self._stopped_by = session.stopped_by  # (a stop the session had set before its close)
            self._session = None

    def _say_scaler_skipped(self, session: Session) -> None:
        """At the session's end: where fp16 AMP's GradScaler skipped every train save step that asked for
        gradients (their gradients were not finite once unscaled), the session's "had nothing to read" of
        the gradient rules says that, not a capture problem (trial 30a F2: a NaN gradient at every step,
        and the run's end pointed at what the integration captures). The counts restart."""
        asked, skipped, scale = self._grad_saves, self._skipped_saves, self._last_scale
        self._grad_saves = self._skipped_saves = 0
        if not asked or skipped < asked:
            return
        at = f"; the loss scale was {scale:.3g} at the last save step read" if scale is not None else ""
        session.empty_because(("gradients",), (
            f"fp16 AMP's GradScaler skipped {skipped} of the {asked} train save steps that asked for gradients: their "
            f"gradients were not finite once unscaled (a NaN or an infinity in the backward pass: torch.sqrt, "
            f"torch.log or a division at 0; values beyond fp16's range; a learning rate far too high){at}, and the "
            f"gradients of a step the scaler skips are never applied, so they are not captured (loss_scale_collapse "
            f"reads the scale; docs/lightning.md, \"Mixed precision\")"))

    def state_dict(self) -> dict[str, Any]:
        self._end_deferred(sync=False)  # (a checkpoint at the batch end: ModelCheckpoint(every_n_train_steps))
        session = self._session.state_dict() if self._session is not None else self._carry
        if isinstance(session, dict) and "carried" in session:  # (a checkpoint's state: no carry)
            session = {k: v for k, v in session.items() if k != "carried"}
        return {
            "version": _STATE_VERSION,
            "out_dir": self._out_dir,
            # (where it was, whatever the working directory: see _checkpointed_out_dir)
            "out_dir_absolute": os.path.abspath(self._out_dir) if self._out_dir is not None else None,
            "session": session,
            "last_trial_step": self._last_trial_step,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        version = state_dict.get("version")
        if version != _STATE_VERSION:
            raise ConfigError(f"TripwireCallback state: version {version!r}; accepted: {_STATE_VERSION}")
        if self._stage not in (None, "fit") and (self._session is not None or self._carry is not None):
            # trial 22f: trainer.test(ckpt_path="best") after a fit restored this callback's state as of
            # that checkpoint: the run's eval steps were counted again from there, its rules fired
            # again, and a WARNING spoke of a resumed training. An evaluation trains nothing: this
            # callback, which holds the run's state already, goes on with it (a new callback, with
            # no state, still takes the checkpoint's: the run it continues)
            logger.debug("tripwire: trainer.%s(ckpt_path=...) restores the weights only; this callback's run and "
                         "rules go on as they are", self._stage)
            return
        if self.config.out_dir is None and state_dict.get("out_dir"):
            self._out_dir = _checkpointed_out_dir(state_dict)  # continue the same run
            claimed, self._claimed = self._claimed, None
            if claimed is not None and claimed != self._out_dir and self._session is None:
                with contextlib.suppress(OSError):  # the new directory setup() claimed: still empty
                    os.rmdir(claimed)
        self._carry = state_dict.get("session")
        # (the checkpoint's training goes on: an earlier fit's steps past it are the session's to name, as
        # steps written after the checkpoint; trial 36q: a crash resumed with the same callback object also
        # said "this fit starts at global step 8 and ... already holds train steps up to 10")
        self._earlier_last = -1
        self._last_trial_step = int(state_dict.get("last_trial_step", 0))
        if self._session is not None and self._carry is not None:
            self._session.load_state_dict(self._carry)

    # -------------------------------------------------------------------------------- train
    def _fence(self) -> None:
        """Wait until the background reduction of the last save step no longer reads its tensors
        (see :meth:`Session.fence`): at every hook after a train step that may come before
        training changes them in place."""
        if self._session is not None:
            self._session.fence()

    def on_train_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int) -> None:
        if self._deferred is not None:
            self._end_deferred(sync=True)  # (the last step's end, after the user's batch-end code)
        session = self._session
        if session is None:
            session = self._ensure_session(trainer, pl_module)
        elif not self._fence_late or self._weights_in_flight:
            # (manual optimization, or user code after this hook: see on_train_start; a step in flight
            # that holds weights: a training_step may write one through .data, which moves no version
            # counter, and the copy raced it, trial 35c)
            session.fence()
        # else at on_before_zero_grad or on_before_optimizer_step: the background thread's copy of
        # the step in flight (gradients, activations) overlaps this step's forward pass
        # (docs/lightning.md, "Reductions")
        self._weights_in_flight = False
        step = int(trainer.global_step)
        window = self._train
        if window is not None or self._quiet is not None:
            if (window.step if window is not None else self._quiet) == step:
                if window is not None and window.suspended:
                    self._resume_train(window)  # (the window goes on after a validation inside it)
                return  # the next micro-batch of a gradient accumulation window
            self._finish_train(trainer, sync=False)  # pragma: no cover - a window that never stepped
        if step == self._last_train_step:
            return  # pragma: no cover - the rest of a window ended before its optimizer step
        if step >= self._quiet_to:
            self._quiet_to = session.quiet_until("train", step)
            self._quiet_keeps_loss = session.quiet_keeps("train", "losses")
        if step < self._quiet_to:  # nothing to save: the loss only, if kept (a tensor: no host sync)
            self._quiet = step
            return
        plan = session.begin_step("train", step)
        self._train = window = _Window("train", step, plan)
        if plan:
            if self._params_due:  # (once an epoch, at its first save step: see _note_grown)
                self._params_due = False
                self._note_grown(pl_module, step)
            self._capture_batch(window, pl_module, batch)

    def _suspend_train(self) -> None:
        """At a validation's start inside a gradient accumulation window (``val_check_interval``
        counts batches, not optimizer steps): the train step in progress goes on after the
        validation, its record as without it (trial 29a F1: the step was ended there, its loss the
        mean of the micro-batches before the validation, its gradients never recorded, and the rest of
        the window dropped). A quiet step needs nothing: the session has not counted it yet. A step
        that saves: :meth:`Session.suspend_step` takes its plan out of the session, and the session's
        train step counter and global step are as before its ``begin_step``, so the validation's steps
        follow the last completed optimizer step, the weights they validate (``Run.train_steps``, an
        eval finding's ``train_step``); :meth:`_resume_train` puts it back at the window's next
        micro-batch, and its record follows the validation's. A window the fit leaves before its
        optimizer step (a stop at that validation) is dropped (:meth:`_drop_cut_window`)."""
        self._cut = True
        window, session = self._train, self._session
        if window is None or session is None or window.suspended or session.plan is not window.plan:
            return
        session.suspend_step()  # (a Session holds one open step; the validation's come now)
        window.suspended = True

    def _resume_train(self, window: _Window) -> None:
        """The train step :meth:`_suspend_train` took out of the session goes on (its next
        micro-batch): :meth:`Session.resume_step` counts it again as ``begin_step`` counted it, its
        plan the session's open step."""
        session = self._session
        window.suspended = False
        if session is None:  # pragma: no cover - (a window has a session)
            return
        if session.plan is not None:  # pragma: no cover - (the validation's steps ended at its end)
            session.end_step()
        session.resume_step(window.plan)

    def _drop_cut_window(self, trainer: Trainer, ended: str) -> None:
        """At the epoch's end (automatic optimization: Lightning starts each epoch with a new window)
        or the training's: a gradient accumulation window that a validation cut and that never
        reached its optimizer step (the fit stopped at that validation: a rule, EarlyStopping, the
        tuner) is no optimizer step, and is not recorded (said at INFO; ``ended``: what ended, for
        the message): the run holds the optimizer steps taken, the last one's weights the model's."""
        if not self._cut:
            return
        self._cut = False
        window, quiet = self._train, self._quiet
        if window is None and quiet is None:
            return
        step = window.step if window is not None else quiet
        count = self._loss_count
        self._train, self._quiet = None, None
        self._loss_sum, self._loss_count, self._loss_last = None, 0, None
        self._acts.detach()  # (a suspended window's plan is out of the session, which has not counted it)
        logger.info(
            "tripwire: %s ended inside the gradient accumulation window of train step %d, after a validation inside "
            "it (trainer.global_step %d, %d micro-batch loss(es) taken): Lightning took no optimizer step for it, so "
            "the run holds no record of it", ended, step, int(trainer.global_step), count)

    def on_before_zero_grad(self, trainer: Trainer, pl_module: LightningModule, optimizer: Any) -> None:
        self._fence()  # (zero_grad(set_to_none=False) zeroes the gradients of the step in flight)

    def on_before_optimizer_step(self, trainer: Trainer, pl_module: LightningModule, optimizer: Any) -> None:
        self._fence()  # (the step changes the weights in place; a gradient copy below reuses its buffers)
        if not self._said_gradless:
            self._note_gradless_step(trainer)
        window = self._train
        plan = window.plan if window is not None and window.plan else None
        wants_grads = plan is not None and plan.wants("gradients")
        wants_optimizer = plan is not None and plan.wants("optimizer")
        if window is None or plan is None or not (wants_grads or wants_optimizer):
            # (a fit whose train steps read no gradient or optimizer value, the default config's: its
            # first step only)
            if not self._looked_unheld:
                self._looked_unheld = True
                self._with_gradients(trainer, pl_module, optimizer)
            return
        if not self._said_foreign:
            self._say_foreign_optimizer(optimizer)
        self._looked_unheld = True
        named, held = self._with_gradients(trainer, pl_module, optimizer)
        # whether fp16's GradScaler skips this optimizer's step (a host sync, only where a scaler runs and
        # something of the step is read): its gradients are never applied, and its update ratios are 0
        skips = (wants_grads or (wants_optimizer and self._full_optimizer)) and _scaler_skips(trainer, optimizer)
        if wants_grads:
            window.grads_asked = True
            window.grads_skipped = window.grads_skipped or skips
        if wants_grads and not skips:
            grads = [(f"gradients/{n}", p.grad) for n, p in named]
            grads = [(k, g) for k, g in grads if k not in window.added and plan.select(k, "gradients")]
            if grads and _grads_may_change(trainer, pl_module, self):
                # clipping (or other code) changes them in place before the step's reduction at the
                # batch end: one fused copy now, into the buffers of the last save step
                done, last = len(window.grads), self._grad_copies  # (several optimizers: one call each)
                copies = snapshot([g for _, g in grads], into=None if last is None else last[done:done + len(grads)])
                window.grads.extend(copies)
                grads = [(k, c) for (k, _), c in zip(grads, copies)]
            for key, grad in grads:
                if plan.add(key, grad, "gradients"):
                    window.added.add(key)
        if wants_optimizer:
            self._offer_loss_scale(trainer, plan, window)
            self._offer_clipping(trainer, pl_module, plan, window)
        if wants_optimizer and self._full_optimizer:
            opts = trainer.optimizers if len(trainer.optimizers) > 1 else [optimizer]
            for key, lr in learning_rates(opts).items():
                if key not in window.added and plan.add(key, lr, "optimizer"):
                    window.added.add(key)
            chosen = [(f"update_ratio/{n}", p) for n, p in held if plan.select(f"update_ratio/{n}", "optimizer")]
            chosen = [(k, p) for k, p in chosen if k not in window.ratio_names]
            if chosen and skips:
                # trial 30a F3: a step the GradScaler skips leaves the weights as they are: its ratios, 0,
                # would read as "the parameters do not move" (weight_update_ratio stopped a healthy fp16 run
                # on its first, skipped, steps); not recorded, as its gradients are not
                chosen = []
            if chosen:
                window.ratio_names.extend(k for k, _ in chosen)
                if not window.before:
                    self._wait_late()  # (the last save step's update ratios read the buffers)
                reuse = self._snapshots if not window.before else None  # buffers of the last step
                window.before.extend(snapshot([p for _, p in chosen], into=reuse))
                window.after.extend(p for _, p in chosen)

    def _offer_loss_scale(self, trainer: Trainer, plan: StepPlan, window: _Window) -> None:
        """``loss_scale`` (kind ``optimizer``): the scale of fp16 AMP's ``GradScaler`` at this save step,
        the one this step's backward pass used (``scaler.get_scale()``, before its ``update()``; one host
        read, once per step), which ``loss_scale_collapse`` reads (trial 30a: a NaN gradient at every
        step made the scaler skip every step, and nothing said so). Nothing without a scaler (fp32,
        bf16) or with a disabled one."""
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        if scaler is None or LOSS_SCALE in window.added:
            return
        try:
            if not scaler.is_enabled():
                return
            scale = float(scaler.get_scale())
        except (AttributeError, TypeError, RuntimeError):  # pragma: no cover - another scaler's interface
            return
        self._last_scale = scale
        if plan.select(LOSS_SCALE, "optimizer") and plan.add(LOSS_SCALE, scale, "optimizer"):
            window.added.add(LOSS_SCALE)

    def _offer_clipping(self, trainer: Trainer, pl_module: LightningModule, plan: StepPlan, window: _Window) -> None:
        """The Trainer's gradient clipping (kind ``optimizer``, save steps): ``clip/global_norm`` for
        ``gradient_clip_val`` with the ``norm`` algorithm (Lightning's default: the norm of all the
        optimizer's gradients together), ``clip/value`` with ``value``; which ``exploding_gradient``
        reads so as not to advise clipping to a fit that clips (the gradients recorded are the
        unclipped ones: Lightning clips after ``on_before_optimizer_step``; trial 31a F3, as the Keras
        callback records its optimizer's). Nothing without clipping or under manual optimization
        (where the Trainer clips nothing itself)."""
        limit = getattr(trainer, "gradient_clip_val", None)
        if (not isinstance(limit, (int, float)) or isinstance(limit, bool) or not limit > 0
                or not pl_module.automatic_optimization):
            return
        algorithm = getattr(trainer, "gradient_clip_algorithm", None)
        name = "clip/value" if str(getattr(algorithm, "value", algorithm)) == "value" else "clip/global_norm"
        if name not in window.added and plan.select(name, "optimizer") and plan.add(name, float(limit), "optimizer"):
            window.added.add(name)

    def _with_gradients(self, trainer: Trainer, pl_module: LightningModule,
                        optimizer: Any) -> tuple[list[tuple[str, torch.Tensor]], list[tuple[str, torch.Tensor]]]:
        """The LightningModule's parameters with a gradient at this optimizer step, as ``(name,
        parameter)`` in network order (their registration order, ``named_parameters()``'s): those
        to capture the gradient of, and of them those that ``optimizer`` holds (the update ratios').

        The first list also holds the parameters with a gradient that no optimizer of the trainer
        holds (trial 27a: a head left out of ``configure_optimizers`` was not captured at all, and
        the gradient rules' "last layer" was a hidden one): they never learn, said in a WARNING
        once (:meth:`_say_unheld_parameters`). Where no optimizer holds any parameter of the module
        (one built from a copy of it, a strategy whose optimizer holds copies of its own), nothing
        is told apart: the optimizer's parameters only, none of them the module's. Under fp16 AMP's
        ``GradScaler``, which unscales the gradients of the optimizers' parameters only, a parameter
        no optimizer holds keeps a scaled gradient (65536 times the true one at the initial scale):
        said, not captured."""
        mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
        held_anywhere = set(mine)
        for opt in trainer.optimizers:
            if opt is not optimizer:
                held_anywhere.update(id(p) for g in opt.param_groups for p in g["params"])
        trusted = not held_anywhere.isdisjoint(self._param_names)
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        named: list[tuple[str, torch.Tensor]] = []
        held: list[tuple[str, torch.Tensor]] = []
        unheld: list[str] = []
        for name, p, _ in self._params:
            if p.grad is None:
                continue
            if id(p) in mine:
                named.append((name, p))
                held.append((name, p))
            elif trusted and id(p) not in held_anywhere:
                unheld.append(name)
                if scaler is None:
                    named.append((name, p))
        if unheld and not self._said_unheld and bool(getattr(pl_module, "automatic_optimization", True)):
            self._say_unheld_parameters(trainer, unheld)
        return named, held

    def _say_unheld_parameters(self, trainer: Trainer, names: list[str]) -> None:
        """A WARNING (once) for parameters of the module that have a gradient at an optimizer step
        of automatic optimization and that no optimizer of the trainer holds: nothing steps them,
        so they keep their initial values (trial 27a: ``configure_optimizers`` returned
        ``Adam(self.net[:-1].parameters())``, the output layer never trained, and nothing said so).
        Not under manual optimization, where ``training_step`` may update a parameter itself."""
        self._said_unheld = True
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        logger.warning(
            "tripwire: %d parameter(s) of the LightningModule have a gradient at train step %d but no optimizer of the "
            "trainer holds them, so they never learn: %s. Did configure_optimizers leave them out (an optimizer "
            "built from one submodule's parameters, self.net[:-1].parameters(), or a parameter group that misses "
            "them)? Pass them to the optimizer, or freeze them (requires_grad_(False)) if they are meant to stay as "
            "they are. %s", len(names), int(trainer.global_step), shown,
            "Their gradients are captured with the others' (gradients/<name>)"
            if getattr(getattr(trainer, "precision_plugin", None), "scaler", None) is None else
            "Their gradients are not captured: fp16 AMP's GradScaler unscales only the optimizers' parameters, so "
            "theirs stay scaled")

    def _note_gradless_step(self, trainer: Trainer) -> None:
        """Note the train step (told at its batch end: :meth:`_say_gradless_step`) when no parameter
        of the module has a gradient at this optimizer step. Cheap at every step: the parameter that
        had one the last time is looked at first."""
        probe = self._grad_probe
        if probe is not None and probe.grad is not None:
            return
        for _, p, _ in self._params:
            if p.grad is not None:
                self._grad_probe = p
                return
        if self._params:
            self._gradless_step = int(trainer.global_step)

    def _say_gradless_step(self, trainer: Trainer, pl_module: LightningModule, outputs: Any) -> None:
        """A WARNING (once) at the batch end of a train step whose optimizer stepped while no
        parameter of the module had a gradient (every ``.grad`` None): the step changed nothing
        (trial 27a: a loss computed on ``logits.detach().requires_grad_()`` trained nothing, and
        only the run's end said that the gradient rules "had nothing to read"). Not for a step
        whose ``training_step`` returned None under automatic optimization (Lightning skips its
        backward on purpose), nor where no optimizer holds a parameter of the module (said by
        :meth:`_say_foreign_optimizer`, or a strategy that keeps the gradients elsewhere)."""
        step, self._gradless_step = self._gradless_step, None
        if step is None or self._said_gradless or int(trainer.global_step) <= step:
            return  # (no optimizer step was taken)
        automatic = bool(getattr(pl_module, "automatic_optimization", True))
        if automatic and _train_loss(outputs, pl_module, trainer) is None:
            return
        held = {id(p) for opt in trainer.optimizers for g in opt.param_groups for p in g["params"]}
        if held.isdisjoint(self._param_names):
            return
        self._said_gradless = True
        how = ("optimizer.step() called before self.manual_backward(loss), or after zero_grad(); "
               if not automatic else "")
        logger.warning(
            "tripwire: at train step %d the optimizer stepped while no parameter of the LightningModule had a gradient "
            "(every .grad was None): the step changed nothing, and where every step is like this the model does not "
            "learn at all. Usual causes: %sa loss cut off from the parameters (a .detach(), .item(), .numpy() or "
            "torch.tensor(...) on the way to it, or .requires_grad_() on a detached output to silence 'element 0 of "
            "tensors does not require grad'), a forward pass run under torch.no_grad() or torch.inference_mode(), or "
            "every parameter frozen (requires_grad=False). The gradient rules and weight_update_ratio have nothing "
            "to read at such steps", step, how)

    def _say_eval_modules(self, trainer: Trainer, pl_module: LightningModule, batch_idx: int) -> None:
        """At the end of each epoch's first train batch (where its forward ran), until said: modules
        whose computation differs in training (:func:`_mode_effect`: dropout, BatchNorm and
        InstanceNorm with running statistics, a module whose forward reads ``self.training``) that
        are in eval mode (trial 29f F7: ``self.net.eval()`` in ``training_step`` ran dropout and
        BatchNorm in inference mode for the whole fit, and no rule could see it). A WARNING, once per
        fit, for those that learn; an INFO, once per fit, for those whose parameters do not (frozen,
        or held by no optimizer: a pretrained backbone or an EMA copy kept in eval on purpose,
        :func:`_in_eval_mode`). Reads the
        modules' ``training`` flags and attributes only: no device synchronisation."""
        held = {id(p) for opt in trainer.optimizers for g in opt.param_groups for p in g["params"]}
        found = _in_eval_mode(pl_module, None if held.isdisjoint(self._param_names) else held)
        where = f"train batch {batch_idx} of epoch {trainer.current_epoch}"
        if found.trainable and "warning" not in self._said_eval:
            self._said_eval.add("warning")
            labels = [label for label, _ in found.trainable]
            others = [label for label, effect in found.trainable if effect == "other"]
            on = ", ".join("the LightningModule itself" if r == "" else r for r in found.trainable_roots[:3])
            logger.warning(
                "tripwire: %d module(s) of the LightningModule that compute otherwise in training were in eval mode "
                "at %s: %s. In eval mode %s, so the model trains as it is evaluated (no rule can tell from what is "
                "recorded). Usual causes: .eval() called in training_step, on_train_epoch_start or a callback (the "
                "topmost module in eval mode: %s), or a submodule put in eval before fit, whose mode Lightning keeps "
                "(Lightning 2.5.5 and later say 'Found N module(s) in eval mode at the start of training' then). Call "
                ".train() on it, or drop the .eval(). A submodule kept in eval on purpose whose parameters do not "
                "learn (requires_grad_(False), or held by no optimizer: a pretrained backbone, an EMA copy) is said at "
                "INFO instead",
                len(labels), where, _shown(labels), _eval_effects({e for _, e in found.trainable}, others), on)
        if found.frozen and "info" not in self._said_eval:
            self._said_eval.add("info")
            labels = [label for label, _ in found.frozen]
            others = [label for label, effect in found.frozen if effect == "other"]
            logger.info(
                "tripwire: %d module(s) that compute otherwise in training are in eval mode at %s, under frozen "
                "submodule(s) (every parameter requires_grad=False or held by no optimizer: %s): %s. In eval mode "
                "%s: as meant for a pretrained backbone or an EMA copy kept in eval on purpose", len(labels), where,
                ", ".join("the LightningModule" if r == "" else r for r in found.frozen_roots[:3]), _shown(labels),
                _eval_effects({e for _, e in found.frozen}, others))

    def _say_foreign_optimizer(self, optimizer: Any) -> None:
        """A WARNING (once) for an optimizer none of whose parameters is the module's (built from a
        copy of the model, or another module): it trains nothing of the model, and no gradient or
        update ratio of the model reaches it (trial 17i: weight_update_ratio read nothing, silently)."""
        self._said_foreign = True
        held = [p for g in optimizer.param_groups for p in g["params"]]
        if held and not any(id(p) in self._param_names for p in held):
            logger.warning(
                "tripwire: the optimizer %s holds %d parameter(s), none of them a parameter of the LightningModule: it "
                "does not train the model (was it built from a copy of the model, or from another module, in "
                "configure_optimizers?), and the model's gradients and update ratios are not captured",
                type(optimizer).__name__, len(held))

    def on_train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any, batch_idx: int) -> None:
        self._train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        if self._batch_sync:  # (DDP with manual optimization: every rank here at every batch)
            last = self._last_train_step
            self._sync_stop(trainer, False, sync=True, mode="train", step=last if last is not None and last >= 0 else 0)

    def _train_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                         batch_idx: int) -> None:
        if self._gradless_step is not None:
            self._say_gradless_step(trainer, pl_module, outputs)
        if self._eval_look:  # (the epoch's first train batch end: set at its start)
            self._eval_look = False
            if "warning" not in self._said_eval:
                self._say_eval_modules(trainer, pl_module, batch_idx)
        if self._learn_batches:  # (manual optimization's first batches only)
            self._learn_steps_per_batch(trainer)
        quiet = self._quiet
        if quiet is not None:
            if self._quiet_keeps_loss:
                self._add_loss(outputs, pl_module, trainer)
            if trainer.global_step > quiet:
                self._finish_quiet(trainer, sync=True)
            return
        window = self._train
        if window is None:
            return
        if window.plan:
            self._offer_activations(window)
        if window.plan.keeps("losses"):  # every step with every_step losses (the default): a tensor, no sync
            self._add_loss(outputs, pl_module, trainer)
        if trainer.global_step > window.step:  # the optimizer stepped: the step is complete
            self._finish_train(trainer, sync=True, defer=self._defer_end)

    def _finish_train(self, trainer: Trainer, sync: bool, defer: bool = False) -> None:
        """End the train step in progress. ``defer`` (at this callback's batch end, where user code
        runs after it: ``_defer_end``): a step that saves weights or biases ends at the next hook
        instead (:meth:`_end_deferred`)."""
        if self._quiet is not None:
            self._finish_quiet(trainer, sync)
            return
        window, self._train = self._train, None
        if window is None:
            return
        self._cut = False
        self._acts.detach()
        self._last_train_step = window.step
        plan = window.plan
        loss = self._take_loss()
        last, self._loss_last = self._loss_last, None
        session = self._session
        if session is None:
            return
        if loss is not None and plan.add("loss", loss, "losses"):  # saved now, or kept for the next save step
            window.added.add("loss")
            window.loss = (loss, loss if last is None else last)
        if window.grads_asked:
            self._grad_saves += 1
            if window.grads_skipped and not any(k.startswith("gradients/") for k in window.added):
                self._skipped_saves += 1
        if plan:
            weights = plan.wants("weights") or plan.wants("biases")
            reads = plan.wants("metrics") or plan.wants("losses")
            deferring = defer and (weights or reads)
            if deferring and reads:
                # trial 23e: what the LightningModule's own on_train_batch_end (or a later callback)
                # logs is read at the step's true end too: read now, it was the last step's value
                self._hold_metrics(window, trainer)
            else:
                self._offer_metrics(plan, trainer, window)
            if deferring:
                # trial 21a: the LightningModule's own on_train_batch_end (Lightning calls it after
                # the callbacks') or a later callback may change a weight in place there (a max-norm
                # constraint, a pruning mask): the weights, and the step's reduction with them, are
                # taken at the next hook, the step's true end; the rest is offered now
                weights = False
                self._deferred = (window, trainer)
            copied = self._offer_weights(plan) if weights else None
            if window.grads:
                self._grad_copies = window.grads  # (reduced by end_step below: reused at the next save step)
            if window.before:
                self._offer_ratios(plan, window, copied)
            if deferring:
                return
        decision = session.end_step() if session.plan is plan else Decision()
        combine = self._take_combine(trainer, sync)
        self._after_decision(trainer, decision, "train", window.step, sync=(sync and bool(plan)) or combine)
        if plan:
            self._saved_step_ended(trainer)

    def _saved_step_ended(self, trainer: Trainer) -> None:
        """A train save step ended (its reduction done, or handed to the background thread): under
        DDP the next train step's end combines the stop decision across ranks as well
        (:meth:`_take_combine`)."""
        if trainer.world_size > 1:
            self._combine_next = True

    def _take_combine(self, trainer: Trainer, sync: bool) -> bool:
        """Whether this train step's end (at its batch end: ``sync``) combines the stop decision
        across ranks because the train step before it was a save step (trial 28a F3). A save step
        whose reduction the backend took off the training thread (large tensors on the CPU) is
        judged when the next step ends, a quiet step that combined nothing: its stop waited for
        the next save step or validation end, up to a whole ``save_interval``. Whether a step goes
        to the background is each rank's own (its free CPUs, its torch threads), so the step after
        every save step combines, on every rank alike (one more ``all_reduce`` of a flag per save
        interval): every rank takes part in the same collectives at the same steps."""
        combine = sync and self._combine_next and trainer.world_size > 1
        if sync:
            self._combine_next = False
        return combine

    def _offer_weights(self, plan: StepPlan) -> dict[int, torch.Tensor] | None:
        """The parameters of a kind the step saves. Where the background thread may read them after
        this step has ended (live, fenced late: see :meth:`on_train_start`), a copy of them instead,
        made now in one fused call into the buffers of the last save step: the next step's
        training_step may write a weight through ``.data``, which moves no version counter, and the
        background copy raced it (trial 35c); fencing at the next batch start instead cost the
        background copy's overlap with the forward pass. Else, where such a step reads the weights
        themselves, the next batch start fences (:attr:`_weights_in_flight`). Returns the copies by
        ``id`` of their parameter (None: none made)."""
        chosen = [(name, p, kind) for name, p, kind in self._params if plan.wants(kind)]
        if not chosen:
            return None
        tensors = [p.detach() for _, p, _ in chosen]
        session = self._session
        copied = None
        if (self._fence_late and session is not None and session.live_tensors and background_allowed()
                and sum(t.numel() for t in tensors) <= _torch.BACKGROUND_MAX and all(t.device.type == "cpu" for t in tensors)):
            self._wait_late()  # (the last save step's update ratios read the buffers)
            tensors = self._weight_copies = snapshot(tensors, into=self._weight_copies)
            copied = {id(p): t for (_, p, _), t in zip(chosen, tensors)}
        else:
            self._weights_in_flight = True
        for (name, _, kind), tensor in zip(chosen, tensors):
            plan.add(name, tensor, kind)
        return copied

    def _offer_ratios(self, plan: StepPlan, window: _Window, copied: dict[int, torch.Tensor] | None) -> None:
        """The step's update ratios ``||after - before|| / ||before||``: computed by the thread that
        reduces the step (:class:`~tripwire.integrations._torch.LateValues`: three passes over every
        weight off the training thread) where both sides are private copies, the weights' ``after``
        made by :meth:`_offer_weights` (else the live parameters would be read while the next step
        changes them) and saved as scalars only (a histogram reads its tensor at once); else now."""
        before, names = window.before, window.ratio_names
        self._snapshots = before
        after = [copied.get(id(p)) for p in window.after] if copied is not None else None
        if (after is not None and all(a is not None for a in after)
                and all(b.dtype == torch.float32 and b.device.type == "cpu" for b in before)
                and not any(c.reduction.histogram for k in names for c in plan.select(k, "optimizer"))):
            def produce(out: torch.Tensor, before: list[torch.Tensor] = before, after: list[Any] = after) -> None:
                out.copy_(update_ratios(before, after, inplace=True))

            late = self._late = _torch.LateValues(len(before), torch.float32, produce)
            values: Any = late.views()
        else:
            values = update_ratios(before, window.after, inplace=True)
        for i, key in enumerate(names):
            plan.add(key, values[i], "optimizer")

    def _wait_late(self) -> None:
        """The last save step's late update ratios produced (:meth:`_offer_ratios`), before their
        buffers are written again."""
        late, self._late = self._late, None
        if late is not None:
            late.wait()

    def _end_deferred(self, sync: bool) -> None:
        """End the save step whose end :meth:`_finish_train` deferred (trial 21a), at the first hook
        after the user code that follows this callback's batch end: the next batch's start, a
        validation's start, the epoch's or the training's end, a checkpoint (``state_dict``), an
        exception. Its weights are offered now, as that code left them; its rules run now, so a
        stop they ask for at the next batch's start takes effect one step later."""
        deferred, self._deferred = self._deferred, None
        session = self._session
        if deferred is None or session is None:
            return
        window, trainer = deferred
        plan = window.plan
        if session.plan is not plan:  # pragma: no cover - ended elsewhere
            return
        self._offer_late_metrics(window)
        if plan.wants("weights") or plan.wants("biases"):
            self._offer_weights(plan)
        decision = session.end_step()
        self._after_decision(trainer, decision, "train", window.step, sync=sync)
        self._saved_step_ended(trainer)

    def _add_loss(self, outputs: Any, pl_module: LightningModule, trainer: Trainer) -> None:
        """Add one micro-batch's training loss to the step in progress (a tensor: no host sync)."""
        loss = _train_loss(outputs, pl_module, trainer)
        if loss is not None:
            self._loss_sum = loss if self._loss_sum is None else self._loss_sum + loss
            self._loss_count += 1
            self._loss_last = loss

    def _take_loss(self) -> torch.Tensor | None:
        """The step's loss, the mean over its micro-batches (one value per optimizer step), or None;
        the sum starts again for the next step."""
        total, count = self._loss_sum, self._loss_count
        self._loss_sum, self._loss_count = None, 0
        return total if total is None or count == 1 else total / count

    def _finish_quiet(self, trainer: Trainer, sync: bool = False) -> None:
        step, self._quiet = self._quiet, None
        self._cut = False
        self._last_train_step = step
        loss, self._loss_last = self._take_loss(), None
        session = self._session
        if session is None or step is None:
            return
        kept = () if loss is None else (("loss", loss, "losses"),)
        decision = session.quiet_step("train", step, kept, owned=self._loss_owned)
        combine = self._take_combine(trainer, sync)  # (the step after a save step: see _take_combine)
        if decision.stop or self._pending_stop or combine:
            self._after_decision(trainer, decision, "train", step, sync=combine)

    # ------------------------------------------------------------------- eval, test, predict
    def on_validation_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                                  dataloader_idx: int = 0) -> None:
        if not trainer.sanity_checking:
            self._eval_batch_start("eval", trainer, pl_module, batch)

    def on_validation_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                                batch_idx: int, dataloader_idx: int = 0) -> None:
        if not trainer.sanity_checking:
            self._eval_batch_end(trainer, outputs)

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if self.trial is not None:
            self._val_metrics = _validation_metrics(trainer)
        self._eval_end(trainer, pl_module)

    def on_test_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                            dataloader_idx: int = 0) -> None:
        self._eval_batch_start("test", trainer, pl_module, batch)

    def on_test_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                          batch_idx: int, dataloader_idx: int = 0) -> None:
        self._eval_batch_end(trainer, outputs)

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._eval_end(trainer, pl_module)

    def on_predict_batch_start(self, trainer: Trainer, pl_module: LightningModule, batch: Any, batch_idx: int,
                               dataloader_idx: int = 0) -> None:
        self._eval_batch_start("predict", trainer, pl_module, batch)

    def on_predict_batch_end(self, trainer: Trainer, pl_module: LightningModule, outputs: Any, batch: Any,
                             batch_idx: int, dataloader_idx: int = 0) -> None:
        self._eval_batch_end(trainer, outputs)  # (its predictions as validation's: trials 42a, 42g)

    def on_predict_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._end_eval(trainer, sync=False)

    def _eval_batch_start(self, mode: str, trainer: Trainer, pl_module: LightningModule, batch: Any) -> None:
        session = self._ensure_session(trainer, pl_module)
        self._end_eval(trainer, sync=False)
        # step n is the n-th batch of this mode over the whole run, counted from 1, so the record of
        # a validation run's last batch (which holds the epoch-level metrics) has step = batches so far
        plan = session.begin_step(mode, max(session.mode_steps[mode], 1))
        self._eval = window = _Window(mode, plan.step, plan)
        if plan:
            self._capture_batch(window, pl_module, batch)
            if plan.wants("predictions"):
                def keep(_module: Any, _args: Any, output: Any, window: _Window = window) -> None:
                    window.forward_out = output

                self._forward_hook = pl_module.register_forward_hook(keep)

    def _eval_batch_end(self, trainer: Trainer, outputs: Any) -> None:
        window = self._eval
        self._remove_forward_hook()
        if window is None or not window.plan:
            self._acts.detach()
            return
        self._offer_activations(window)  # (detaches the hooks, then takes what they caught)
        if window.plan.wants("predictions") and "predictions" not in window.added:
            pred = _predictions_in(outputs)
            if pred is None and isinstance(window.forward_out, torch.Tensor):
                pred = window.forward_out
            window.forward_out = None
            if pred is not None and window.plan.add("predictions", pred.detach(), "predictions"):
                window.added.add("predictions")
        if window.mode != "predict" and (window.plan.wants("metrics") or window.plan.wants("losses")):
            if self._eval_defer(window.mode, trainer):
                self._hold_metrics(window, trainer)  # (offered at the next batch's start, or the loop's end)
            else:
                self._offer_metrics(window.plan, trainer, window)  # metrics logged with on_step=True
        # the plan stays open: the run's epoch-level metrics join the last batch's record

    def _eval_defer(self, mode: str, trainer: Trainer) -> bool:
        """Whether user code runs after this callback's ``on_validation_batch_end`` (or test's)."""
        defer = self._eval_defers.get(mode)
        if defer is None:
            hook = {"eval": "on_validation_batch_end", "test": "on_test_batch_end"}.get(mode)
            module = getattr(trainer, "lightning_module", None)
            defer = self._eval_defers[mode] = hook is not None and module is not None and _user_hook_after(
                trainer, module, self, hook, lightning_own=False)
        return defer

    def _remove_forward_hook(self) -> None:
        if self._forward_hook is not None:
            self._forward_hook.remove()
            self._forward_hook = None

    def _eval_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        window = self._eval
        if window is not None:
            self._offer_late_metrics(window)
        if window is not None and window.plan and window.plan.wants("metrics") and window.plan.wants("losses"):
            self._offer_metrics(window.plan, trainer, window, final=True)  # epoch-level aggregates
        elif window is not None and window.mode != "predict" and self._session is not None:
            # The last batch was not a save step of the losses and metrics (of no collection, or of
            # one with its own interval only: trial 18a, weights every 8 steps lost val_loss at eval
            # steps 8 and 16): the run's epoch-level metrics (val_loss, ...) go into a summary record
            # at that step, so rules such as overfit see every epoch.
            self._end_eval(trainer, sync=False)
            plan = self._session.begin_step(window.mode, window.step, summary=True)
            self._eval = summary = _Window(window.mode, plan.step, plan)
            self._offer_metrics(plan, trainer, summary, final=True)
        self._end_eval(trainer, sync=False)
        if self._session is not None and window is not None:
            # the last step of the evaluation, reduced in the background, is judged now, not at the
            # next step's end: after a validation that is a whole training epoch later (trial 36i)
            self._after_decision(trainer, self._session.settle(), window.mode, window.step, sync=False)
        trial_stop = self._trial_at_validation(trainer) if window is None or window.mode == "eval" else False
        # (a distributed_stop agreed here is at this evaluation's last step: eval steps count from 1)
        mode = window.mode if window is not None else "eval"
        step = window.step if window is not None else max(0, self._session.mode_steps[mode] - 1) if self._session else 0
        self._sync_stop(trainer, trial_stop, sync=True, mode=mode, step=step)

    def _end_eval(self, trainer: Trainer, sync: bool) -> None:
        window, self._eval = self._eval, None
        self._acts.detach()
        session = self._session
        if window is None or session is None:
            return
        if session.plan is window.plan:
            self._offer_late_metrics(window)
        decision = session.end_step() if session.plan is window.plan else Decision()
        self._after_decision(trainer, decision, window.mode, window.step, sync=sync)

    # ------------------------------------------------------------------------------ capture
    def split_batch(self, batch: Any) -> tuple[Any, Any]:
        """Inputs and labels of a batch, for the ``inputs`` and ``labels`` collections: a tensor is
        the inputs; a tuple/list holds (inputs, labels, ...); a mapping is searched for the keys
        ``inputs``/``input``/``x``/``features``/``image(s)`` and ``labels``/``label``/``y``/
        ``target(s)``. Override for other batch layouts."""
        if isinstance(batch, torch.Tensor):
            return batch, None
        if isinstance(batch, (list, tuple)):
            return (batch[0] if len(batch) > 0 else None), (batch[1] if len(batch) > 1 else None)
        if isinstance(batch, Mapping):
            inputs = next((batch[k] for k in _INPUT_KEYS if k in batch), None)
            labels = next((batch[k] for k in _LABEL_KEYS if k in batch), None)
            return inputs, labels
        return None, None

    def _capture_batch(self, window: _Window, pl_module: LightningModule, batch: Any) -> None:
        plan = window.plan
        wants = [plan.wants(k) for k in _ACTIVATION_KINDS]
        if any(wants):
            self._acts.attach(pl_module, outputs=wants[0], inputs=wants[1], relu=wants[2],
                              select=lambda name, kind: bool(plan.select(name, kind)), key=id(plan.due),
                              watch=[m for m, _ in self._regions or ()])
        want_inputs, want_labels = plan.wants("inputs"), plan.wants("labels")
        if want_inputs or want_labels:
            inputs, labels = self.split_batch(batch)
            if want_inputs and isinstance(inputs, torch.Tensor):
                plan.add("inputs", inputs.detach(), "inputs")
            if want_labels and isinstance(labels, torch.Tensor):
                plan.add("labels", labels.detach(), "labels")
            if window.mode not in self._said_split:
                found = (("inputs", want_inputs, inputs), ("labels", want_labels, labels))
                missing = [kind for kind, want, got in found if want and not isinstance(got, torch.Tensor)
                           and not _no_labels_by_layout(kind, batch, window.mode)]
                if missing:
                    self._say_split_missing(window, batch, missing)

    def _say_split_missing(self, window: _Window, batch: Any, missing: list[str]) -> None:
        """A WARNING (once per mode) for a save step that wants ``inputs`` or ``labels`` whose batch
        :meth:`split_batch` finds no tensor of them in (trial 29a F2: train batches from a dict of
        dataloaders, ``{"a": [x, y], "b": [x, y]}``, gave the collections nothing in train mode, and
        as eval batches filled them, the run's end said nothing either). Not for the labels of a
        batch that holds none by its layout (a bare tensor, a one-element tuple) nor of predict."""
        self._said_split.add(window.mode)
        session = self._session
        cols = sorted({c.name for c in window.plan.due for kind in missing if c.accepts_kind(kind)})
        rules = _rules_reading(session, set(cols))
        logger.warning(
            "tripwire: %s step %d saves the collection(s) %s, but %s.split_batch found no %s tensor in its batch (%s): "
            "they capture nothing from %s batches (rules reading them: %s). Override split_batch to return (inputs, "
            "labels) for this batch layout (a dict of dataloaders gives {name: batch}: docs/lightning.md, \"Known "
            "limits\")", window.mode, window.step, ", ".join(cols) or " and ".join(missing), type(self).__name__,
            " or ".join(missing), _batch_layout(batch), window.mode, ", ".join(rules) or "none configured")

    def _offer_activations(self, window: _Window) -> None:
        if not self._acts.attached:
            return
        self._acts.detach()
        for name, tensor, kinds in self._acts.take():  # (a complex layer output, an FFT's: its magnitude)
            if name not in window.added and offer(window.plan, name, tensor, kinds):
                window.added.add(name)
        if self._compiled:
            self._check_caught(window)

    def _check_caught(self, window: _Window) -> None:
        """trial 22c: under torch.compile the hooks of a save step fire only where TorchDynamo runs a
        graph compiled with them (docs/lightning.md, "torch.compile"). A save step whose hooks caught
        nothing, or fewer layers than an earlier save step of its mode with the same collections due,
        lost its activations: one WARNING (the first such step), and :meth:`_close` names the
        collections that stopped being captured."""
        acts, key = self._acts, (window.mode, id(window.plan.due))
        if self._regions is None:  # the whole LightningModule: its step ran
            hooked, layers = acts.hooked, acts.caught
        else:  # the compiled submodules that ran in this step (a wrapper's own hooks run eagerly)
            inside = frozenset().union(*(names for m, names in self._regions if id(m) in acts.ran))
            hooked, layers = acts.hooked & inside, acts.caught & inside
        if not hooked:
            return
        caught, best = len(layers), self._caught.get(key, 0)
        if caught and caught >= best:
            self._caught[key] = caught
            return
        session = self._session
        if session is None:  # pragma: no cover - (a window has a session)
            return
        names = tuple(c.name for c in window.plan.due
                      if any(c.accepts_kind(k) and c.name in session.collections for k in _ACTIVATION_KINDS))
        # (where they end up holding nothing, close()'s "had nothing to read" says why, not "a model
        # with no ReLU layer")
        session.empty_because(names, "the compiled model ran a graph compiled without the forward hooks at its save "
                                     f"steps ({_COMPILE_DOC})")
        first, count, cols = self._lost.get(window.mode, (window.step, 0, ()))
        self._lost[window.mode] = (first, count + 1, tuple(dict.fromkeys(cols + names)))
        if len(self._lost) > 1 or count:
            return  # (one WARNING per session)
        rules = _rules_reading(session, names)
        logger.warning(
            "tripwire: %s step %d saves %s, but the forward hooks on %d layer(s) of the compiled model caught %s: "
            "torch.compile ran a graph compiled without them (TorchDynamo skips the guards on empty forward-hook "
            "dicts: torch._dynamo.config.skip_nnmodule_hook_guards = True when that graph was compiled), so these "
            "activations are not captured at this save step, nor likely at later ones, and the rules reading them "
            "(%s) do not judge them. Set torch._dynamo.config.skip_nnmodule_hook_guards = False before the model "
            "first runs (or call torch._dynamo.reset() before the fit) (%s)",
            window.mode, window.step, ", ".join(names) or "activations", len(hooked),
            f"only {caught}" if caught else "nothing", ", ".join(rules) or "none configured", _COMPILE_DOC)

    def _say_lost_activations(self) -> None:
        """The end of the session: which activation collections stopped being captured (trial 22c)."""
        lost, self._lost, self._caught = self._lost, {}, {}
        if not lost:
            return
        said = "; ".join(f"{mode}: {count} save step(s) from step {first} on ({', '.join(cols) or 'activations'})"
                         for mode, (first, count, cols) in lost.items())
        # (the rules reading them: judged on fewer save steps, or none; trial 22e)
        cols = {c for _, _, named in lost.values() for c in named}
        rules = _rules_reading(self._session, cols)
        logger.warning(
            "tripwire: activations of the compiled model stopped being captured: %s caught nothing or fewer layers "
            "than earlier save steps; those collections hold nothing from those steps, and the rules reading them "
            "(%s) did not judge them (%s)", said, ", ".join(rules) or "none configured", _COMPILE_DOC)

    def _offer_metrics(self, plan: StepPlan, trainer: Trainer, window: _Window, final: bool = False) -> None:
        """``final``: at a validation/test loop's end (its epoch aggregates)."""
        if not (plan.wants("metrics") or plan.wants("losses")):
            return
        for name, value in _loop_metrics(trainer, final).items():
            self._offer_logged(window, name, value)

    def _hold_metrics(self, window: _Window, trainer: Trainer) -> None:
        """At this callback's batch end, where user code logs after it (the LightningModule's own
        ``on_*_batch_end``, a callback listed later; trial 23e: such a value was stored one step late,
        the first and last lost): what the loop logged so far, and its result collection, which
        :meth:`_offer_late_metrics` reads again at the step's true end (the next hook)."""
        window.early = dict(_loop_metrics(trainer))
        window.results = getattr(trainer, "_results", None)

    def _offer_late_metrics(self, window: _Window) -> None:
        """The metrics :meth:`_hold_metrics` held, read again from the loop's result collection as
        the step's batch left them (a value logged after this callback's batch end is this step's;
        where the collection was reset meanwhile, the values read at the batch end stand)."""
        early, window.early = window.early, None
        if early is None:
            return
        late = _loop_metrics(None, results=window.results, training=window.mode == "train")
        window.results = None
        for name, value in {**early, **late}.items():
            self._offer_logged(window, name, value)

    def _offer_logged(self, window: _Window, name: str, value: Any) -> None:
        """A value the running loop logged (``self.log``), offered to the step's plan unless the step
        holds its name already (a value read twice). A ``loss`` logged in training where the step
        holds the loss ``training_step`` returned, under the same name: where the two differ (a loss
        logged scaled, summed, or synced across ranks with ``sync_dist=True``), the logged value is
        stored as ``logged/loss`` (:data:`LOGGED_LOSS`), and a WARNING names both once (trial 28e F1:
        it was dropped without a word); where it equals the returned loss (its step's or its last
        micro-batch's), the run's ``loss`` holds it already."""
        if name not in window.added:
            _offer_metric(window.plan, window, name, value)
        elif name == "loss" and window.loss is not None and LOGGED_LOSS not in window.added:
            logged = _one_number(value)
            if logged is None:
                return
            step_loss, last_loss = (float(t) for t in window.loss)  # (a host read: save steps, a name clash only)
            if _same_number(logged, step_loss) or _same_number(logged, last_loss):
                return
            if not window.plan.keeps("losses") or not window.plan.add(LOGGED_LOSS, value.detach() if isinstance(
                    value, torch.Tensor) else value, "losses"):
                return
            window.added.add(LOGGED_LOSS)
            if not self._said_logged_loss:
                self._said_logged_loss = True
                logger.warning(
                    "tripwire: the LightningModule logs 'loss' (self.log) with a value other than the loss its "
                    "training_step returns (train step %d: logged %.6g, returned %.6g): the run's 'loss' is the "
                    "returned loss, which the loss rules read, and the logged value is stored as %r at the save "
                    "steps where the two differ; log it under a name of its own to keep it under that name",
                    window.step, logged, last_loss, LOGGED_LOSS)

    # ------------------------------------------------------------------------------ stopping
    def _after_decision(self, trainer: Trainer, decision: Decision, mode: str, step: int, sync: bool) -> None:
        if not _fitting(trainer):
            self._no_training_to_stop(trainer, decision)
            return
        if decision.stop:
            self._pending_stop = True
        # (a train step's end under DDP with manual optimization combines nothing: see on_train_start)
        self._sync_stop(trainer, False, sync=sync and not (mode == "train" and self._batch_sync), mode=mode, step=step)

    def _no_training_to_stop(self, trainer: Trainer, decision: Decision) -> None:
        """A finding asking ``stop_training`` in a ``trainer.validate()``, ``test()`` or ``predict()``
        run on its own (no fit): there is no training to stop, and Lightning runs every batch of it
        whatever ``trainer.should_stop`` says. The finding is made and recorded (``callback.findings``,
        the run's) and logged by its ``log`` action; nothing is stopped: ``trainer.should_stop`` is left
        as it is, ``stopped_by`` stays None (a fit's stop before it, through this callback, is kept), and
        the run is not marked ``stopped`` for it (the session's ``stopped_by``, set by the decision, is
        cleared). One WARNING per such finding says so, in place of the "stopping training" line (trial
        32d F2: "stopping training" was logged, and the run read ``stopped``, after a ``validate()``
        that ran all of its batches). A ``raise`` action still raises, and ends the run ``stopped``."""
        session = self._session
        found = decision.stopped_by
        if session is not None and session.stopped_by is not None:
            # (each stage runs a session of its own, whose stopped_by starts None: set by a rule's
            # stop_training, which stops nothing here; a raise action raised before this)
            session.stopped_by = None
        if not decision.stop or found is None:
            return
        key = (found.rule, found.mode, found.step)
        if key in self._unstopped:
            return  # (said once: the session holds the first stop's decision for the steps after it)
        self._unstopped.add(key)
        stage = str(getattr(getattr(getattr(trainer, "state", None), "fn", None), "value", None) or self._stage)
        who = f"rank {trainer.global_rank}: " if trainer.world_size > 1 else ""
        logger.warning(
            "tripwire: %srule %r at step %d (%s) asked to stop training, but there is no training to stop in "
            "trainer.%s(): Lightning runs every batch of it; the finding is recorded, and the run is not marked "
            "stopped for it", who, found.rule, found.step, found.mode, stage)

    def _sync_stop(self, trainer: Trainer, extra: bool, sync: bool, mode: str = "eval", step: int = 0) -> None:
        """Act on a stop decision. Under DDP the decision is combined across ranks (any rank
        stops all) at points every rank reaches together: train save steps and validation ends."""
        if not _fitting(trainer):
            return  # (a validate/test/predict on its own: no training to stop, on every rank alike)
        local = self._pending_stop or extra
        stoppers: list[dict[str, Any]] = []  # under DDP: the ranks whose own rule stopped training
        session = self._session
        found = session.stopped_by if session is not None else None
        by_rule = found is not None  # a rule of some rank stopped training (else the tuner did) ...
        broken = found is not None and found.severity != "info"  # ... a broken run (not overtraining's info finding)
        if trainer.world_size > 1:
            if not sync:
                return
            reduce = trainer.strategy.reduce_boolean_decision
            stop = bool(reduce(local, all=False))
            if stop and not self._stopped:  # (every rank is here: the stop was agreed)
                by_rule, broken = bool(reduce(by_rule, all=False)), bool(reduce(broken, all=False))
                # (a collective: every rank calls it, the stopping ones too)
                stoppers = _gather_stoppers(found, trainer.global_rank) if by_rule else []
        else:
            stop = local
        if not stop:
            return
        trainer.should_stop = True
        if self._stopped:
            return
        self._stopped = True
        self._stop_epoch = int(trainer.current_epoch) if mode == "eval" else None
        others = found is None and by_rule  # (this rank stops for another rank's rule)
        if others:
            # named like XGBoost's: a broken run on another rank makes this trial a rule-stopped one
            first = stoppers[0] if stoppers else None
            said = stopper_said(first) if first else "another rank's rule stopped training"
            details: dict[str, Any] = {"stopped_by": stoppers} if stoppers else {}
            if mode != "train" and session is not None and session.mode_steps["train"] > 0:
                details["train_step"] = session.mode_steps["train"] - 1  # (str(finding): "after train step N")
            found = Finding(rule="distributed_stop", step=step, mode=mode, severity="warning" if broken else "info",
                            message=f"{said}; every rank stops at the same step", worker=trainer.global_rank,
                            details=details)
            if session is not None:
                again = session._check_held(replace(found, source=CHECK_SOURCE))  # (a resumed step run again)
                found = session.record_finding(found)  # (as the run holds it: marked a check)
                if not again:  # (its line, once, before the stop's: the rank's own findings are logged alike,
                    # as the log action's: tripwire:, every rank named, rank 0 too; trial 30f F8)
                    logger.log(logging.INFO if found.severity == "info" else logging.WARNING, "%s",
                               log_line(found, trainer.world_size))
                if session.stopped_by is None:
                    # (what stopped this rank: its end marker's stop_reason, which tripwire inspect shows;
                    # trial 26h: rank 0's marker had none, and inspect gave a reason for worker 1 alone)
                    session.stopped_by = found
        if found is not None:
            self._stopped_by = found
            # (the step training stops at too, where it is not the finding's; under DDP the rank, trial 28a F4:
            # two ranks' lines on one console could not be told apart)
            say_stop(found, mode, step, rank=trainer.global_rank if trainer.world_size > 1 else None,
                     train_step=int(trainer.global_step) - 1)
            held = _held_by_minimum(trainer)
            if held:
                logger.warning("tripwire: Lightning does not stop before %s: training goes on until then (the "
                               "Trainer's own rule; lower it to stop at once)", held)
            if trainer.is_global_zero:
                note_rule_stop(self.trial, found)  # a broken run: never the tuner's best

    def _report_trial(self, trainer: Trainer) -> bool:
        if self.trial is None or not trainer.is_global_zero:
            return False
        step = int(trainer.current_epoch) + 1
        if step <= self._last_trial_step:
            return False
        # trial 19b: trainer.callback_metrics holds the training's epoch metrics too (train_loss,
        # train_loss_step): a training metric was reported as the validation's, and a typo was
        # offered them; only what the validation itself logged is a trial_metric
        metrics = self._val_metrics if self._val_metrics is not None else trainer.callback_metrics
        if self.trial_metric not in metrics:
            trained = self.trial_metric in trainer.callback_metrics
            raise ConfigError(
                f"trial_metric: {self.trial_metric!r} was not logged by validation"
                f"{' (training logs it: the trial is told a validation metric)' if trained else ''}"
                f"{did_you_mean(str(self.trial_metric), list(metrics))}; logged by validation: "
                f"{', '.join(sorted(metrics)) or 'nothing'} (self.log in validation_step or on_validation_epoch_end)"
            )
        value = metrics[self.trial_metric]
        value = float(value.item() if isinstance(value, torch.Tensor) else value)
        self._last_trial_step = step
        if self.trial.report(step=step, value=value):
            # (a rule that stopped this training already is why it ends: the tuner's stop of the
            # value it then reported, NaN say, is not; trial 18c: the run said "the tuner stopped")
            if (self._session is None or self._session.stopped_by is None) and not self.trial_stopped:
                # (the first stop only: Lightning trains on to min_epochs, and a later epoch's report,
                # True again, named that epoch and its value as the stop's, trial 36j)
                self.trial_stopped = True
                note_tuner_stop(self._session, self.trial, step, f"epoch {step}", f"{self.trial_metric}={value:.6g}")
                loop = getattr(trainer, "fit_loop", None)
                min_epochs, min_steps = getattr(loop, "min_epochs", None), getattr(loop, "min_steps", None)
                held = ([f"min_epochs={min_epochs}"] if isinstance(min_epochs, int) and step < min_epochs else []) + (
                    [f"min_steps={min_steps}"] if isinstance(min_steps, int) and trainer.global_step < min_steps else [])
                if held:
                    logger.warning("tripwire: the tuner stopped the trial after epoch %d, but Lightning does not stop "
                                   "before %s: training goes on until then, not reported to the tuner (the trial's "
                                   "resource stays %d; the Trainer's own rule: lower it to stop at once)",
                                   step, " and ".join(held), step)
            return True
        return False


def _trainer_processes(trainer: Trainer) -> int:
    """The processes the Trainer's strategy trains in (``num_processes`` times ``num_nodes``; its
    world size once set up), known before the strategy sets up its processes."""
    strategy = trainer.strategy
    counts = []
    for attr in ("num_processes", "num_nodes"):
        try:
            counts.append(int(getattr(strategy, attr, 1) or 1))
        except (TypeError, ValueError, RuntimeError):  # pragma: no cover - another strategy's property
            counts.append(1)
    try:
        world = int(trainer.world_size)
    except (TypeError, ValueError, RuntimeError, AttributeError):  # pragma: no cover
        world = 1
    return max(counts[0] * counts[1], world)


def _strategy_name(strategy: Any) -> str:
    """The name a Trainer's ``strategy=`` gives the strategy (``ddp``, ``ddp_spawn``, ``ddp_fork``: one
    DDPStrategy with a start method each), else its class name."""
    start = getattr(strategy, "_start_method", None)
    if type(strategy).__name__ == "DDPStrategy" and isinstance(start, str):
        return "ddp" if start == "popen" else f"ddp_{start}"
    return getattr(strategy, "strategy_name", None) or type(strategy).__name__


def _refuse_processes(trainer: Trainer, trial: Any) -> None:
    """A tuning trial's fit trains in the one process that runs the trial function: a strategy of
    several processes is refused with a :class:`~tripwire.ConfigError` naming it, before the ranks
    set up (trial 26h: with ``strategy="ddp"`` Lightning's launcher ran the tuner's command line again
    as rank 1, which reached a second ``Tuner.fit()``; the trial ended "worker died with exit code -9",
    nothing named DDP, and every trial of the job did the same). The processes Lightning's ``ddp``
    launcher started for the other ranks are stopped first (taken out of the list its observer
    thread watches, which would otherwise kill this process when they end). The message is the same
    for every trial of a job: the tuner counts a ConfigError repeated so towards fail fast."""
    processes = _trainer_processes(trainer)
    if processes <= 1:
        return
    strategy = trainer.strategy
    name = _strategy_name(strategy)
    launcher = getattr(strategy, "launcher", None)
    children = getattr(launcher, "procs", None)
    started = [p for p in children if isinstance(p, subprocess.Popen)] if isinstance(children, list) else []
    for p in started:  # (the tuner's script run again, a rank each: stopped before it reaches a Tuner.fit)
        children.remove(p)  # type: ignore[union-attr]
    for p in started:
        with contextlib.suppress(OSError):
            p.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            p.wait(timeout=30)
    kind = type(launcher).__name__
    if kind == "_SubprocessScriptLauncher":
        how = (f"Lightning's {name} launcher starts each other rank by running this process's command line again, "
               f"which in a tuning job is the tuner's script (up to a Tuner.fit() of its own), not the trial (the "
               f"processes it started are stopped)")
    elif kind == "_MultiProcessingLauncher":
        how = f"{name} runs each rank in a process of its own, whose copy of the trial cannot report"
    else:
        how = "a trial reports from the one process that runs the trial function"
    raise ConfigError(
        f"TripwireCallback(trial=...): the trial's Trainer trains in {processes} processes (strategy {name!r}), and a "
        f"tuning trial trains in one: {how}; accepted: Trainer(devices=1) in the trial function (the tuner runs "
        f"trials side by side: Tuner(max_parallel_jobs=...))")


def _gather_stoppers(found: Finding | None, rank: int) -> list[dict[str, Any]]:
    """Every rank's stopping finding, for the ranks a rule of their own stopped (a collective:
    every rank calls it together, once, when the stop is agreed; ``[]`` where ``torch.distributed``
    is not set up)."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return []
    mine = None if found is None else stopper_entry(found, rank)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    return [g for g in gathered if g is not None]


def _stop_request(callback: Any) -> tuple[Any, Any]:
    """``(stopped_epoch, stopping_reason_message)`` of a callback that keeps its stop request so
    (Lightning 2.6's ``EarlyStopping``), ``(None, None)`` for any other."""
    return getattr(callback, "stopped_epoch", None), getattr(callback, "stopping_reason_message", None)


def _outside_stop_reason(trainer: Trainer, step: int, me: Any = None) -> str:
    """Why a fit whose ``trainer.should_stop`` this callback (``me``) did not set stopped, for its
    run's ``stop_reason``: another TripwireCallback of the trainer's that stopped it (its rule's
    finding; trial 36q: the second of two read "by another callback (EarlyStopping, Timer)", which
    the trainer did not have), ``EarlyStopping``'s own reason where one of the trainer's stopped it
    (Lightning 2.6 keeps it: ``stopping_reason_message``), a ``Timer`` whose time ran out, else who
    may set it."""
    head = f"trainer.should_stop was set outside tripwire (train step {step})"
    for cb in getattr(trainer, "callbacks", None) or ():
        if isinstance(cb, TripwireCallback) and cb is not me and (cb._stopped or cb.trial_stopped):
            out_dir = cb.out_dir  # (its session may be closed already: the hooks run in the callbacks' order)
            why = cb.stop_reason or (f"rule {cb.stopped_by.rule!r}" if cb.stopped_by is not None else "its tuner")
            head = f"trainer.should_stop was set by another TripwireCallback (train step {step})"
            return f"{head}: {type(cb).__name__}(out_dir={str(out_dir)!r}): {why}"
    for cb in getattr(trainer, "callbacks", None) or ():
        name = type(cb).__name__
        said = getattr(cb, "stopping_reason_message", None)
        if isinstance(said, str) and said:
            monitor = getattr(cb, "monitor", None)
            return f"{head}: {name}{f'(monitor={monitor!r})' if monitor else ''}: {' '.join(said.split())}"
    for cb in getattr(trainer, "callbacks", None) or ():
        remaining = getattr(cb, "time_remaining", None)
        if type(cb).__name__ == "Timer" and callable(remaining):
            try:
                left = remaining()
            except Exception:  # pragma: no cover - another Lightning version's Timer
                continue
            if left is not None and left <= 0:
                return f"{head}: Timer: its duration (the Trainer's max_time) ran out"
    return f"{head}: by another callback (such as EarlyStopping or a Timer) or the LightningModule"


def _held_by_minimum(trainer: Trainer) -> str | None:
    """The Trainer's ``min_epochs``/``min_steps`` not reached yet (Lightning then ignores
    ``should_stop``, saying so at INFO level only), as words; None when it can stop now."""
    loop = getattr(trainer, "fit_loop", None)
    try:
        min_epochs, min_steps = loop.min_epochs, loop.min_steps  # type: ignore[union-attr]
        held = []
        if min_epochs and loop.epoch_progress.current.processed < min_epochs:  # type: ignore[union-attr]
            held.append(f"min_epochs={min_epochs} (epoch {trainer.current_epoch} now)")
        if min_steps and trainer.global_step < min_steps:
            held.append(f"min_steps={min_steps} (step {trainer.global_step} now)")
    except AttributeError:  # pragma: no cover - another Lightning version's internals
        return None
    return " and ".join(held) or None


def _planned_steps(trainer: Trainer, per_batch: float | None = None) -> int | None:
    """Planned optimizer steps (``estimated_stepping_batches``); None when unknown or unbounded.
    ``per_batch``: the optimizer steps a batch takes under manual optimization (``global_step``
    counts each of them; trial 21a): the epochs' batches times it, capped by ``max_steps``, which
    Lightning counts in ``global_step`` too (as are the planned steps of a fit with no epoch bound or
    no dataloader length: ``max_steps``)."""
    try:
        steps = float(trainer.estimated_stepping_batches)
    except Exception:  # no finite dataloader length, or a Lightning without the property
        return None
    if per_batch is not None and per_batch != 1 and math.isfinite(steps):
        try:
            max_epochs, max_steps = trainer.max_epochs, trainer.max_steps
            batches = float(trainer.num_training_batches)
            if max_epochs is not None and max_epochs != -1 and math.isfinite(batches):
                steps = math.ceil(batches / trainer.accumulate_grad_batches) * max(max_epochs, 1) * per_batch
                if max_steps is not None and max_steps != -1:
                    steps = min(steps, float(max_steps))
        except (AttributeError, TypeError, ZeroDivisionError):  # pragma: no cover - a fake trainer
            pass
    return int(round(steps)) if math.isfinite(steps) and steps >= 1 else None


def _train_loss(outputs: Any, pl_module: LightningModule, trainer: Trainer) -> torch.Tensor | None:
    """The training-step loss of one (micro-)batch, detached, as the user returned it."""
    loss = outputs.get("loss") if type(outputs) is dict or isinstance(outputs, Mapping) else outputs
    if not isinstance(loss, torch.Tensor):
        return None
    if loss.requires_grad:  # (automatic optimization's is Lightning's detached clone already: no new tensor)
        loss = loss.detach()
    if loss.dim():
        if loss.numel() != 1:
            return None
        loss = loss.reshape(())
    if trainer.accumulate_grad_batches != 1 and pl_module.automatic_optimization:  # Lightning divides by it
        loss = loss * trainer.accumulate_grad_batches
    return loss


#: Lightning's own callbacks (ModelCheckpoint, the progress bars, LearningRateMonitor, Timer,
#: WeightAveraging's average update, ...; not LambdaCallback) read the parameters at their batch
#: hooks, never write them.
_LIGHTNING_PACKAGES = ("lightning.pytorch.", "pytorch_lightning.")


def _batch_progress(trainer: Trainer) -> Any:
    """The fit loop's training batch progress (``is_last_batch``, ``current.completed``), or None
    (a fake trainer, another Lightning version)."""
    return getattr(getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None), "batch_progress", None)


def _check_same_schedule(trainer: Trainer, session: Session) -> None:
    """Under DDP every rank must save the same train steps: the ranks agree on stopping at each
    saved step (a collective), so ranks whose saves differ wait for each other for ever (trial 17f:
    save_interval 5 on rank 0, 7 on rank 1 hung the fit silently). Refused on every rank at once."""
    mine = {"save": session.config.save.to_dict(),
            **{f"collections.{name}.save": (c.save.to_dict() if c.save is not None else None)
               for name, c in sorted(session.collections.items())}}
    theirs = trainer.strategy.broadcast(mine, src=0)
    differs = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if not trainer.strategy.reduce_boolean_decision(bool(differs), all=False):
        return
    said = "; ".join(f"{k}: {mine.get(k)!r} here, {theirs.get(k)!r} on rank 0" for k in differs[:3])
    raise ConfigError(
        f"under DDP every rank must save the same steps (the ranks agree on stopping at each saved step, and "
        f"ranks that save different steps would wait for each other for ever), but "
        + (f"rank {trainer.global_rank}'s differ from rank 0's: {said}" if differs else "another rank's differ from "
           "rank 0's") + "; accepted: the same save settings (save, save_interval, the collections and rules) on "
                         "every rank")


def _user_hook_after(trainer: Trainer, pl_module: LightningModule, callback: Callback, hook: str,
                     lightning_own: bool = True) -> bool:
    """Whether user code runs at ``hook`` after this callback's: the LightningModule overrides it
    (Lightning calls the callbacks' hook, then the module's), or a callback after this one in
    ``trainer.callbacks`` does (with ``lightning_own=False``, Lightning's own callbacks do not count)."""
    if defines_own(pl_module, hook, LightningModule):
        return True
    callbacks = list(getattr(trainer, "callbacks", None) or ())
    later = next((callbacks[i + 1:] for i, cb in enumerate(callbacks) if cb is callback), [])
    if not lightning_own:  # (LambdaCallback runs the user's functions)
        later = [cb for cb in later if not type(cb).__module__.startswith(_LIGHTNING_PACKAGES)
                 or type(cb).__name__ == "LambdaCallback"]
    return any(defines_own(cb, hook, Callback) for cb in later)


def _grads_may_change(trainer: Trainer, pl_module: LightningModule, callback: Callback) -> bool:
    """Whether the gradients seen in this callback's ``on_before_optimizer_step`` may be changed in
    place before the step's reduction (at the batch end, after the optimizer step), so that they
    must be copied. Lightning 2.6 (``Precision._after_closure``) calls the callbacks'
    ``on_before_optimizer_step`` in order, then the LightningModule's, then
    ``configure_gradient_clipping`` (which clips in place when ``gradient_clip_val`` is set), then
    ``optimizer.step()``. True when the trainer clips, the LightningModule overrides
    ``configure_gradient_clipping`` or ``on_before_optimizer_step``, a callback after this one
    overrides ``on_before_optimizer_step``, or under manual optimization (``training_step`` goes on
    after ``optimizer.step()``: another backward or ``zero_grad(set_to_none=False)`` would change
    them). A few attribute reads, on save steps only."""
    if not getattr(pl_module, "automatic_optimization", True):
        return True
    if getattr(trainer, "gradient_clip_val", None):
        return True
    if defines_own(pl_module, "configure_gradient_clipping", LightningModule):
        return True
    return _user_hook_after(trainer, pl_module, callback, "on_before_optimizer_step")


def _scaler_skips(trainer: Trainer, optimizer: Any) -> bool:
    """Whether fp16 AMP's GradScaler found inf/NaN in this step's (unscaled) gradients, so that it
    skips the optimizer step and lowers its scale: an overflow that mixed precision expects (many
    runs overflow on their first steps at the initial scale), whose gradients are never applied and
    are not captured. Reads the scaler's state (a host sync; only on steps that save gradients)."""
    scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
    if scaler is None:
        return False
    try:  # (the helper a hand-written loop uses too; not unscaled yet, a fused optimizer's: not known, kept)
        return scaler_found_inf(scaler, optimizer) is True
    except (AttributeError, KeyError, TypeError):  # pragma: no cover - another torch version's internals
        return False


LOSS_SCALE = "loss_scale"
"""The name under which fp16 AMP's loss scale is stored (kind ``optimizer``): see
:meth:`TripwireCallback._offer_loss_scale`."""

LOGGED_LOSS = "logged/loss"
"""The name under which a value the LightningModule logs as ``loss`` is stored where it differs from the
loss ``training_step`` returns (the run's ``loss``): see :meth:`TripwireCallback._offer_logged`."""


def _one_number(value: Any) -> float | None:
    """A logged value as a number: a one-element tensor's or a number's; None for anything else."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().reshape(())) if value.numel() == 1 else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _same_number(a: float, b: float) -> bool:
    """Whether a logged value is the returned loss: equal to a few float32 roundings (Lightning logs
    a half-precision loss as float32, and the loss of a step with gradient accumulation is divided by
    the window's length, then multiplied back), or both NaN."""
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-12)


def _offer_metric(plan: StepPlan, window: _Window, name: str, value: Any) -> None:
    """One logged value (a one-element tensor or a number; anything else is left out) as a loss or
    a metric, by its name."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return
        value = value.detach()
    elif not isinstance(value, (int, float)):
        return
    kind = "losses" if "loss" in name.lower() else "metrics"
    if plan.keeps(kind) and plan.add(name, value, kind):  # (a kind nobody asked for is not offered)
        window.added.add(name)


def _epoch_metrics(trainer: Trainer) -> dict[str, Any]:
    """The training loop's epoch-level values: what was logged with ``on_epoch=True`` during
    training (by name; ``<name>_epoch`` for one logged with ``on_step=True`` too, whose plain name
    is its step value), read from ``trainer.callback_metrics``."""
    metrics = trainer.callback_metrics
    names = (f"{meta.name}_epoch" if meta.on_step else meta.name for meta in _logged(trainer) if meta.on_epoch)
    return {name: metrics[name] for name in names if name in metrics}


def _logged(trainer: Trainer | None, results: Any = None) -> list[Any]:
    """What the running loop logged (or the loop whose result collection ``results`` is): the
    metadata (``name``, ``on_step``, ``on_epoch``, ``dataloader_idx``) of each value in Lightning's
    result collection; empty where another Lightning version keeps it elsewhere."""
    try:
        held = results if results is not None else trainer._results  # type: ignore[union-attr]
        return [result.meta for result in held.values()]
    except AttributeError:  # pragma: no cover - another Lightning version's internals
        return []


_PER_LOADER = re.compile(r"/dataloader_idx_\d+$")


def _validation_metrics(trainer: Trainer) -> dict[str, Any] | None:
    """At a validation's end, the epoch-level values it logged (in ``validation_step`` or
    ``on_validation_epoch_end``; ``val_loss/dataloader_idx_0`` per dataloader), by their
    ``trainer.callback_metrics`` names, without the training's (trial 19b); None where Lightning's
    result collection is not available (another version: then ``trainer.callback_metrics``)."""
    if getattr(trainer, "_results", None) is None or trainer.training:
        return None
    metrics = trainer.callback_metrics
    names = _logged_names(trainer, epoch_only=True)
    return {name: value for name, value in metrics.items() if name in names}


def _logged_names(trainer: Trainer, epoch_only: bool = False) -> set[str]:
    """The names the running loop logged, as ``trainer.callback_metrics`` holds them: with several
    dataloaders the connector's view of the finished loop has only the last dataloader's values,
    and a name logged with ``add_dataloader_idx=False`` from another one would be lost."""
    names: set[str] = set()
    for meta in _logged(trainer):
        if epoch_only and not meta.on_epoch:  # (``epoch_only``: the values with an epoch aggregate)
            continue
        for name in (meta.name, f"{meta.name}_epoch"):
            names.add(name)
            if meta.dataloader_idx is not None:
                names.add(f"{name}/dataloader_idx_{meta.dataloader_idx}")
    return names


def _forked(trainer: Trainer | None, results: Any = None) -> list[str]:
    """The running loop's names logged with ``on_step=True`` and ``on_epoch=True``, which Lightning
    also shows as ``<name>_step`` (the same value as ``<name>``) and ``<name>_epoch``."""
    return [meta.name for meta in _logged(trainer, results) if meta.on_step and meta.on_epoch]


def _loop_metrics(trainer: Trainer | None, final: bool = False, results: Any = None,
                  training: bool = True) -> Mapping[str, Any]:
    """Metrics logged by the running loop only (training, validation or test): at a batch end the
    values logged with ``on_step=True``, at a loop's end (``final``) the epoch aggregates, those of
    each dataloader included (``val_loss/dataloader_idx_0``: the connector's view of a finished
    loop with several dataloaders leaves them out, ``trainer.callback_metrics`` has them). Falls
    back to ``trainer.callback_metrics`` where the logger connector is not available.
    ``results``: a loop's result collection, read after that loop's batch end (its ``on_step``
    values as the batch left them; ``training``: the training loop's), empty where it cannot be."""
    if results is not None:
        try:
            views = results.metrics(True)
            metrics = dict(views["callback"])
            if not training:
                metrics.update((k, v) for k, v in views["log"].items() if k not in ("epoch", "step"))
        except (AttributeError, AssertionError, KeyError, TypeError):  # pragma: no cover - other Lightning versions
            return {}
        for name in _forked(None, results):
            if name in metrics:
                metrics.pop(f"{name}_step", None)
        return metrics
    if trainer is None:
        return {}
    connector = getattr(trainer, "_logger_connector", None)
    if connector is not None and getattr(trainer, "_results", None) is not None:
        try:
            views = connector.metrics
            metrics = dict(views["callback"])
            if not final and not trainer.training:
                # a validation/test batch: Lightning keeps its on_step values out of the callback view
                # (they are in the logger's; trial 18b: per-batch validation values were never captured)
                metrics.update((k, v) for k, v in views["log"].items() if k not in ("epoch", "step"))
        except (AttributeError, AssertionError, KeyError):  # pragma: no cover - other Lightning versions
            return dict(trainer.callback_metrics)
        for name in _forked(trainer):  # a value logged on_step and on_epoch: its plain name holds the step value
            if name in metrics:  # (in training; a validation batch's is <name>_step, its plain name the epoch's)
                metrics.pop(f"{name}_step", None)
        if final:
            logged = _logged_names(trainer)
            for name, value in trainer.callback_metrics.items():
                if name not in metrics and (_PER_LOADER.search(name) or name in logged):
                    metrics[name] = value
        return metrics
    return dict(trainer.callback_metrics)
