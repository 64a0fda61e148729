"""``TripwireCallback``: capture, rules and stopping for XGBoost (``xgb.train``, the sklearn API,
``xgboost.dask``). See docs/xgboost.md."""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import math
import os
import re
import sys
import warnings
import weakref
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import xgboost
from xgboost import collective
from xgboost.callback import CallbackContainer, TrainingCallback

import tripwire
from tripwire._config import ActionSpec, Config, check_overrides, load_config
from tripwire._errors import ConfigError, RunNotFoundError, TrainingStopped, TripwireError
from tripwire._finding import Decision, Finding
from tripwire._history import History
from tripwire._run import ANY_RULE, open_run
from tripwire._session import (_XGBOOST_REBOUND, Session, StepPlan, _effective_collections, check_config,
                               rule_set_notes_muted, unregistered_rule_notes_muted)
from tripwire._validate import check_int, check_trial, did_you_mean, keyword_parameters
from tripwire.integrations._hooks import frames_above
from tripwire.integrations._provides import PROVIDES as _PROVIDES
from tripwire.integrations._provides import XGBOOST_HELD_OUT_FIX as _HELD_OUT_FIX
from tripwire.rules import Rule, available_rules
from tripwire.rules._classes import ClassRoundRule
from tripwire.rules._common import BuiltinRule, higher_is_better, matching_tensors, names_in
from tripwire.tune._trial import (TrialLike, note_outside_stop, note_rule_stop, note_tuner_stop, reached_max_resource, trial_facts,
                                  tuner_stop_reason)

from ._evals import _SKLEARN_NAME, EvalSet, check_eval_names, resolve_eval_sets, train_data_as_held_out
from ._trees import (IMPORTANCE_TYPES, ImportanceAccumulator, RoundTrees, TreeStats, parse_model, round_summary,
                     rounds_from, trees_from_round)

__all__ = ["TripwireCallback"]

logger = logging.getLogger("tripwire")

_OPEN: dict[tuple[str, int], tuple[Session, "weakref.ref[TripwireCallback]"]] = {}
"""The session of this process that writes each (out_dir, rank), and its callback (see
_release_abandoned)."""

PROVIDES = _PROVIDES["xgboost"]
"""The kinds this callback captures (a rule or collection needing none of them is refused)."""
_TREE_KINDS = frozenset({"trees", "feature_importance"})
"""What a ``gblinear`` booster cannot give (a rule needing it is refused when its training starts)."""

# Flags combined across workers every round (element-wise max): a rule asked to stop, the tuner
# stopped the trial, this worker raised (its exception is re-raised there; the others stop).
_RULE_STOP, _TRIAL_STOP, _ERROR = 0, 1, 2

_RUNTIME = (
    "_session", "_rank", "_world", "_offset", "_sets", "_valid", "_labels", "_label_width", "_label_cols", "_trial_key",
    "_hp_done", "_imp", "_parsed", "_last_round", "_fi_names", "_trees_ok", "_stopped", "_trial_stopped", "_stop_reason", "_warned", "_rounds",
    "_objective", "_tail", "_metrics_at", "_custom_metric", "_booster", "_recorded", "_depth_since", "_last_step",
    "_inputs_named", "_dtrain", "_leaked", "_leak_said", "_same_rounds", "_earlier_findings", "_custom_obj",
    "_withheld", "_reported_step", "_told_after_end", "_shipped", "_logit_margins",
)


class TripwireCallback(TrainingCallback):
    """An XGBoost ``TrainingCallback`` that captures each boosting round, runs tripwire's rules and
    stops boosting when a rule with the ``stop_training`` action fires.

    ``config``: a YAML path, a mapping or None; ``overrides``: keyword overrides for
    :class:`tripwire.Session` (``out_dir=``, ``rules=[...]``, ``save_interval=``, ...).

    ``trial`` / ``trial_metric``: a tuner trial and the metric to report every round:
    ``"<evalset>-<metric>"`` (``"validation-auc"``) or a metric name alone (``"auc"``, as
    ``eval_metric`` names it: that metric of the validation set below); default: the last metric
    of the last evaluation set, XGBoost's early stopping convention. Boosting stops when
    ``trial.report`` returns True.

    ``eval_names``: ``"auto"`` (default), a mapping ``{xgboost name: tripwire name}`` or None (see
    docs/xgboost.md: sklearn's ``validation_0``/``validation_1`` become ``train``/``validation``
    when the first is the training data). ``validation_set``: the evaluation set whose labels and
    predictions are captured and that ``overfit``/``overtraining`` compare with the training set
    (default: the last set that is not the training data, the one XGBoost's early stopping watches, a set
    named as a validation set first, then one not named as a test set: :func:`_default_validation`).

    ``num_boost_round``: the rounds this training will run (XGBoost does not tell its callbacks);
    rules with windows scale with it (docs/rules.md). Default: the trial's ``max_resource`` with a
    trial, else the ``num_boost_round`` of the ``xgboost.train`` call running the callback (the
    sklearn API's ``n_estimators``), counted on from a continued model's rounds; unknown where
    neither can be read (the rules' fixed fallbacks).

    ``ranks``: the workers that capture, write and evaluate rules in distributed training:
    ``"auto"`` (the config's ``writer.ranks`` when it lists ranks, else rank 0 only), ``"all"`` or a
    list of ranks. Every worker takes the same stop decision at the same round.

    After training: ``findings`` (the :class:`tripwire.Finding` objects of its trainings, in training
    order), ``stopped_by`` (the finding that stopped boosting, or None), ``stop_reason``,
    ``trial_stopped`` (``trial.report`` returned True: pruned, or at ``max_resource``), ``history`` (the last training's
    :class:`tripwire.History` in this process, else None) and ``out_dir``; read back from the run
    directory when the callback did not train in this process (``xgboost.dask``, sklearn's clones).
    """

    def __init__(
        self,
        config: str | Path | Mapping[str, Any] | Config | None = None,
        *,
        trial: TrialLike | None = None,
        trial_metric: str | None = None,
        eval_names: str | Mapping[str, str] | None = "auto",
        validation_set: str | None = None,
        ranks: str | Sequence[int] = "auto",
        num_boost_round: int | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__()
        check_overrides(type(self).__name__, overrides, keyword_parameters(type(self)))  # (trial 24h)
        with unregistered_rule_notes_muted():  # (check_config refuses an unknown rule: said once, trial 26h)
            cfg = load_config(config, **overrides)
        rules = check_config(cfg, framework="xgboost", provides=PROVIDES)  # what rules need: here, not in training
        self._stop_rules = frozenset(r.name for r in rules if _rule_stops(r, cfg))
        # rules reading trees or feature importance, which a gblinear booster has not (refused at its start)
        needs = {r.name: sorted({q.collection for q in r.requirements()} & _TREE_KINDS) for r in rules}
        self._tree_rules = {name: kinds for name, kinds in needs.items() if kinds}
        # a metric name alone ('auc') is read from the validation set; which names exist is known at
        # the first round (trial 22b: 'auc' was refused here, with an example of no such set)
        check_trial(trial, trial_metric, example="'<evalset>-<metric>' or a metric name", metric_required=False)
        self._trial = trial
        self._trial_metric = trial_metric
        self._eval_names = check_eval_names(eval_names)
        if validation_set is not None and (not isinstance(validation_set, str) or not validation_set):
            raise ConfigError(f"validation_set: got {validation_set!r}; accepted: None or an evaluation set name")
        self._validation_set = validation_set
        self._ranks = _check_ranks(ranks)
        self._num_boost_round = _check_num_boost_round(num_boost_round)
        # Last, once every argument is checked (a constructor that fails claims no directory): the
        # default out_dir is fixed now, so that every worker (and the client) agrees on it.
        self._claimed: str | None = None  # the default out_dir this constructor made (still empty)
        # out_dir reports the default as the other callbacks do, relative to the current directory
        # (tripwire-runs/run-<date>-<time>), while the workers write to its absolute path (trial 26f:
        # XGBoost's cb.out_dir was absolute, MXNet's, Lightning's and Keras's relative)
        self._shown_out_dir: str | None = None
        if cfg.out_dir is None:
            default = cfg.resolved_out_dir()
            cfg = replace(cfg, out_dir=str(default.absolute()))
            self._claimed = cfg.out_dir
            self._shown_out_dir = str(default)
        self._config = cfg
        self._pending_state: dict[str, Any] | None = None
        # the findings of this callback's earlier trainings in this process, in training order (see findings)
        self._earlier_findings: list[Finding] = []
        self._reset_runtime()

    # ------------------------------------------------------------------------------- public
    @property
    def config(self) -> Config:
        return self._config

    @property
    def out_dir(self) -> Path:
        """Where the run is written: the ``out_dir`` given, else ``tripwire-runs/<name>`` with a
        ``name``, else the new ``tripwire-runs/run-<date>-<time>`` claimed when the callback was made;
        a default relative to the current directory then, as every integration reports it (every
        Dask worker writes to its absolute path, fixed then)."""
        return Path(getattr(self, "_shown_out_dir", None) or self._config.out_dir or ".")

    @property
    def _run_dir(self) -> Path:
        """The run directory the workers write, the absolute path of a default ``out_dir``."""
        return Path(self._config.out_dir or ".")

    @property
    def findings(self) -> list[Finding]:
        """The findings of this callback's trainings, in training order: of every training it ran in
        this process (a callback trained twice, in a fold loop of your own or a cell run again,
        holds both trainings' findings, as the run does: trial 28i F2, it held only the last's);
        read back from the run directory when it trained elsewhere (``xgboost.dask`` workers,
        sklearn's clones: every fold's findings, in the order they were found, fold after fold).
        A copy (a clone, a pickle) starts with none of its own."""
        if self._session is not None:
            return [*self._earlier_findings, *self._session.findings]
        return self._stored_findings()

    @property
    def stopped_by(self) -> Finding | None:
        """The finding that stopped boosting (None when no rule stopped it)."""
        if self._session is not None:
            return self._session.stopped_by
        return self._stored_stop()[0]

    @property
    def history(self) -> History | None:
        """The :class:`tripwire.History` of the last training in this process (what the rules read),
        or None before one (and where it trained elsewhere: read the run with ``tripwire.open_run``)."""
        return self._session.history if self._session is not None else None

    @property
    def trial_stopped(self) -> bool:
        """Whether ``trial.report`` returned True in the last training (the scheduler pruned the trial,
        or it reached ``max_resource``: a completed trial; the journal's status tells which), as on the
        Lightning and Keras callbacks; False when a rule stopped boosting first."""
        return self._trial_stopped

    @property
    def stop_reason(self) -> str | None:
        """Why boosting stopped (a rule, the tuner, another worker, another callback such as XGBoost's
        ``EarlyStopping``: ``boosting was stopped outside tripwire at round N ...``), or None. In this
        process when it trained here; read back from the run directory when it trained elsewhere
        (``xgboost.dask`` workers): the reason its workers wrote, else the finding that stopped it."""
        if self._stop_reason is not None:
            return self._stop_reason
        if self._session is not None:
            # (the raise action's stop sets no reason of this callback's: the session's finding is it;
            # trial 42e F3, None where the run's end marker and tripwire inspect named the finding)
            return self._session.why_stopped if self._stopped else None
        return self._stored_stop()[1]

    @stop_reason.setter
    def stop_reason(self, value: str | None) -> None:
        self._stop_reason = value

    def close(self, status: str | None = None) -> None:
        """End the run of this callback's last training where XGBoost did not (it calls no
        ``after_training`` when training raises: Ctrl-C, another callback's error): ``failed``
        (``stopped`` when a rule or the tuner stopped it) unless ``status`` says otherwise. Nothing
        to do after a training that ended normally; a later training of this callback continues
        the run."""
        session = self._session
        if session is None or session.writer is None or session.writer.closed:
            return
        _forget(session)
        status = status or ("stopped" if self._stopped else "failed")
        if status == "failed" and sys.exc_info()[1] is None and session.stop_reason is None:
            # (no exception at hand to name: trial 38k, a Ctrl-C in another callback, then close(), left a
            # failed run with no reason at all)
            session._failure = ("the training ended before XGBoost's after_training (an exception outside this "
                                "callback: another callback's, a Ctrl-C, the data's), and close() ended the run")
        session.close(status)

    def state_dict(self) -> dict[str, Any]:
        """The session's state (rule streaks, step counters), for checkpoints."""
        return {"session": self._session.state_dict() if self._session is not None else self._pending_state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; applied to the session of the next training."""
        session = state.get("session")
        self._pending_state = dict(session) if session is not None else None
        if self._session is not None and session is not None:
            self._session.load_state_dict(session)

    # ------------------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        # The session (threads, files) is never pickled: each worker makes its own in before_training.
        # A copy (Dask worker, sklearn clone) starts fresh; resume explicitly with load_state_dict.
        # This one may then train elsewhere: its printed form reads the run's state (trial 40f F3); the
        # copy has trained nowhere yet (_shipped is in _RUNTIME)
        self._shipped = True
        return {k: v for k, v in self.__dict__.items() if k not in _RUNTIME}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._earlier_findings = []  # (a copy's findings are its own trainings')
        self._reset_runtime()
        self._copied = True  # (its printed form reads the run's state, as its findings are read: see __repr__)

    def _reset_runtime(self) -> None:
        self._session: Session | None = None
        self._shipped = False  # (a copy of it was made, for workers that may train elsewhere: see __getstate__)
        self._rank = 0
        self._world = 1
        self._offset = 0
        self._sets: list[tuple[EvalSet, Any]] | None = None
        self._valid: Any = None
        self._labels: np.ndarray | None = None  # (rows, label columns) of this worker's validation set
        self._label_width = 1  # label columns before the predictions in the rows _local_eval_rows gives
        self._label_cols: list[Any] = []
        self._trial_key: tuple[str, str] | None = None
        self._hp_done = False
        self._imp: ImportanceAccumulator | None = None
        self._parsed = 0
        self._last_round: RoundTrees | None = None
        self._fi_names: dict[str, list[str]] = {}
        self._trees_ok = True
        self._stopped = False
        self._trial_stopped = False  # the trial's report returned True in this training (trial_stopped)
        self._reported_step = 0  # the last step reported to the trial (rank 0; 0: none yet)
        self._told_after_end = False  # a report after boosting ended returned True (see _report_untold)
        self._stop_reason: str | None = None
        self._warned: set[str] = set()
        self._rounds: int | None = None  # the rounds this training was asked for (num_boost_round)
        self._booster: weakref.ref[Any] | None = None  # the booster the rounds train (see _trained_model)
        self._custom_metric = False  # the xgboost.train call has a custom_metric (feval) of its own
        self._custom_obj = False  # the xgboost.train call has an objective of its own (obj=)
        # that objective's margins are most likely logits (see _logit_margins): rmse and mae of them too
        # are computed on raw margins
        self._logit_margins = False
        # {rule: [parameter]}: defaults not pointed at a metric XGBoost computed on raw margins (see
        # _margin_metrics; said in one WARNING, not again as inputs that read nothing)
        self._withheld: dict[str, list[str]] = {}
        self._objective: str | None = None  # the booster's objective (binary:logistic, rank:pairwise ...)
        self._tail: tuple[int, Mapping[str, Any]] | None = None  # the last round's step and evals_log
        self._metrics_at: dict[str, int] = {}  # per mode: the last step whose metrics were recorded
        # per kind (trees, feature_importance): the model's rounds when it was last recorded (trial 24a:
        # with a save interval of its own, the rounds after its last save were never recorded)
        self._recorded: dict[str, int] = {}
        self._depth_since: int | None = None  # the deepest tree this training added since trees were last recorded
        self._last_step: int | None = None  # the step of this training's last round, where the call says it
        self._inputs_named = False  # the rules' loss and metric names were checked against what XGBoost logs
        self._dtrain: Any = None  # the training DMatrix of the xgboost.train call (None where not found)
        self._leaked: list[EvalSet] = []  # the evaluation sets that are the training data where held-out data was meant
        self._leak_said = False  # the eval_is_train finding was recorded (once a training)
        # per held-out set (raw name): the rounds from the start whose metrics all equal the training
        # set's (-1 once a round differs: never the training data's)
        self._same_rounds: dict[str, int] = {}

    # -------------------------------------------------------------------------- XGBoost hooks
    def before_training(self, model: Any) -> Any:
        with _warnings_of_the_caller():  # XGBoost's own warnings (it configures here) point at the caller
            return self._before_training(model)

    def after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Mapping[str, Sequence[Any]]]) -> bool:
        if self._sets is not None:
            return self._after_iteration(model, epoch, evals_log)
        with _warnings_of_the_caller():  # the first round: the first prediction, tree read, ...
            return self._after_iteration(model, epoch, evals_log)

    def _before_training(self, model: Any) -> Any:
        if hasattr(model, "cvfolds"):  # xgb.cv's packed booster
            self._drop_claim()
            raise TypeError(
                f"TripwireCallback works with xgb.train, the sklearn API and xgboost.dask; got a "
                f"{type(model).__name__} (xgb.cv is not supported: its callbacks see every fold's booster packed "
                f"into one). {_CV_WORKAROUND}"
            )
        pending = self._pending_state
        if self._session is not None:  # an earlier training (closed here where it raised: no after_training came)
            self.close()
            self._earlier_findings += self._session.findings  # (an earlier training of this callback: findings)
        self._reset_runtime()
        self._rank, self._world = int(collective.get_rank()), max(1, int(collective.get_world_size()))
        self._offset = int(model.num_boosted_rounds())
        if self._tree_rules and _booster_kind(model) == "gblinear":
            name, kinds = next(iter(self._tree_rules.items()))
            self._drop_claim()
            raise ConfigError(
                f"rules[{name}]: needs {', '.join(map(repr, kinds))}, which booster='gblinear' does not have (a linear "
                f"model: no trees); remove the rule ({', '.join(self._tree_rules)}) or train with booster='gbtree' or 'dart'"
            )
        call = _calling_locals(_xgboost_train) or {}  # the arguments of the xgboost.train call running us
        given = call.get("num_boost_round")
        given = int(given) if isinstance(given, int) and not isinstance(given, bool) and given > 0 else None
        self._rounds = self._num_boost_round or given
        # the last round, where every collection is recorded (see _capture); the call's own count first
        last = given or self._num_boost_round
        self._last_step = None if last is None else self._offset + last - 1
        self._custom_metric = call.get("custom_metric") is not None or call.get("feval") is not None
        self._custom_obj = call.get("obj") is not None
        self._logit_margins = self._custom_obj and _logit_margins(call, sklearn=_from_sklearn())
        self._check_some_rank_writes()
        if self._captures(self._rank, self._world):
            self._release_abandoned()
            with rule_set_notes_muted():  # the constructor logged them
                self._session = Session(self._config, framework="xgboost", rank=self._rank, world_size=self._world,
                                        provides=PROVIDES)
            # (a training runs: a process that exits before its first round ends, with the error caught
            # by the caller's loop, ends it failed, not complete; trial 42e F2)
            self._session.training = True
            if pending is not None:
                self._session.load_state_dict(pending)
            if self._trial is not None:
                self._session.set_meta(trial=trial_facts(self._trial, self._trial_metric))
            if self._config.out_dir or self._config.name:
                _OPEN[(str(Path(self._session.out_dir).resolve()), self._rank)] = (self._session, weakref.ref(self))
            planned = self._num_boost_round
            if planned is None and self._trial is not None:
                # the trial's resource counts the model's rounds (trial.report's step): a continued
                # model's own rounds are not this training's
                resource = getattr(self._trial, "max_resource", None)
                planned = int(resource) - self._offset if isinstance(resource, int) and resource > self._offset else None
            if planned is None:
                planned = self._rounds
            if planned is not None:
                # the rounds this training runs, a continued model's rounds not counted: the rules'
                # windows count from this training's first step (trial 24a: xgb_model= with 2000 rounds
                # and num_boost_round=500 planned 2500, and loss_not_decreasing came at 50% of the
                # training instead of 10%)
                self._session.set_planned_steps(int(planned))
            if self._offset:  # xgb_model=: rounds count on from the booster's, after the run's records
                starts = {"train": self._offset, "eval": self._offset}
                if pending is None:
                    # the built-in rules judge this training's rounds from its first (trial 30c F7: armed at
                    # 0, tree_depth said "the rounds up to 15" where it had judged round 15 alone, and its
                    # no-split test counted the loaded model's 15 rounds as this training's), and the run
                    # records that it did, for tripwire watch to arm its rules there too (trial 37f)
                    for rule in self._session.rules:
                        if isinstance(rule, BuiltinRule):
                            rule.rearm(starts, continued=False)
                self._session.continues(judged_from=starts if pending is None else None)
            self._pending_state = None
            collections = self._session.collections
        else:
            # (the rules the capturing worker's session runs: a rule set's members XGBoost can feed)
            with rule_set_notes_muted():
                rules = check_config(self._config, framework="xgboost", provides=PROVIDES)
            collections = _effective_collections(self._config, rules, "xgboost")
        # Collections that would take the validation labels or predictions (every worker needs to
        # know: gathering them across workers is a collective call).
        self._label_cols = [c for c in collections.values() if c.matches("labels", "labels") or c.matches("predictions", "predictions")]
        self._objective = _objective_name(model)
        unclassed = _not_classes(self._objective or "", custom=call.get("obj") is not None)
        off: list[str] = []
        if unclassed is not None and self._session is not None:
            # every class rule, configured or not, recorded as off with why (the worker meta's
            # switched_off): tripwire watch does not judge them on this run (trial 26h: it inferred the
            # objective from the metrics' names and values)
            what, labels, predictions, _ = unclassed
            classes = {n for n, c in available_rules().items() if isinstance(c, type) and issubclass(c, ClassRoundRule)}
            classes |= {r.name for r in self._session.rules if isinstance(r, ClassRoundRule)}
            off = self._session.switch_off(
                sorted(classes),
                why=f"{what}: the validation labels are {labels} and the predictions {predictions}, not classes")
        if self._label_cols and unclassed is not None:
            # relevance grades and ranking scores, or counts and their rates (all below 1 on sparse
            # counts), read as classes and class predictions: a perfect ranker (ndcg 1.0) was stopped
            # by class_imbalance at round 1; a healthy count:poisson model was flagged (trial 16h).
            # The class rules are off; the labels and predictions the config itself asks for are
            # still captured (for the user's own analysis), those only the class rules wanted are not.
            what, labels, predictions, hint = unclassed
            self._label_cols = [c for c in self._label_cols if c.name in self._config.collections]
            if self._session is not None and not self._label_cols:
                self._session.unavailable(["labels", "predictions"])
            kept = ("labels and predictions are captured as the config asks" if self._label_cols
                    else "labels and predictions are not captured")
            rules = (f"{' and '.join(off)} (which {'judges' if len(off) == 1 else 'judge'} classifiers) "
                     f"{'is' if len(off) == 1 else 'are'} off for this training" if off else "")
            if off or not self._label_cols:
                self._warn_once(
                    what,
                    f"tripwire: {what}: the validation labels are {labels} and the "
                    f"predictions {predictions}, not classes, so " + ", and ".join(x for x in (kept, rules) if x)
                    + hint)
        return model

    def _after_iteration(self, model: Any, epoch: int, evals_log: Mapping[str, Mapping[str, Sequence[Any]]]) -> bool:
        step = self._offset + epoch
        if self._booster is None:
            with contextlib.suppress(TypeError):  # (a booster without weak references: the one after_training gets)
                self._booster = weakref.ref(model)
        self._tail = (step, evals_log)
        flags = np.zeros(3)
        error: BaseException | None = None
        found_stop: Decision | None = None
        if self._sets is None:
            try:  # the same on every worker (same evaluation sets, same config)
                self._setup_evals(evals_log, model)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                error = exc
        # Collective calls (the gather, the final allreduce) run on every worker in the same order
        # whatever happens locally; a local failure is carried in the flags and re-raised after.
        arrays = None
        if error is None and self._wants_eval_arrays(step):
            try:
                rows = self._local_eval_rows(model)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                error, rows = exc, np.zeros((0, 2))
            arrays = self._eval_arrays(rows)
        if error is None:
            try:
                if self._session is not None:
                    self._check_eval_is_train(self._session, step, evals_log)
                    found_stop = self._capture(model, step, evals_log, arrays)
                    if found_stop.stop:  # 2: a broken run; 1: an info finding's stop (overtraining)
                        finding = found_stop.stopped_by or self._session.stopped_by
                        flags[_RULE_STOP] = 1 if finding is not None and finding.severity == "info" else 2
                if self._trial is not None:
                    value = self._trial_value(evals_log)  # every worker checks the metric exists
                    told = self._rank == 0 and self._trial.report(step=step + 1, value=value)
                    if self._rank == 0:
                        self._reported_step = step + 1
                    if told:
                        flags[_TRIAL_STOP] = 1
                        note_tuner_stop(self._session, self._trial, step + 1, _rounds(step + 1),
                                        f"{self._trial_metric_name()}={value:.6g}")
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the other workers learn of it
                error = exc
        if error is not None:
            flags[_ERROR] = 1
        if self._world > 1:
            flags = collective.allreduce(flags, collective.Op.MAX)
        if error is not None:
            self._stopped = True
            if self._session is not None:
                if isinstance(error, TrainingStopped):  # the raise action: this round recorded, as at a stop
                    self._record_stopped_round(model)
                self._session.close("stopped" if isinstance(error, TrainingStopped) else "failed")
            raise error
        if not flags.any():
            return False
        self._stopped = True
        if found_stop is not None and found_stop.stop:
            self._stop_reason = found_stop.reason
            if self._rank == 0:  # a broken run: never the tuner's best
                note_rule_stop(self._trial, found_stop.stopped_by or self._session.stopped_by)  # type: ignore[union-attr]
        elif flags[_TRIAL_STOP]:
            self._trial_stopped = True
            # a trial that ran its max_resource completed its training (the run says "complete"),
            # and one that also ran every round it was asked for was not stopped at all
            self._stopped = not reached_max_resource(self._trial, step + 1)
            if not self._stopped and self._rounds is not None and step + 1 - self._offset >= self._rounds:
                return True
            if self._rank == 0 and getattr(self._trial, "cancelled", False):
                self._stop_reason = tuner_stop_reason(self._trial, _rounds(step + 1))
            else:
                reason = getattr(self._trial, "stop_reason", None) if self._rank == 0 else None
                self._stop_reason = f"the tuner stopped the trial after {_rounds(step + 1)}" + (f": {reason}" if reason else "")
        elif flags[_RULE_STOP]:
            self._stop_reason = f"a rule stopped training on another worker at round {step + 1}"
            if self._rank == 0 and flags[_RULE_STOP] > 1:  # a broken run: never the tuner's best
                note_rule_stop(self._trial, Finding(rule="distributed_stop", step=step, mode="train",
                                                    message=self._stop_reason))
        else:
            self._stop_reason = f"another worker failed at round {step + 1}"
        return True

    def after_training(self, model: Any) -> Any:
        trained = self._trained_model(model)
        self._booster = None
        if self._session is not None:
            _forget(self._session)
            self._session.training = False  # (boosting reached its end)
            try:
                with self._session._judged_after_end():  # (boosting has ended: a stop asked now stops nothing)
                    asks_stop = self._capture_tail(trained)
            except BaseException as exc:
                # the raise action judging the last round (trial 22d: the run was left open, then marked
                # failed at exit): what the round's train record left out (its evaluation sets'
                # metrics) is recorded, and the run ends stopped, as at a raise in any round
                self._stopped = True
                if isinstance(exc, TrainingStopped):
                    self._record_stopped_round(trained)
                self._session.close("stopped" if isinstance(exc, TrainingStopped) else "failed")
                raise
            outside = self._outside_stop(trained)
            if outside is not None:
                # (trial 30c F4: a stop by XGBoost's EarlyStopping read complete, with no reason)
                self._stop_reason = outside
                if self._session.stop_reason is None:
                    self._session.stop_reason = outside
            try:
                self._report_untold()
                if outside is not None and self._trial is not None and self._rank == 0 and (
                        not self._trial_stopped or self._told_after_end):
                    # the trial's journaled reason says why its resource is below max_resource, as the
                    # Lightning and Keras callbacks tell it (trial 35b: it read a bare "completed"); also
                    # where the round that stop ended at was a rung the tuner then stopped the trial at
                    # (trial 36j: the journal said the tuner stopped it, the run the EarlyStopping)
                    note_outside_stop(self._trial, outside)
                if outside is not None and self._told_after_end:
                    why = getattr(self._trial, "stop_reason", None)
                    self._stop_reason = self._session.stop_reason = (
                        f"{outside}; at that round the tuner stopped the trial" + (f" ({why})" if why else ""))
            except BaseException:
                self._session.close("failed")
                raise
            self._session.close("stopped" if self._stopped or asks_stop or outside is not None else "complete")
        else:
            self._report_untold()
        return model

    def _report_untold(self) -> None:
        """Report to the trial the rounds this training trained and did not tell it of (rank 0): a
        callback listed before this one that stopped boosting (XGBoost's ``EarlyStopping``, its
        ``after_iteration`` returning True) ended the last round before this callback's
        ``after_iteration`` ran, as XGBoost calls the callbacks until the first that asks to stop.
        Each such round is reported at its step (the rounds in the model), with its value from the
        evaluation log (trial 33c F1: a trial that trained 4 rounds was told 3, the journal's resource
        read 3 and its objective was a value never reported). Nothing where the trial was stopped
        already (its report returned True), where this training was stopped or raised, or where no
        round reached this callback (the metric is not known then). ``trial_stopped`` turns True when
        such a report returns True (the round reached the trial's ``max_resource``, say); the training
        has ended already, and its stop reason is left as it is."""
        if (self._trial is None or self._rank != 0 or self._stopped or self._trial_stopped or self._tail is None
                or self._trial_key is None):
            return
        raw, metric = self._trial_key
        values = self._tail[1].get(raw, {}).get(metric) or []
        for step in range(max(self._reported_step, self._offset) + 1, self._offset + len(values) + 1):
            value = values[step - self._offset - 1]
            told = self._trial.report(step=step, value=float(value[0] if isinstance(value, tuple) else value))
            self._reported_step = step
            if told:
                self._trial_stopped = self._told_after_end = True
                return

    def _outside_stop(self, model: Any) -> str | None:
        """Why boosting stopped, where no stop of this callback's (a rule's, the tuner's, another
        worker's) ended it and another callback did: XGBoost's ``EarlyStopping`` (or a subclass) of
        the training whose patience ran out, or, where the rounds the ``xgb.train`` call asked for are
        known, any callback that ended the training before its last round (its ``after_iteration`` or
        ``before_iteration`` returned True). The reason names the round and ``EarlyStopping``'s own
        facts: its set and metric, the improvement it waited for, its best value and round. None where
        the training ran every round asked for (an ``EarlyStopping`` whose patience ran out at the last
        round ended nothing early), or where nothing says it was cut short."""
        if self._stopped or self._trial_stopped:
            return None
        if self._tail is None:
            return self._unseen_stop(model)
        step, evals_log = self._tail
        logged = max((len(values) for metrics in evals_log.values() for values in metrics.values()), default=0)
        try:
            rounds = int(model.num_boosted_rounds())
        except Exception:  # noqa: BLE001 - a booster that cannot say: the rounds logged tell
            rounds = 0
        last = max(step, self._offset + logged - 1, rounds - 1)
        short = self._last_step is not None and last < self._last_step
        others = self._other_callbacks()
        stopper = next((c for c in others if isinstance(c, xgboost.callback.EarlyStopping) and c.stopping_history
                        and isinstance(c.rounds, int) and c.current_rounds >= c.rounds), None)
        if not short and (stopper is None or self._last_step is not None):
            return None
        asked = self._last_step - self._offset + 1 if self._last_step is not None else None
        head = (f"boosting was stopped outside tripwire at round {last}"
                + (f" ({_rounds(last - self._offset + 1)} of the {asked} asked for)" if asked is not None else ""))
        if stopper is not None:
            return f"{head}: {self._early_stopping_facts(stopper, model)}"
        return f"{head}: {_by_another(others)}"

    def _unseen_stop(self, model: Any) -> str | None:
        """:meth:`_outside_stop` where no round reached this callback: another callback listed before
        it stopped boosting at its first round (its ``after_iteration`` returned True at round 0, and
        XGBoost then calls no later callback's), or any callback's ``before_iteration`` returned True
        before the first round was trained. The model holds fewer rounds than were asked for;
        that round's metrics never reached this callback, so the run holds no record of it (trial
        36q: the run read ``complete``, with no reason, and held nothing). None where the rounds asked
        for are not known, or were all trained."""
        try:
            trained = int(model.num_boosted_rounds()) - self._offset
        except Exception:  # noqa: BLE001 - a booster that cannot say: nothing is claimed
            return None
        if trained < 0 or self._last_step is None:
            return None
        asked = self._last_step - self._offset + 1
        if trained >= asked:
            return None
        if trained == 0:
            # (trial 38e: a before_iteration that returned True at the first round, a time budget spent
            # already, left the run complete with no reason and no round trained)
            return (f"boosting was stopped outside tripwire before its first round, round {self._offset} (none of "
                    f"the {_rounds(asked)} asked for was trained): {_by_another(self._other_callbacks())}; no round "
                    f"ran, so the run holds no record of this training")
        last = self._offset + trained - 1
        return (f"boosting was stopped outside tripwire at round {last} ({_rounds(trained)} of the {asked} asked for), "
                f"before this callback saw a round: {_by_another(self._other_callbacks())}; XGBoost calls no later "
                f"callback then, so the round's metrics, trees and importance are not recorded")

    def _other_callbacks(self) -> list[Any]:
        """The other callbacks of the ``xgb.train`` call running this one (its CallbackContainer's)."""
        container = (_calling_locals(lambda f: isinstance(f.f_locals.get("self"), CallbackContainer)) or {}).get("self")
        return [c for c in getattr(container, "callbacks", None) or () if c is not self]

    def _early_stopping_facts(self, es: Any, model: Any) -> str:
        """``EarlyStopping(data_name=..., metric_name=...): early stopping: <set>-<metric> did not
        improve ...; best <value> at round <n>``, from an ``EarlyStopping`` whose patience ran out."""
        raw = next(iter(es.stopping_history))
        metric = next(iter(es.stopping_history[raw]))
        name = next((s.name for s, _ in self._sets or [] if s.raw == raw), raw)
        seen = f"{name}-{metric}" + (f" (XGBoost's {raw}-{metric})" if name != raw else "")
        way = "rise" if es.maximize else "fall"
        delta = float(getattr(es, "_min_delta", 0.0) or 0.0)
        did = (f"{seen} did not {way} by more than min_delta={delta:g} in the last {_rounds(es.current_rounds)} "
               f"(rounds={es.rounds})")
        best = (es.best_scores.get(raw, {}).get(metric) or [None])[-1]
        if best is not None:
            at = model.attr("best_iteration") if hasattr(model, "attr") else None
            value = float(best[0] if isinstance(best, tuple) else best)
            did += f"; best {value:.6g}" + (f" at round {at}" if at else "")
        return f"{type(es).__name__}(data_name={raw!r}, metric_name={metric!r}): early stopping: {did}"

    def _trained_model(self, model: Any) -> Any:
        """The booster that trained, where a callback listed before this one handed ``after_training``
        a slice of it (XGBoost's ``EarlyStopping(save_best=True)`` returns ``booster[:best + 1]``; trial
        22h: the last round's importance was read from that slice, labelled with the last round, and
        with ``save_interval=1`` the last round's trees were never recorded). The booster of the
        rounds is the one ``after_iteration`` saw (still held by ``xgb.train`` while its callbacks'
        ``after_training`` run); ``model`` where it is gone or holds no more rounds."""
        held = self._booster() if self._booster is not None else None
        if held is None or held is model:
            return model
        try:
            return held if int(held.num_boosted_rounds()) > int(model.num_boosted_rounds()) else model
        except Exception:  # noqa: BLE001 - a booster that cannot say: the one handed over
            return model

    def _capture_tail(self, model: Any) -> bool:
        """The last round, where it was not a save step, recorded when training ends and judged by
        the rules, as the other integrations judge the losses kept since the last save step: its
        metrics, the training sets' in train mode and the evaluation sets' in eval mode (trial 19b:
        the finished model's validation score was never written, and the loss rules and ``overfit``
        never saw the last rounds), and the trees and importance of the rounds since the last read
        (trial 18b: three depth-8 trees in rounds 22-24 of 25, saves every 10: no record, no
        ``tree_depth`` finding, the run ``complete``). Not the validation labels and predictions:
        gathering them is a collective call, which every worker would have to make here. True when a
        rule then asks to stop (the run's status, as at the last round).

        Boosting that was stopped (a rule's ``stop_training`` or ``raise``, the tuner, another worker)
        has the round it stopped at recorded the same way, without the rules (trial 22d: class_imbalance,
        on labels saved every round, stopped at round 1 with the metrics on the default interval: the
        run held no metric, tree or importance of the model handed back). The rules judged that round
        already and training is over: they are not asked again (no second stop, no finding twice)."""
        session = self._session
        if session is None or self._tail is None or self._sets is None:
            return False
        if self._stopped:
            with session._unjudged(), contextlib.suppress(TrainingStopped):
                # (a raise asked by a finding acted on here, one of an earlier step reduced in the
                # background: recorded, and the training it would stop has stopped)
                self._record_tail(session, model)
            return False
        return self._record_tail(session, model)

    def _record_stopped_round(self, model: Any) -> None:
        """:meth:`_capture_tail` for a training that a raise ends (its run is closed next, and the
        raise goes on): a failure to record is said, and does not replace the raise."""
        try:
            self._capture_tail(model)
        except Exception as exc:  # noqa: BLE001 - the TrainingStopped being raised is what the user must see
            logger.warning("tripwire: the round at which boosting stopped could not be recorded: %r", exc)

    def _record_tail(self, session: Session, model: Any) -> bool:
        """Record the round of :attr:`_tail` where its save steps left it out (see
        :meth:`_capture_tail`); True when a rule asks to stop."""
        assert self._tail is not None and self._sets is not None
        step, evals_log = self._tail
        # a callback listed before this one that stopped training (XGBoost's EarlyStopping) ended the
        # last round before this one's after_iteration: evals_log holds that round, the step is its
        # (trial 21e: round 82's metrics were stored at step 81)
        logged = max((len(values) for metrics in evals_log.values() for values in metrics.values()), default=0)
        step = max(step, self._offset + logged - 1)
        rounds = int(model.num_boosted_rounds())
        # per collection (trial 24a: each with a save interval of its own, the trees or importance of
        # the rounds after its own last save were never recorded when the last round saved the other)
        behind = {kind for kind in ("trees", "feature_importance")
                  if self._trees_ok and rounds > self._recorded.get(kind, self._offset) and self._enabled(kind)}
        if behind and rounds < step + 1:
            # a slice of the trained model (EarlyStopping(save_best=True) listed before this callback) and
            # the trained one gone: its trees and importance are not the last round's (trial 22h)
            behind = set()
            self._warn_once("sliced", f"tripwire: the trees and feature importance of round {step} (the last trained) are "
                            f"not recorded: the model handed to after_training holds {_rounds(rounds)} of the "
                            f"{_rounds(step + 1)} trained (a callback listed before this one, such as "
                            "EarlyStopping(save_best=True), returned a slice of it); its metrics are recorded")
        stop = False
        if self._metrics_at.get("train") != step or behind:
            plan = session.begin_step("train", step, summary=True)
            self._offer_train(plan, model, self._sets, evals_log, metrics=self._metrics_at.get("train") != step,
                              trees="trees" in behind, importance="feature_importance" in behind)
            stop = session.end_step().stop
        # (also after a stop asked by the train record: the finished model's validation score, trial 24a)
        if self._metrics_at.get("eval") != step and any(s.mode == "eval" for s, _ in self._sets):
            self._offer_eval_metrics(session.begin_step("eval", step, summary=True), self._sets, evals_log)
            stop = session.end_step().stop or stop
        return stop

    def _offer_eval_metrics(self, plan: StepPlan, sets: Sequence[tuple[EvalSet, Any]], evals_log: Mapping[str, Any]) -> None:
        """A round's evaluation sets' metrics, where ``plan`` wants them (and the step they are at)."""
        if plan.wants("metrics"):
            plan.add_many(_metrics(sets, "eval", evals_log), "metrics")
            self._metrics_at["eval"] = plan.step

    def _offer_train(self, plan: StepPlan, model: Any, sets: Sequence[tuple[EvalSet, Any]],
                     evals_log: Mapping[str, Any], *, metrics: bool = True, trees: bool = True,
                     importance: bool = True) -> None:
        """A round's training values, as ``plan`` wants them: the training sets' metrics, the
        hyperparameters (once), the trees since they were last recorded and the feature importance
        (``metrics``/``trees``/``importance`` False: not those)."""
        if metrics and plan.wants("metrics"):
            plan.add_many(_metrics(sets, "train", evals_log), "metrics")
            self._metrics_at["train"] = plan.step
        if not self._hp_done and plan.wants("hyperparameters"):
            self._hp_done = True
            plan.add_many(hyperparameters(model.save_config()), "hyperparameters")
        want_trees, want_fi = trees and plan.wants("trees"), importance and plan.wants("feature_importance")
        if (want_trees or want_fi) and self._read_trees(model):
            if want_trees and self._last_round is not None:
                plan.add_many(self._last_round.as_tensors(), "trees")
                self._recorded["trees"] = self._parsed
                self._depth_since = None  # (the next record's depth: the trees added after this one)
            if want_fi:
                plan.add_many(self._importance(model), "feature_importance")
                self._recorded["feature_importance"] = self._parsed

    def _release_abandoned(self) -> None:
        """Another callback of this process left a run open in this out_dir (its training raised,
        and XGBoost called no ``after_training``: Ctrl-C in a notebook, then the cell run again with
        a new callback): when no training of this process runs with it now, its run ends
        ``failed`` here and this training writes after it. A callback of this very training, or of
        one running in another thread, keeps the directory (the session then refuses it)."""
        if not (self._config.out_dir or self._config.name):
            return
        key = (str(Path(self._config.resolved_out_dir()).resolve()), self._rank)
        entry = _OPEN.pop(key, None)
        if entry is None:
            return
        session, ref = entry
        holder = ref()  # (None: the callback is gone, so no training runs with it)
        if session.writer is None or session.writer.closed:
            return
        if holder is self or (holder is not None and _training_with(holder)):
            _OPEN[key] = entry
            return
        logger.warning("tripwire: the run %s was left open by an earlier training of this process that raised (XGBoost "
                       "then calls no after_training: Ctrl-C, another callback's error): it ends failed, and this "
                       "training writes after it", key[0])
        session.close("stopped" if holder is not None and holder._stopped else "failed")

    # ------------------------------------------------------------------------------- capture
    def _capture(self, model: Any, step: int, evals_log: Mapping[str, Any],
                 arrays: tuple[np.ndarray | None, np.ndarray] | None) -> Decision:
        session = self._session
        assert session is not None
        sets = self._sets or []
        # The last round of the training: every collection is recorded in its one record, so that
        # the rules judge it (trial 24a: with collections saved at intervals of their own, the rounds
        # after a collection's last save were recorded at the end, at a step the rules had judged
        # already: a depth-12 tree stored at the last round, and tree_depth never judged it).
        last = step == self._last_step
        plan = session.begin_step("train", step, summary=last and self._left_out("train", step))
        if plan:
            self._offer_train(plan, model, sets, evals_log)
        first = session.end_step()
        second = Decision()
        if any(s.mode == "eval" for s, _ in sets) or arrays is not None:
            plan = session.begin_step("eval", step, summary=last and self._left_out("eval", step))
            if plan:
                self._offer_eval_metrics(plan, sets, evals_log)
                if arrays is not None:  # (each only where a due collection takes it: no "went to no collection")
                    if plan.wants("labels") and arrays[0] is not None:
                        plan.add("labels", arrays[0], "labels")
                    if plan.wants("predictions"):
                        plan.add("predictions", arrays[1], "predictions")
            second = session.end_step()
        if not self._inputs_named and self._metrics_at and set(self._metrics_at) >= {s.mode for s, _ in sets}:
            self._inputs_named = True
            self._name_unread_inputs(session, evals_log)
        return first if first.stop else second

    def _left_out(self, mode: str, step: int) -> bool:
        """Whether a collection enabled in ``mode`` is not due at ``step`` (its own save interval)."""
        session = self._session
        assert session is not None
        enabled = [c for c in session.collections.values() if (c.save or session.config.save).for_mode(mode).enabled]
        return len(session.due_collections(mode, step)) < len(enabled)

    def _enabled(self, kind: str, mode: str = "train") -> bool:
        """Whether a collection enabled in ``mode`` takes values of ``kind``."""
        session = self._session
        assert session is not None
        return any(c.accepts_kind(kind) and (c.save or session.config.save).for_mode(mode).enabled
                   for c in session.collections.values())

    def _name_unread_inputs(self, session: Session, evals_log: Mapping[str, Any]) -> None:
        """Say now, at the first round whose metrics were recorded, a rule's loss or metric name that
        matches none of the metrics XGBoost logs (trial 24d: an overfit rule given
        validation='validation-logloss' on a regression, which logs rmse, read nothing all training and
        was named only when it ended). Not those left at a default that no evaluation set can feed
        (said at the first round already); what is said here is not said again at the end.

        A validation name (``overfit``/``overtraining``'s ``validation``) that matches nothing gets a
        "did you mean" among the held-out sets' metrics only, never a training metric (trial 27f:
        "validation='val_loss' ... did you mean 'train-logloss'?": followed, the rule compares the
        training metric with itself and can never fire). Where no set is held out, such a rule's
        ``train``/``validation`` left at their defaults are said as that, once (or by the
        ``eval_is_train`` WARNING, where a set meant as held-out data is the training data)."""
        sets = [s for s, _ in self._sets or []]
        unfed = _unfed_train_inputs(session.rules, sets)
        scores = [r for r in session.rules
                  if tuple(getattr(r, "input_collections", ("losses", "metrics"))) == ("losses", "metrics")]
        paired = [r for r in scores if {"train", "validation"} <= set(r.named_inputs())]
        no_held_out = not any(s.mode == "eval" for s in sets)

        def said_here(m: str) -> bool:
            return any(m.startswith(f"rule {r.name!r}: validation=")
                       or (no_held_out and m.startswith(f"rule {r.name!r}: train=")
                           and r.named_inputs()["train"] == _DEFAULT_INPUTS["train"]) for r in paired)

        why = "named at the first round: XGBoost logs the same metrics every round"
        # (the defaults not pointed at a metric computed on raw margins: said by that WARNING)
        quiet = {name: list(unfed.get(name, [])) + self._withheld.get(name, []) for name in {*unfed, *self._withheld}}
        session.name_unread_inputs(
            scores, why=why,
            skip=lambda m: said_here(m) or any(m.startswith(f"rule {name!r}: {param}=")
                                               for name, params in quiet.items() for param in params))
        held = [f"{s.name}-{m}" for s in sets if s.mode == "eval" for m in evals_log.get(s.raw, {})]
        captured = sorted({n for c in ("losses", "metrics") for n in names_in(session.history, c)})
        for rule in paired:
            inputs = rule.named_inputs()
            validation, train = inputs["validation"], inputs["train"]
            if matching_tensors(session.history, validation, ("losses", "metrics")) or "validation" in \
                    self._withheld.get(rule.name, ()):
                continue
            if not no_held_out:
                logger.warning("tripwire: rule %r: validation=%r matches no loss or metric of this run%s (captured: %s); "
                               "the rule read nothing under that name (%s)", rule.name, validation,
                               did_you_mean(validation, held), ", ".join(captured) or "none", why)
            elif validation == _DEFAULT_INPUTS["validation"]:
                if not self._leaked:  # (the eval_is_train WARNING says it otherwise)
                    defaults = ", ".join(f"{k}={v!r}" for k, v in (("train", train), ("validation", validation))
                                         if v == _DEFAULT_INPUTS[k])
                    logger.warning("tripwire: rule %r reads nothing: no evaluation set is held out (%s), so XGBoost "
                                   "logs no validation metric for its defaults (%s); %s", rule.name,
                                   _sets_held(sets), defaults, self._held_out_hint())
            else:
                logger.warning("tripwire: rule %r: validation=%r matches no loss or metric of this run (captured: %s); "
                               "the rule read nothing under that name: no evaluation set is held out (%s); %s",
                               rule.name, validation, ", ".join(captured) or "none", _sets_held(sets),
                               self._held_out_hint())

    # ------------------------------------------------------------------ evaluation set = training set
    def _check_eval_is_train(self, session: Session, step: int, evals_log: Mapping[str, Any]) -> None:
        """Record the finding ``eval_is_train`` (severity warning, mode train; a WARNING too), once a
        training, where an evaluation set meant as held-out data is the training data: at the first
        round where the callback sees it (:func:`train_data_as_held_out`: the training ``DMatrix``
        itself, or one of the same content), or where a held-out set's metrics equal the training
        set's at every round of the first :data:`_SAME_ROUNDS` (to :data:`_SAME_RTOL` relative; the
        metrics that do not saturate, logloss or rmse: an error of 0 on both is a good model) and the
        set has the training set's rows and labels, in another order (a split that handed back the
        training part: trial 27f, every validation number equal to the training one for 300 rounds).
        A check of the integration, not a rule: it runs no action (no stop), and ``tripwire watch``
        does not make it (the matrices are the callback's alone)."""
        if self._leak_said or self._sets is None:
            return
        sets = [s for s, _ in self._sets]
        if self._leaked:
            self._leak_said = True
            if all(_SKLEARN_NAME.match(s.raw) for s in sets):
                same = "the data given to fit"
            elif any(m is self._dtrain for s, m in self._sets if s in self._leaked):
                same = "the DMatrix given as dtrain"
            else:
                same = "a matrix of the training data's rows, labels and values"
            names = _set_names(self._leaked)
            what = (f"the evaluation set {names} is" if len(self._leaked) == 1 else f"the evaluation sets {names} are")
            head = f"{what} the training data ({same})"
            effects = _eval_is_train_effects(sets, self._leaked, False, session.rules, self._told())
            self._record_eval_is_train(session, step, head, effects, sets, [s.name for s in self._leaked], "same_data")
            return
        train = next((s for s in sets if s.mode == "train" and s.is_train is not False), None)
        if train is None or self._world > 1:
            return
        for s, mat in self._sets:
            if s.mode != "eval" or self._same_rounds.get(s.raw, 0) < 0:
                continue
            common = [m for m in evals_log.get(s.raw, {}) if m in evals_log.get(train.raw, {}) and not _SATURATING.match(m)]
            rounds = min((len(evals_log[s.raw][m]) for m in common), default=0)
            if not common or rounds < _SAME_ROUNDS:
                if common and not all(_same_value(evals_log[s.raw][m][-1], evals_log[train.raw][m][-1]) for m in common):
                    self._same_rounds[s.raw] = -1
                continue
            if not all(_same_value(a, b) for m in common
                       for a, b in zip(evals_log[s.raw][m], evals_log[train.raw][m])):
                self._same_rounds[s.raw] = -1
                continue
            rows = _same_rows_and_labels(mat, self._dtrain)
            if rows is None:
                self._same_rounds[s.raw] = -1  # (not the training data's labels: equal by chance, or not known)
                continue
            self._leak_said = True
            first = self._offset
            values = ", ".join(f"{s.name}-{m} {_fmt_value(evals_log[s.raw][m][-1])} = {train.name}-{m} "
                               f"{_fmt_value(evals_log[train.raw][m][-1])}" for m in common[:2])
            head = (f"the evaluation set {s.name!r} holds the training data: its metrics equal those of the "
                    f"training set {train.name!r} (to 1e-6 relative) at every round so far, rounds {first}-{step} "
                    f"({values} at round {step}), and it has the training set's {rows} rows and labels in another "
                    "order: most likely the training rows reordered or copied (a split that returned the training "
                    "part twice)")
            read = s.raw == self._valid_raw()
            effects = _eval_is_train_effects(sets, [s], read, session.rules, self._told())
            self._record_eval_is_train(session, step, head, effects, sets, [s.name], "same_metrics",
                                       metrics=[f"{s.name}-{m}" for m in common], rounds=step - first + 1)
            return

    def _held_out_hint(self) -> str:
        """How to hold data out, for a WARNING where no set is held out: by query for a ranker."""
        return _RANKER_HELD_OUT_FIX if self._ranker() else _HELD_OUT_FIX

    def _ranker(self) -> bool:
        """Whether the booster ranks (a ``rank:*`` objective): its held-out data is split by query."""
        return (self._objective or "").startswith("rank:")

    def _told(self) -> str | None:
        """XGBoost's name of the set whose metric the trial is told (None without a trial)."""
        return self._trial_key[0] if self._trial is not None and self._trial_key is not None else None

    def _valid_raw(self) -> str | None:
        """XGBoost's name of the validation set (the one whose metrics and labels the rules read)."""
        return next((s.raw for s, m in self._sets or [] if m is not None and m is self._valid), None)

    def _record_eval_is_train(self, session: Session, step: int, head: str, effects: Sequence[str],
                              sets: Sequence[EvalSet], names: Sequence[str], evidence: str, **details: Any) -> None:
        """The ``eval_is_train`` WARNING and finding (see :meth:`_check_eval_is_train`)."""
        message = _eval_is_train_message(head, effects, sets, ranker=self._ranker())
        logger.warning("tripwire: %s", message)
        session.record_finding(Finding(rule="eval_is_train", step=step, mode="train", message=message,
                                       severity="warning", worker=self._rank,
                                       details={"sets": list(names), "evidence": evidence, **details}))

    def _read_trees(self, model: Any) -> bool:
        """Parse the rounds not read yet; False when the booster has no trees (gblinear)."""
        if not self._trees_ok:
            return False
        n = int(model.num_boosted_rounds())
        if n <= self._parsed:
            return self._last_round is not None
        try:
            trees, per_round = self._unread_trees(model, n)
        except (ValueError, KeyError, TypeError, IndexError) as exc:  # no trees, or a layout we do not know
            self._trees_ok = False
            self._warn_once("trees", f"tripwire: trees and feature importance are not captured: {_tree_trouble(model, exc)}")
            if self._session is not None:  # (said here: not again at close, as collections that captured nothing)
                self._session.unavailable(_TREE_KINDS)
            return False
        if self._imp is None:
            self._imp = ImportanceAccumulator(int(model.num_features()))
        self._imp.add(trees)  # importance: the whole model's, a continued model's loaded trees included
        # depth, leaves, gain: the trees this training added only (trial 22h: a model continued with
        # xgb_model= had its loaded depth-6 trees read at the first save step, and tree_depth at 4 stopped
        # a training whose own trees were depth 2)
        own = trees_from_round(trees, per_round, n - self._parsed, self._offset - self._parsed)
        last = per_round[-1] if per_round else len(trees)
        # depth: the deepest tree since trees were last recorded, so that tree_depth judges every tree,
        # not only the saved rounds' (trial 17c: a depth-12 tree at round 35, stopped at 140); not since
        # the last read (trial 24a: feature importance saved at rounds of its own read the trees in
        # between, and a deep tree read there was left out of the next trees record)
        latest = round_summary(own[max(0, len(own) - last) :])
        if own:
            deepest = max(t.depth for t in own)
            self._depth_since = deepest if self._depth_since is None else max(self._depth_since, deepest)
        self._last_round = replace(latest, depth=latest.depth if self._depth_since is None else self._depth_since)
        self._parsed = n
        return True

    def _unread_trees(self, model: Any, n: int) -> tuple[list[TreeStats], list[int]]:
        """The trees of the model's rounds ``_parsed`` to ``n`` and their count per round: read from
        a slice of those rounds (``booster[a:b]``), or where XGBoost refuses the slice, from the
        whole model. It refuses it while the booster updates a loaded model's trees
        (``process_type: update``, ``updater: refresh`` or ``prune``), whose trees it hands back one
        round at a time (trial 30c F3: "Not all trees are updated", XGBoost's check of tripwire's own
        slice, was given as the reason the trees and importance were not captured)."""
        try:
            piece = model[self._parsed : n]
        except xgboost.core.XGBoostError:
            trees, per_round = parse_model(json.loads(bytes(model.save_raw("json"))))
            return rounds_from(trees, per_round, n, self._parsed)
        return parse_model(json.loads(bytes(piece.save_raw("json"))))

    def _importance(self, model: Any) -> dict[str, float]:
        assert self._imp is not None
        values = self._imp.normalised()
        n = self._imp.n_features
        names = model.feature_names or []
        features = [names[i] if i < len(names) else f"f{i}" for i in range(n)]
        out: dict[str, float] = {}
        for kind in IMPORTANCE_TYPES:
            tnames = self._fi_names.get(kind)
            if tnames is None or len(tnames) != n:
                tnames = self._fi_names[kind] = [f"feature_importance/{kind}/{f}" for f in features]
            out.update(zip(tnames, values[kind].tolist()))
        return out

    # ---------------------------------------------------------------------- evaluation sets
    def _setup_evals(self, evals_log: Mapping[str, Any], model: Any) -> None:
        dtrain, evals = _training_frame()
        if evals is not None:
            raw = [str(name) for _, name in evals]
            sources = _eval_sources(evals, _calling_locals(_sklearn_fit))
            flags: list[bool | None] = [_same_data(d, dtrain, src) for (d, _), src in zip(evals, sources)]
            mats: list[Any] = [d for d, _ in evals]
        else:
            raw = [str(k) for k in evals_log]
            flags, mats = [None] * len(raw), [None] * len(raw)
        sets = resolve_eval_sets(raw, flags, self._eval_names)
        self._sets = list(zip(sets, mats))
        self._dtrain = dtrain
        self._leaked = train_data_as_held_out(sets)
        names = [s.name for s in sets]
        if self._validation_set is not None and self._validation_set not in names:
            raise ConfigError(
                f"validation_set: no evaluation set named {self._validation_set!r}"
                f"{did_you_mean(self._validation_set, names)}; the evaluation sets are: {', '.join(names) or '(none)'}"
            )
        valid = self._validation_set or _default_validation(sets)
        self._valid = next((m for s, m in self._sets if s.name == valid), None)
        if self._trial is not None:
            self._trial_key = self._resolve_trial_metric(evals_log, valid)
        if self._session is not None:
            own = _builtin_metrics(model) if self._custom_metric or self._custom_obj else None
            builtin = own if self._custom_metric else None
            margin = (_margin_metrics(self._objective, evals_log, own, logits=self._logit_margins)
                      if self._custom_obj else set())
            if margin:  # (the defaults that would read them: before the rules are bound)
                self._withheld = _withheld_defaults(self._session.rules,
                                                    default_metric_choice(sets, evals_log, valid, builtin), margin)
            self._session.bind_inputs(bind_default_metric_names(self._session.rules, sets, evals_log, valid, builtin,
                                                                margin=margin))
            if margin:
                self._say_margin_metrics(self._session, sets, evals_log, margin)
            unfed = _unfed_train_inputs(self._session.rules, sets)
            if unfed:
                self._warn_once("no-train", _no_train_message(unfed, sets, evals_log, ranker=self._ranker()))

    def _say_margin_metrics(self, session: Session, sets: Sequence[EvalSet], evals_log: Mapping[str, Any],
                            margin: Collection[str]) -> None:
        """The one WARNING (trial 31d F1) where a custom objective's booster has no link function and
        XGBoost computed built-in metrics on the raw margins (:func:`_margin_metrics`): which, which
        rules' defaults were not pointed at them (:attr:`_withheld`: they read nothing, or another
        metric), which rules name one themselves (read as logged), the trial told one, and the fix."""
        names = [f"{s.name}-{m}" for s in sets for m in evals_log.get(s.raw, {}) if m in margin]
        withheld = self._withheld
        now = {r.name: r.named_inputs() for r in session.rules}
        told = []
        for name, params in withheld.items():
            instead = {p: now[name][p] for p in params if now[name][p] != _DEFAULT_INPUTS[p]}
            told.append(f"{name} ({', '.join(params)}) " + (
                "reads " + ", ".join(f"{p}={v!r}" for p, v in instead.items()) + " instead" if instead
                else "reads nothing"))
        explicit = sorted({f"rule {r.name!r} names {v!r} itself and reads it as logged" for r in session.rules
                           if r.name not in withheld for v in r.named_inputs().values() if v in names})
        trial = ""
        if self._trial_key is not None and self._trial_key[1] in margin:
            key = next((f"{s.name}-{self._trial_key[1]}" for s in sets if s.raw == self._trial_key[0]),
                       "-".join(self._trial_key))
            trial = f"; the trial is told {key!r} as logged: give trial_metric= a metric of your own"
        which = ", ".join(sorted({m for m in margin}))
        values = sorted(m for m in margin if m.partition("@")[0] in _VALUE_METRICS)
        it = "it" if len(margin) == 1 else "them"
        if values:  # (_logit_margins: the margins are most likely logits)
            why = (f"XGBoost computes its built-in {which} on the raw margins; the training's labels are all 0 or 1, so "
                   f"obj= most likely fits logits, and {' and '.join(values)} of logits against 0/1 labels "
                   f"grow{'s' if len(values) == 1 else ''} as a healthy booster learns, so {_and(names)} "
                   f"{'means' if len(names) == 1 else 'mean'} nothing (trial 41e: train-rmse rose from 0.42 to 2.7 while "
                   "the log-loss of the sigmoid of the margin fell from 0.46 to 0.18, and loss_not_decreasing stopped "
                   f"it). The rules' defaults do not read {it}")
            own = (f"; a regression of your own on 0/1 labels: name {it} in the rules "
                   f"({{name: loss_not_decreasing, loss: {names[0]}}}) to have {it} read")
        else:
            why = (f"XGBoost computes its built-in {which} on the raw margins, not on the probabilities or rates "
                   f"{'that metric reads' if len(margin) == 1 else 'those metrics read'}, so {_and(names)} "
                   f"{'means' if len(names) == 1 else 'mean'} nothing (trial 31d: a healthy booster's validation-logloss "
                   "rose from 1.41 to 2.28 while the log-loss of the sigmoid of its margin fell from 0.53 to 0.29, and "
                   f"overfit stopped it). The rules' defaults do not read {it}")
            own = ""
        self._warn_once("margin-metrics", (
            f"tripwire: this training has an objective of its own (obj=), and its booster's objective is "
            f"{self._objective!r} (XGBoost's name for it where params give none), which applies no link "
            f"function: {why}"
            + (f": {'; '.join(told)}" if told else "")
            + (f"; {'; '.join(explicit)}" if explicit else "") + trial
            + ". To judge this training, compute the metric on the transformed prediction with custom_metric= (a "
            "function of (margin, dmatrix) that applies your link first, such as the log-loss of "
            "1 / (1 + exp(-margin))), and disable_default_eval_metric=1 to drop XGBoost's; or give params the "
            "objective whose link your obj= uses ('binary:logistic', 'multi:softprob'), so that XGBoost applies it "
            f"before its metrics (docs/xgboost.md, Custom objectives){own}."))

    def _trial_metric_name(self) -> str:
        """The metric the trial is told, named as the run names it (tripwire's set name: trial 36e,
        the stop reason read ``validation_1-logloss`` where the run's tensor is ``validation-logloss``)."""
        if self._trial_key is None:
            return ""
        raw, metric = self._trial_key
        name = next((s.name for s, _ in self._sets or [] if s.raw == raw), raw)
        return f"{name}-{metric}"

    def _resolve_trial_metric(self, evals_log: Mapping[str, Any], valid: str | None) -> tuple[str, str]:
        """``(raw set name, metric)`` of ``trial_metric``: ``<evalset>-<metric>`` (tripwire's or
        XGBoost's set name), else a metric name of the validation set ``valid`` (the last set when
        every set is the training data); None: the last metric of the validation set (the last set's,
        but see :func:`_default_validation`)."""
        sets = [s for s, _ in self._sets or []]
        available = [f"{s.name}-{m}" for s in sets for m in evals_log.get(s.raw, {})]
        if not available:
            raise ConfigError(
                f"trial_metric: got {self._trial_metric!r}, but the training has no evaluation sets, so there is no "
                "metric to report; pass evals="
            )
        if self._trial_metric is None:
            # the validation set's last metric: the last set's (XGBoost's early-stopping convention), but
            # a set named as a validation set before a test set (trial 42i: the tuner read test-logloss
            # with evals train/valid/test, though the rules read valid; see _default_validation)
            s = next((s for s in sets if s.name == valid), sets[-1])
            key = (s.raw, list(evals_log[s.raw])[-1])
            self._say_trial_metric(s, key[1], "not given: the last metric of the last evaluation set, XGBoost's "
                                   "early-stopping convention" if s is sets[-1] else
                                   f"not given: the last metric of the validation set {s.name!r}, chosen by its name "
                                   f"over the last set {sets[-1].name!r}; give trial_metric= to choose")
            return key
        given = self._trial_metric
        set_name, _, metric = given.partition("-")
        for s in sets:
            if set_name in (s.name, s.raw) and metric in evals_log.get(s.raw, {}):
                return s.raw, metric
        # trial 22b: a metric name alone ('auc', as eval_metric names it; also 'poisson-nloglik') is
        # that metric of the validation set, the one XGBoost's early stopping watches by default
        target = next((s for s in sets if s.name == valid), sets[-1])
        metrics = [str(m) for m in evals_log.get(target.raw, {})]
        if given in metrics:
            self._say_trial_metric(target, given, f"{given!r}: that metric of the validation set" if target.name == valid
                                   else f"{given!r}: that metric of the last set, the training data: no other set")
            return target.raw, given
        example = metrics[-1] if metrics else available[-1].partition("-")[2]
        full = f"{target.name}-{example}" if metrics else available[-1]
        raise ConfigError(
            f"trial_metric: got {given!r}{did_you_mean(given, available + metrics)}; accepted: a metric of the "
            f"validation set {target.name!r} such as {example!r}, or '<evalset>-<metric>' such as {full!r}; "
            f"available: {', '.join(available)}"
        )

    def _say_trial_metric(self, s: EvalSet, metric: str, how: str) -> None:
        """Name, once (rank 0), the metric the trial is told, and record it in the run's trial facts."""
        name = f"{s.name}-{metric}"
        if self._rank == 0:
            logger.info("tripwire: the trial is told %s every round (trial_metric %s)", name, how)
        if self._session is not None:
            self._session.set_meta(trial=trial_facts(self._trial, name))

    def _trial_value(self, evals_log: Mapping[str, Any]) -> float:
        assert self._trial_key is not None
        raw, metric = self._trial_key
        value = evals_log[raw][metric][-1]
        return float(value[0] if isinstance(value, tuple) else value)

    def _wants_eval_arrays(self, step: int) -> bool:
        if not self._label_cols:
            return False
        save = self._config.save
        # the known last round takes every collection whose eval range holds it (see _capture; trial 35d:
        # the finished model's labels and predictions were left out at a round off their interval)
        last = step == self._last_step
        if not any(c.should_save("eval", step, save) or (last and (c.save or save).for_mode("eval").in_range(step))
                   for c in self._label_cols):
            return False
        if self._valid is None:
            if self._leaked:  # (the eval_is_train WARNING names the class rules' missing labels)
                return False
            self._warn_once(
                "labels",
                "tripwire: labels/predictions are enabled but no validation DMatrix is available "
                "(no evaluation set other than the training data, or the callback was not called by "
                "XGBoost's training loop); they are not captured",
            )
            return False
        return True

    def _local_eval_rows(self, model: Any) -> np.ndarray:
        """This worker's validation rows: the label(s) (:attr:`_label_width` columns, none where they
        are not captured), then the prediction(s)."""
        dm = self._valid
        if self._labels is None:  # labels do not change during training
            self._labels = self._read_labels(dm)
        labels = self._labels
        # the whole model so far; the default range lets XGBoost reuse its prediction cache
        preds = np.asarray(model.predict(dm), dtype=np.float64)
        if self._objective == "binary:logitraw":  # margins: as binary:logistic's probabilities (rules cut at 0.5)
            with np.errstate(over="ignore"):
                preds = 1.0 / (1.0 + np.exp(-preds))
        preds = preds[:, None] if preds.ndim == 1 else preds.reshape(preds.shape[0], int(np.prod(preds.shape[1:])))
        if preds.shape[0] != labels.shape[0]:
            # (never raised out of xgb.train: the predictions are still captured, trial 22h)
            self._warn_once("labels-rows", f"tripwire: the validation set has {labels.shape[0]} label rows but "
                            f"{preds.shape[0]} predictions; its labels are not captured (its predictions are)")
            labels = self._labels = np.zeros((preds.shape[0], 0))
            if self._session is not None:  # (said here: not again at close)
                self._session.unavailable(["labels"])
        self._label_width = labels.shape[1] if labels.shape[0] else -1  # (-1: no rows here, another worker's)
        return np.column_stack([labels, preds])

    def _read_labels(self, dm: Any) -> np.ndarray:
        """The validation labels as ``(rows, columns)``: one column, or one per target of a
        multi-output model (XGBoost's ``get_label()`` gives them flat); no column where there are
        none to capture (``survival:aft`` has interval bounds instead), said once.

        Trial 22h: a 2-column label (``multi_strategy``) came back flat, twice the rows, and
        ``survival:aft`` had none: both raised ``ValueError`` out of ``xgb.train`` at round 0."""
        flat = np.asarray(dm.get_label(), dtype=np.float64).reshape(-1)
        n = int(dm.num_row())
        if flat.size == n:
            return flat[:, None]
        if n and flat.size and flat.size % n == 0:
            return flat.reshape(n, flat.size // n)
        bounds = []
        for field in ("label_lower_bound", "label_upper_bound"):
            with contextlib.suppress(Exception):
                if np.asarray(dm.get_float_info(field)).size:
                    bounds.append(field)
        if not flat.size and bounds:
            why = (f"it has no labels but the bounds of an interval ({', '.join(bounds)}, set for survival:aft), "
                   "which are not labels of one value per row")
        else:
            why = f"it has {flat.size} label values for {n} rows"
        self._warn_once("labels-shape", f"tripwire: the validation labels are not captured: {why}; the predictions are "
                        "captured as the config asks")
        if self._session is not None:  # (said here: not again at close, as a collection that captured nothing)
            self._session.unavailable(["labels"])
        return np.zeros((n, 0))

    def _eval_arrays(self, rows: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
        """Labels and predictions of the whole validation set (gathered when it is split across
        workers); predictions keep XGBoost's shape: ``(n,)``, ``(n, classes)`` or ``(n, targets)``,
        and labels too (``(n,)``, or ``(n, targets)`` for a multi-output model); labels None where
        they are not captured."""
        width = self._label_width
        if self._world > 1:
            rows, width = _allgather_rows(rows, self._rank, self._world, width)
        width = 1 if width < 0 else width  # (no validation row on any worker)
        labels = None if width == 0 else rows[:, 0].copy() if width == 1 else rows[:, :width].copy()
        preds = rows[:, width:]
        return labels, (preds[:, 0].copy() if preds.shape[1] == 1 else preds.copy())

    # -------------------------------------------------------------------------------- helpers
    def _check_some_rank_writes(self) -> None:
        """Refuse ranks that name no rank of this job (as a Session refuses ``writer.ranks``): no
        worker would capture, no rule would run, and no run would be written (trial 17f: a
        tree_depth stop never fired, and nothing said why)."""
        chosen = self._writing_ranks(self._world)
        if chosen == "all" or any(r < self._world for r in chosen):  # type: ignore[union-attr]
            return
        key = "ranks" if self._ranks != "auto" else "writer.ranks"
        self._drop_claim()
        raise ConfigError(f"{key}: got {list(chosen)}, but this job has ranks 0 to {self._world - 1} (world size "
                          f"{self._world}): no rank would capture, and the run would be lost; accepted: 'all', 'auto' "
                          f"or a list holding one of them (e.g. [0])")

    def _writing_ranks(self, world: int) -> str | tuple[int, ...]:
        """The ranks that capture: ``ranks``, or for ``"auto"`` the config's ``writer.ranks`` when it
        lists ranks, else rank 0 of a distributed job (every rank of a single process: "all")."""
        if self._ranks != "auto":
            return self._ranks
        writer = self._config.writer.ranks
        return writer if writer != "all" else ((0,) if world > 1 else "all")

    def _captures(self, rank: int, world: int) -> bool:
        ranks = self._writing_ranks(world)
        return ranks == "all" or rank in ranks

    def _drop_claim(self) -> None:
        """Remove the default run directory this callback claimed, when training is refused before
        anything was written there (leave no empty run behind)."""
        if self._claimed is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self._claimed)

    def _stored_findings(self, run: Any = None) -> list[Finding]:
        """The run's findings, each once, in the order they were found (``Run.findings``: by wall
        time; fold after fold for sklearn's clones, not sorted by step across folds: trial 28i F2):
        every capturing worker records the same finding (so a finding counts as often as the worker
        that recorded it most often did), while trainings appended to one run (sklearn's clones in
        ``cross_val_score``, one per fold) each count."""
        if run is None:
            try:
                run = open_run(self._run_dir)
            except RunNotFoundError:
                return []
        at: dict[tuple[str, int, str, str], list[int]] = {}  # key -> where each occurrence is in out
        per_worker: dict[tuple[tuple[str, int, str, str], int], int] = {}
        out: list[Finding] = []
        for f in run.findings:
            key = (f.rule, f.step, f.mode, f.message)
            n = per_worker[key, f.worker] = per_worker.get((key, f.worker), 0) + 1
            places = at.setdefault(key, [])
            if n > len(places):
                places.append(len(out))
                out.append(f)
            elif f.worker < out[places[n - 1]].worker:
                # the same finding of a lower rank stands for it, whichever worker wrote first (trial
                # 33h F1: stopped_by named rank 1 or rank 2 from one run to the next)
                out[places[n - 1]] = f
        return out

    def _stored_stop(self) -> tuple[Finding | None, str | None]:
        """``stopped_by`` and ``stop_reason`` read from the run directory (for a callback that
        trained elsewhere): (None, None) unless the run ended ``stopped``."""
        try:
            run = open_run(self._run_dir)
        except RunNotFoundError:
            return None, None
        if run.status != "stopped":
            return None, None
        stops = [f for f in self._stored_findings(run) if f.rule in self._stop_rules and f.kind == "finding"]
        # the earliest, of the lowest rank among those at that step, and the reason that rank wrote
        # (trial 33h F1: stopped_by named rank 1 or 2 from run to run, stop_reason rank 0's)
        finding = min(stops, key=lambda f: (f.step, f.worker)) if stops else None
        written = {w: m["stop_reason"] for w, m in sorted(run.end_markers.items()) if m.get("stop_reason")}
        said = written.get(finding.worker) if finding is not None else None
        if said is None and written:
            said = next(iter(written.values()))
        return finding, (str(said) if said is not None else str(finding) if finding is not None else None)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning("%s", message)

    def __repr__(self) -> str:
        """``TripwireCallback(out_dir='runs/x', rules=['default'], STATE, findings=N[, stopped_by='rule'])``,
        STATE: ``not trained`` (no training yet), ``run open, N rounds written`` (a training in progress,
        or one that raised outside this callback and left it open: :meth:`close`) or ``run <status>``
        (its end marker's: ``complete``, ``stopped``, ``failed``; of a callback copied to the workers that
        trained, ``xgboost.dask``'s, the run's status as they left it), as the Lightning and Keras
        callbacks say theirs (trial 38k: it said where it wrote and its rules alone)."""
        session = self._session
        if session is None or session.writer is None:
            state = "not trained"
            if session is None and (self._shipped or self.__dict__.get("_copied", False)):
                # (copied to Dask workers: their run's end; a copy itself, pickled or cloned with the model
                # it trained, whose findings and stopped_by are read from the run: trial 43h, "not trained")
                try:
                    state = f"run {open_run(self._run_dir).status}"
                except TripwireError:
                    pass
        elif not session.writer.closed:
            rounds = session.mode_steps["train"] - self._offset
            state = f"run open, {rounds} rounds written"
        else:
            state = f"run {session.closed_as or 'ended'}"
        rules = [r.shown_name for r in self._config.rules]
        parts = [f"out_dir={str(self.out_dir)!r}", f"rules={rules!r}", state, f"findings={len(self.findings)}"]
        if self.stopped_by is not None:
            parts.append(f"stopped_by={self.stopped_by.rule!r}")
        return f"TripwireCallback({', '.join(parts)})"


# ------------------------------------------------------------------------------------ functions
def _check_num_boost_round(value: Any) -> int | None:
    """``num_boost_round``: an integer >= 1, or None; one message for every refusal (trial 24a: -5
    was told "an integer >= 1" and 'a' "an integer >= 1 or null")."""
    try:
        return check_int(value, "num_boost_round", minimum=1, allow_none=True)
    except ConfigError:
        raise ConfigError(f"num_boost_round: got {value!r}; accepted: an integer >= 1, or None (the num_boost_round "
                          f"of the xgb.train call, the sklearn API's n_estimators)") from None


def _check_ranks(value: Any) -> str | tuple[int, ...]:
    if value in ("auto", "all"):
        return value  # type: ignore[no-any-return]
    if isinstance(value, (list, tuple)) and value and all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in value):
        return tuple(value)
    raise ConfigError(f"ranks: got {value!r}; accepted: 'auto', 'all' or a non-empty list of ranks (integers >= 0)")


def _rule_stops(rule: Rule, config: Config) -> bool:
    actions = rule.actions if rule.actions is not None else list(config.actions)
    for i, a in enumerate(actions):
        try:
            if ActionSpec.parse(a, f"rules[{rule.name}].actions[{i}]").name == "stop_training":
                return True
        except ConfigError:
            continue
    return False


def _not_classes(objective: str, custom: bool = False) -> tuple[str, str, str, str] | None:
    """For an objective whose labels are no classes, ``(what it does, its labels, its predictions,
    a hint)`` for the WARNING: ``rank:*``; ``reg:*`` but ``reg:logistic`` (a binary classifier's
    probabilities), ``count:*``, ``survival:*``. None for a classifier (or an unknown objective).
    ``custom``: the training has its own objective (``obj=``), which XGBoost names ``reg:squarederror``
    (trial 19i: the WARNING named an objective the user never set)."""
    if custom and objective == "reg:squarederror":
        return ("the objective is a custom one (obj=, which XGBoost reports as 'reg:squarederror')", "whatever obj= reads",
                "raw margins (obj= gets them before any link function)",
                "; judge it with overfit/overtraining on a metric of your own (custom_metric=)")
    if objective.startswith("rank:"):
        return f"objective {objective!r} ranks", "relevance grades", "ranking scores", "; judge a ranker with overfit/overtraining on its ndcg or map"
    if (objective.startswith("reg:") and objective != "reg:logistic") or objective.startswith(("count:", "survival:")):
        return f"objective {objective!r} is a regression", "targets", "values", ""
    return None


def _forget(session: Session) -> None:
    """Drop ``session`` from :data:`_OPEN` (it is ending: nothing to release later)."""
    for key, (held, _) in list(_OPEN.items()):
        if held is session:
            del _OPEN[key]


def _xgboost_train(frame: Any) -> bool:
    """Whether ``frame`` is a call of ``xgboost.train`` (the sklearn API and xgboost.dask call it too)."""
    return frame.f_code.co_name == "train" and str(frame.f_globals.get("__name__", "")).startswith("xgboost")


def _training_with(callback: TripwireCallback) -> bool:
    """Whether an ``xgboost.train`` call on any thread of this process has ``callback`` among its
    callbacks now (its training is running)."""
    for frame in list(sys._current_frames().values()):
        f = frame
        while f is not None:
            if _xgboost_train(f):
                given = f.f_locals.get("callbacks") or ()
                container = f.f_locals.get("cb_container")
                if any(c is callback for c in list(given) + list(getattr(container, "callbacks", None) or ())):
                    return True
            f = f.f_back
    return False


def _from_sklearn() -> bool:
    """Whether the training calling us runs through XGBoost's sklearn API (a frame of
    ``xgboost.sklearn`` among the 12 above our caller)."""
    frame = inspect.currentframe()
    try:
        return any(f.f_globals.get("__name__") == "xgboost.sklearn" for f in frames_above(frame, 12))
    finally:
        del frame


def _calling_locals(match: Any) -> dict[str, Any] | None:
    """The locals of the nearest frame among the 8 above our caller for which ``match(frame)``."""
    frame = inspect.currentframe()
    try:
        start = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        return next((dict(f.f_locals) for f in frames_above(start, 8) if match(f)), None)
    finally:
        del frame
        start = None


def _training_frame() -> tuple[Any, list[tuple[Any, str]] | None]:
    """The training ``DMatrix`` and ``evals`` of the XGBoost training loop calling us.

    ``after_iteration(model, epoch, evals_log)`` does not receive the data; XGBoost's
    ``CallbackContainer.after_iteration(model, epoch, dtrain, evals)`` (xgb.train, the sklearn
    API and xgboost.dask all go through it) does. Returns ``(None, None)`` when not found.
    """
    loc = _calling_locals(lambda f: isinstance(f.f_locals.get("self"), CallbackContainer)
                          and "evals" in f.f_locals and "dtrain" in f.f_locals)
    return (None, None) if loc is None else (loc["dtrain"], list(loc["evals"] or []))


def _objective_name(model: Any) -> str | None:
    """The booster's objective (``binary:logistic``, ``rank:pairwise`` ...) from
    ``Booster.save_config()``; None when it cannot say."""
    try:
        return str(json.loads(model.save_config())["learner"]["objective"]["name"])
    except Exception:  # noqa: BLE001 - a booster that cannot say: predictions as they come
        return None


def _builtin_metrics(model: Any) -> list[str] | None:
    """XGBoost's own evaluation metrics of the booster (``eval_metric``, or the objective's default:
    ``Booster.save_config()``'s ``learner.metrics`` once it has evaluated), named as ``evals_log``
    names them; a ``custom_metric``'s are not among them. None when the booster cannot say."""
    try:
        return [str(m["name"]) for m in json.loads(model.save_config())["learner"]["metrics"]]
    except Exception:  # noqa: BLE001 - a booster that cannot say: every metric counts alike
        return None


def _booster_kind(model: Any) -> str | None:
    """``gbtree``, ``dart`` or ``gblinear`` (from ``Booster.save_config()``); None when it cannot say."""
    try:
        return str(json.loads(model.save_config())["learner"]["gradient_booster"]["name"])
    except Exception:  # noqa: BLE001 - a booster that cannot say is not refused
        return None


def _tree_trouble(model: Any, exc: BaseException) -> str:
    """Why a booster's trees could not be read, in one line (XGBoost's errors carry a C++ stack)."""
    if _booster_kind(model) == "gblinear":
        return "the booster is gblinear (a linear model: no trees)"
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return re.sub(r"^\[[^\]]*\]\s*\S+:\d+:\s*", "", first)  # XGBoost's "[time] file.cc:62: " prefix


_OWN_DIRS = tuple(str(Path(p).resolve().parent) + os.sep for p in (__file__, tripwire.__file__, xgboost.__file__))
_OWN_FILES = (str(Path(contextlib.__file__).resolve()),)


@contextlib.contextmanager
def _warnings_of_the_caller() -> Iterator[None]:
    """Re-emit the warnings raised in the block after it (also when it raises), those that name a
    line of this package at the first line outside XGBoost and tripwire: the ``xgb.train(...)`` or
    ``fit(...)`` call.

    XGBoost turns its native library's warnings (an unused parameter, a device changed from GPU to
    CPU) into ``warnings.warn(..., stacklevel=3)``: the Python line that called into the library,
    which is ours when the callback is the first to touch the booster. Used in ``before_training``
    and the first round only (a ``catch_warnings`` block resets the warning registries)."""
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:  # type: ignore[assignment]
            yield
    finally:
        if caught:
            _reemit(caught)


def _reemit(caught: Sequence[warnings.WarningMessage]) -> None:
    frame = inspect.currentframe()
    try:
        f = frame.f_back if frame is not None else None
        while f is not None and (_resolved(f.f_code.co_filename).startswith(_OWN_DIRS)
                                 or _resolved(f.f_code.co_filename) in _OWN_FILES):
            f = f.f_back
        for w in caught:
            if f is not None and _resolved(w.filename).startswith(_OWN_DIRS[0]):  # named a line of ours
                warnings.warn_explicit(w.message, w.category, f.f_code.co_filename, f.f_lineno,
                                       module=f.f_globals.get("__name__"),
                                       registry=f.f_globals.setdefault("__warningregistry__", {}),
                                       module_globals=f.f_globals)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    finally:
        del frame
        f = None


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve())
    except (OSError, RuntimeError, ValueError):
        return filename


_SAME_DATA_CHUNK = 1 << 20
"""Entries (rows x columns) of each matrix that :func:`_same_data` holds at a time where it can slice
the matrices (trial 31d F2: both matrices copied whole into CSR form and compared took about 5.8
times the training data's memory, 835 MB more for a 144 MB matrix)."""


def _same_data(d: Any, dtrain: Any, sources: tuple[Any, Any, Any] | None = None) -> bool:
    """Whether evaluation matrix ``d`` holds the training data: the training ``DMatrix`` itself, or
    one with the same shape, labels and values (the sklearn API builds a second matrix from the
    very arrays given to ``fit`` when ``fit`` has ``sample_weight=``, and from equal slices, such
    as ``X[:400]`` given twice). Values are compared only when shape and labels agree, and then
    cheaply in memory (trial 31d F2: both matrices copied whole into CSR form and compared took
    about 5.8 times the training data's memory):

    - ``sources``: ``(the array d was built from, the array dtrain was built from, the missing
      value)``, where known (the sklearn API's ``eval_set``, ``X`` and ``missing``): the same
      object, or numpy views of the same memory with the same shape, strides and dtype (``X[:400]``
      given twice), hold the same values, which are then not read; two numpy arrays are compared a
      block of rows at a time, as the matrices hold them (float32, a missing value as 0);
    - else the matrices a block of rows at a time (about :data:`_SAME_DATA_CHUNK` entries), stopping
      at the first block that differs: sliced out of both (a ``DMatrix``), or, where a matrix cannot
      be sliced (a ``QuantileDMatrix``), each matrix's values read whole in turn and kept as a
      digest per block, so that one matrix's values are held at a time.

    Values compare as numbers, as scipy's ``!=`` of the two CSR matrices did: a missing entry as 0.
    A matrix that cannot say (its values cannot be read) is not the same."""
    if d is dtrain:
        return True
    if d is None or dtrain is None:
        return False
    try:
        rows, cols = int(d.num_row()), int(d.num_col())
        if (rows, cols) != (int(dtrain.num_row()), int(dtrain.num_col())):
            return False
        if not np.array_equal(d.get_label(), dtrain.get_label()):
            return False
        step = max(1, _SAME_DATA_CHUNK // max(1, cols))
        said = _same_source(*sources, step) if sources is not None else None
        if said is not None:
            return said
        try:
            index = np.arange(min(step, rows))
            blocks = [d.slice(index, allow_groups=True), dtrain.slice(index, allow_groups=True)]
        except xgboost.core.XGBoostError:  # (a QuantileDMatrix, external memory: no slicing)
            return _same_by_digests(d, dtrain, step)
        for start in range(0, rows, step):
            if start:
                index = np.arange(start, min(start + step, rows))
                blocks = [d.slice(index, allow_groups=True), dtrain.slice(index, allow_groups=True)]
            a, b = (m.get_data() for m in blocks)
            if a.shape != b.shape or (a != b).nnz:
                return False
        return True
    except Exception:  # noqa: BLE001 - a matrix that cannot say: not the same
        return False


def _same_source(a: Any, b: Any, missing: Any, step: int) -> bool | None:
    """Whether arrays ``a`` and ``b`` (those two matrices were built from) hold the same values: True
    for the same object, or numpy arrays over the same memory with the same shape, strides and dtype
    (``X[:400]`` taken twice); for two other 2-D numpy arrays of one shape, their blocks of ``step``
    rows compared as a matrix holds them (float32; NaN and ``missing`` are missing, read as 0). None
    where it cannot say (other kinds of arrays: the matrices are compared)."""
    if a is b:
        return True if a is not None else None
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.ndim != 2 or a.shape != b.shape:
        return None
    if (a.__array_interface__["data"][0] == b.__array_interface__["data"][0] and a.strides == b.strides
            and a.dtype == b.dtype):
        return True
    try:
        gone = np.float32(np.nan if missing is None else missing)
    except (TypeError, ValueError):
        return None

    def held(block: np.ndarray) -> np.ndarray:
        out = np.array(block, dtype=np.float32)  # (a copy: the user's array is left as it is)
        out[np.isnan(out) | (out == gone)] = 0.0
        return out

    for start in range(0, a.shape[0], step):
        if not np.array_equal(held(a[start : start + step]), held(b[start : start + step])):
            return False
    return True


def _same_by_digests(d: Any, dtrain: Any, step: int) -> bool:
    """:func:`_same_data`'s comparison of matrices that cannot be sliced: ``d``'s values read whole
    and kept as one digest per block of ``step`` rows (the block made dense, a missing entry 0, -0.0
    as 0.0), then dropped before ``dtrain``'s are read and compared block by block."""
    import hashlib

    def digests(m: Any) -> Iterator[bytes]:
        csr = m.get_data()
        for start in range(0, csr.shape[0], step):
            block = np.ascontiguousarray(csr[start : start + step].toarray(), dtype=np.float32)
            np.add(block, 0.0, out=block)  # (-0.0 as 0.0)
            yield hashlib.blake2b(block.tobytes(), digest_size=16).digest()

    mine = list(digests(d))
    return all(x == y for x, y in zip(mine, digests(dtrain), strict=True))


def _sklearn_fit(frame: Any) -> bool:
    """Whether ``frame`` is the sklearn API's ``fit`` (``X`` and ``eval_set`` among its locals)."""
    return (frame.f_code.co_name == "fit" and str(frame.f_globals.get("__name__", "")).startswith("xgboost")
            and "X" in frame.f_locals and "eval_set" in frame.f_locals)


def _eval_sources(evals: Sequence[tuple[Any, str]],
                  fit: Mapping[str, Any] | None) -> list[tuple[Any, Any, Any] | None]:
    """For each of ``evals`` (``(matrix, name)``), ``(the array it was built from, fit's X, the
    missing value)`` where ``fit`` (the locals of the sklearn API's ``fit``) says: XGBoost names
    ``eval_set[i]``'s matrix ``validation_i``. None where not known."""
    if fit is None:
        return [None] * len(evals)
    given = list(fit.get("eval_set") or [])
    missing = getattr(fit.get("self"), "missing", np.nan)
    out: list[tuple[Any, Any, Any] | None] = []
    for _, name in evals:
        m = re.fullmatch(r"validation_(\d+)", str(name))
        i = int(m.group(1)) if m else -1
        item = given[i] if 0 <= i < len(given) else None
        out.append((item[0], fit["X"], missing) if isinstance(item, (tuple, list)) and len(item) >= 1 else None)
    return out


_CV_WORKAROUND = (
    "To cross-validate with tripwire, train each fold with xgb.train and a callback of its own, each with its own "
    "out_dir: for k, (tr, va) in enumerate(KFold(5).split(X)): dtrain, dvalid = xgb.DMatrix(X[tr], label=y[tr]), "
    "xgb.DMatrix(X[va], label=y[va]); xgb.train(params, dtrain, num_boost_round, evals=[(dtrain, 'train'), (dvalid, "
    "'validation')], callbacks=[TripwireCallback(out_dir=f'runs/cv/fold{k}')]) (GroupKFold on the query ids for a "
    "ranker); or sklearn's cross_val_score on an XGBClassifier or XGBRegressor given the callback, which appends "
    "every fold to one run (docs/xgboost.md, Not supported)")
"""The ``xgb.cv`` refusal's workaround (trial 30c F9: the error offered none)."""

#: the rule inputs bound to XGBoost's own metrics where left at these defaults (the same table the
#: session's config check reads: tripwire._session._XGBOOST_REBOUND)
_DEFAULT_INPUTS = _XGBOOST_REBOUND


def _and(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _by_another(others: list[Any]) -> str:
    """``by another callback (MyStop), whose after_iteration (or before_iteration) returned True``."""
    names = [type(c).__name__ for c in others if not isinstance(c, xgboost.callback.EvaluationMonitor)]
    which = f" ({', '.join(dict.fromkeys(names))})" if names else ""
    return f"by another callback{which}, whose after_iteration (or before_iteration) returned True"


def _rounds(n: int) -> str:
    """``1 round``, ``2 rounds`` (trial 19i: "after 1 rounds")."""
    return f"{n} round" if n == 1 else f"{n} rounds"


_VALIDATION_NAME = re.compile(r"(?:^|[^a-z]|d|x)(?:val|valid|validation|dev|eval|evaluation)(?:[^a-z]|$|set|data)")
_TEST_NAME = re.compile(r"(?:^|[^a-z]|d|x)(?:test|testing|holdout)(?:[^a-z]|$|set|data)")
"""(Searched in a set's name in lower case: ``valid``, ``val_1``, ``my_val``, XGBoost's ``dvalid`` and
``dval``, ``validset``, ``valSet``, ``x_val``; ``test``, ``dtest``, ``testset``, ``holdout``.)"""


def _default_validation(sets: Sequence[EvalSet]) -> str | None:
    """The validation set where ``validation_set`` names none: the last set that is not the training
    data (XGBoost's early stopping watches the last set), but the last one named as a validation set
    (``valid``, ``val``, ``validation_1``, ``dev``, ``eval``) where there is one, else the last one not
    named as a test set (trial 42e: with ``evals=[(dtr, "train"), (dva, "valid"), (dte, "test")]`` the
    rules judged overfitting on the test set, which steers a user to fit the test data)."""
    held_out = [s for s in sets if s.mode == "eval"]
    if not held_out:
        return None
    named = [s for s in held_out if _VALIDATION_NAME.search(s.name.lower())]
    untested = [s for s in held_out if not _TEST_NAME.search(s.name.lower())]
    return (named or untested or held_out)[-1].name


def default_metric_choice(sets: Sequence[EvalSet], evals_log: Mapping[str, Any], validation_set: str | None,
                          builtin: Collection[str] | None = None, margin: Collection[str] = ()) -> dict[str, str]:
    """``{default: '<set>-<metric>'}``: the metric each rule default (``loss``, ``train``,
    ``validation``) reads on XGBoost, as :func:`bind_default_metric_names` describes; ``margin``:
    metrics left out (computed on raw margins, :func:`_margin_metrics`)."""
    train_set = next((s for s in sets if s.mode == "train"), None)
    valid_set = next((s for s in sets if s.name == validation_set), None)
    skip = set(margin)
    train = [m for m in evals_log.get(train_set.raw, {}) if m not in skip] if train_set is not None else []
    valid = [m for m in evals_log.get(valid_set.raw, {}) if m not in skip] if valid_set is not None else []
    own = None if builtin is None else set(builtin)

    def builtin_first(metrics: list[str]) -> list[str]:
        # trial 22h: custom_metric 'accuracy' (last in evals_log) took overfit and the loss rules over from
        # eval_metric 'logloss'; its training value sat at 1.0, and an overfitting booster (validation
        # logloss 0.53 -> 0.88) went unnoticed
        return ([m for m in metrics if m in own] or metrics) if own is not None else metrics

    choice: dict[str, str] = {}
    lower = [m for m in train if not higher_is_better(m)]
    if train_set is not None and lower:
        # a metric that does not saturate (trial 19i: eval_metric ["logloss", "error"] pointed the loss
        # rules at train-error, flat from round 0 on an easy task with 2% flipped labels, and
        # loss_not_decreasing stopped a healthy booster whose logloss went from 0.61 to 0.07)
        steady_lower = builtin_first([m for m in lower if not _SATURATING.match(m)])
        choice["loss"] = f"{train_set.name}-{(steady_lower or lower)[-1]}"
    if valid_set is not None and valid:
        steady = builtin_first([m for m in valid if m in train and not _SATURATING.match(m)])
        metric = steady[-1] if steady else valid[-1]
        choice["validation"] = f"{valid_set.name}-{metric}"
        if train_set is not None and metric in train:
            choice["train"] = f"{train_set.name}-{metric}"
    return choice


def bind_default_metric_names(rules: Sequence[Rule], sets: Sequence[EvalSet], evals_log: Mapping[str, Any],
                              validation_set: str | None, builtin: Collection[str] | None = None, *,
                              margin: Collection[str] = ()) -> dict[str, dict[str, str]]:
    """XGBoost logs ``<evalset>-<metric>`` (``train-logloss``), never ``loss`` or ``val_loss``: a
    rule parameter left at that default (``loss`` of the loss rules, ``train``/``validation`` of
    ``overfit`` and ``overtraining``) reads XGBoost's metric instead: ``loss``: the training set's
    last lower-is-better metric that does not saturate (logloss rather than error), else its last
    lower-is-better metric; ``validation``: ``validation_set``'s last metric that the
    training set logs too and that does not saturate (a loss such as logloss or rmse: a train auc
    or error reaches its bound, 1 or 0, within a few rounds of an overfitting booster, after which
    overfit's "training still improves" can never hold), else its last metric (the one XGBoost's
    own early stopping watches); ``train``: the training set's same metric. Left as it is when
    there is no such metric. ``builtin``: XGBoost's own metric names where the training has a
    ``custom_metric`` too (None: every metric counts alike); among the metrics that do not saturate,
    a built-in one is chosen before a custom one, whose behaviour is unknown (a custom metric is
    read where it is the only such metric, or where a rule names it). ``margin``: metric names
    (as ``evals_log`` names them) that XGBoost computed on raw margins, never chosen (trial 31d:
    a custom objective's ``logloss``, :func:`_margin_metrics`). Returns ``{rule: {parameter:
    name}}`` of what was bound, and under :data:`ANY_RULE` the names chosen for each default (for
    the rules a reader of the run builds)."""
    choice = default_metric_choice(sets, evals_log, validation_set, builtin, margin)
    train_set = next((s for s in sets if s.mode == "train"), None)
    valid_set = next((s for s in sets if s.name == validation_set), None)
    train = list(evals_log.get(train_set.raw, {})) if train_set is not None else []
    valid = list(evals_log.get(valid_set.raw, {})) if valid_set is not None else []
    own = None if builtin is None else set(builtin)
    custom = [m for m in dict.fromkeys(train + valid) if own is not None and m not in own]
    bound: dict[str, dict[str, str]] = {}
    for rule in rules:
        for param, value in rule.named_inputs().items():
            if _DEFAULT_INPUTS.get(param) == value and param in choice and hasattr(rule, param):
                setattr(rule, param, choice[param])
                bound.setdefault(rule.name, {})[param] = choice[param]
    for name, params in bound.items():
        unread = [m for m in custom if not any(v.partition("-")[2] == m for v in params.values())]
        logger.info("tripwire: rule %r reads %s (XGBoost's names for the defaults%s)", name,
                    ", ".join(f"{k}={v!r}" for k, v in params.items()), _custom_note(unread, params))
    if choice:  # (for any rule: tripwire watch --config points the rules it builds the same way)
        bound[ANY_RULE] = dict(choice)
    return bound


_RAW_MARGIN_OBJECTIVES = frozenset({"reg:squarederror", "reg:squaredlogerror", "reg:pseudohubererror",
                                    "reg:absoluteerror", "reg:quantileerror", "binary:logitraw"})
"""Objectives that apply no link function to the margin (what XGBoost's metrics are given)."""
_LINK_METRICS = frozenset({"logloss", "error", "mlogloss", "poisson-nloglik", "gamma-nloglik", "gamma-deviance",
                           "tweedie-nloglik", "cox-nloglik", "aft-nloglik", "interval-regression-accuracy"})
"""XGBoost metrics that read a transformed prediction (a probability, a rate): meaningless on raw
margins. Not the rank metrics (``auc``, ``aucpr``, ``ndcg``, ``map``, ``pre``: a monotone link does
not change them), nor ``merror`` (an argmax), nor those of a value (:data:`_VALUE_METRICS`)."""
_VALUE_METRICS = frozenset({"rmse", "rmsle", "mae", "mape", "mphe"})
"""XGBoost metrics of a value, meaningful on the margin of a regression; on logits (a custom
objective that fits a probability, :func:`_logit_margins`) as meaningless as :data:`_LINK_METRICS`."""


def _logit_margins(call: Mapping[str, Any], sklearn: bool = False) -> bool:
    """Whether the custom objective of the ``xgboost.train`` call whose arguments are ``call`` most
    likely fits logits: its params name ``binary:logitraw``, or name no objective (XGBoost then
    says ``reg:squarederror``; ``sklearn``: the call is the sklearn API's, which names
    ``reg:squarederror`` itself for ``XGBRegressor(objective=callable)``) while every training label
    is 0 or 1 (trial 41e: a healthy logistic ``obj=`` with no objective in params logs ``rmse`` of
    the margins, which rose from 0.42 to 2.7 as the booster learned, and ``loss_not_decreasing``
    stopped it at round 50; trial 41k: the same through ``XGBRegressor``). A regression of the
    user's own on 0/1 labels reads its ``rmse`` only where a rule names it (the WARNING says so)."""
    try:
        named = dict(call.get("params") or {}).get("objective")
    except (TypeError, ValueError):  # (params XGBoost takes in another form: no claim)
        return False
    if named is not None and not (sklearn and named == "reg:squarederror"):
        return named == "binary:logitraw"
    try:
        labels = np.asarray(call["dtrain"].get_label(), dtype=np.float64)
    except Exception:  # noqa: BLE001 - a matrix that cannot give its labels here: no claim
        return False
    return labels.size > 0 and bool(np.all((labels == 0) | (labels == 1)))


def _withheld_defaults(rules: Sequence[Rule], choice: Mapping[str, str],
                       margin: Collection[str]) -> dict[str, list[str]]:
    """``{rule: [parameter]}``: the parameters left at their XGBoost default (``loss``, ``train``,
    ``validation``) whose default ``choice`` (:func:`default_metric_choice` without ``margin`` left
    out) is a metric of ``margin``: computed on raw margins, so not bound to it."""
    out: dict[str, list[str]] = {}
    for rule in rules:
        for param, value in rule.named_inputs().items():
            chosen = choice.get(param)
            if (_DEFAULT_INPUTS.get(param) == value and hasattr(rule, param) and chosen is not None
                    and chosen.partition("-")[2] in margin):
                out.setdefault(rule.name, []).append(param)
    return out


def _margin_metrics(objective: str | None, evals_log: Mapping[str, Any], builtin: Collection[str] | None, *,
                    logits: bool = False) -> set[str]:
    """The metric names of ``evals_log`` that XGBoost computed on raw margins, for a training with
    a custom objective (``obj=``: XGBoost's metrics see the margin through the booster's objective,
    ``reg:squarederror`` where params give none): a built-in metric of :data:`_LINK_METRICS`
    (``error@0.7`` by its name before ``@``) under an objective of :data:`_RAW_MARGIN_OBJECTIVES`
    (trial 31d F1: overfit read such a ``logloss``, which rose as the true log-loss fell, and stopped
    a healthy booster), and one of :data:`_VALUE_METRICS` too where the margins are ``logits``
    (:func:`_logit_margins`). ``builtin``: XGBoost's own metric names (None: any name counts)."""
    if objective not in _RAW_MARGIN_OBJECTIVES:
        return set()
    kinds = _LINK_METRICS | _VALUE_METRICS if logits else _LINK_METRICS
    names = {str(m) for metrics in evals_log.values() for m in metrics}
    return {m for m in names if m.partition("@")[0] in kinds and (builtin is None or m in builtin)}


def _custom_note(unread: Sequence[str], params: Mapping[str, str]) -> str:
    """For the INFO line of a rule whose defaults read built-in metrics (``params``: ``{parameter:
    '<set>-<metric>'}``): the custom metrics ``unread`` it does not read, and how to name one. A
    ``loss`` (the loss rules: a value that should fall) is offered only a custom metric that is
    better low; one that is better high (``r2_score``, ``accuracy``) is said to be unreadable by it
    (trial 30c F2: the line proposed loss='train-r2_score', which the loss rules then refused)."""
    if not unread:
        return ""
    said = ", ".join(map(repr, unread))
    if "loss" in params:
        lower = [m for m in unread if not higher_is_better(m)]
        higher = [m for m in unread if higher_is_better(m)]
        parts = []
        if lower:
            parts.append(f"a built-in metric that does not saturate comes first; name it to have it read: "
                         f"loss={params['loss'].partition('-')[0] + '-' + lower[-1]!r}")
        if higher:
            which = ("it is" if len(unread) == 1 else "they are" if not lower
                     else f"{', '.join(map(repr, higher))} {'is' if len(higher) == 1 else 'are'}")
            parts.append(f"{which} better high, and this rule reads a value that should fall (overfit and "
                         "overtraining read a better-high metric: name it in their train= and validation=)")
        return f"; the custom metric {said} is not read: {'; '.join(parts)}"
    example = ", ".join(f"{k}={v.partition('-')[0] + '-' + unread[-1]!r}" for k, v in params.items())
    return (f"; the custom metric {said} is not read: a built-in metric that does not saturate comes first; name it "
            f"to have it read: {example}")


_SATURATING = re.compile(r"(?i)^(m?error|auc|aucpr|pre|map|ndcg|interval-regression-accuracy)(@|$|-)")
"""XGBoost metrics with a bound that a booster reaches on its training data (auc 1, error 0, ndcg 1)."""


def _unfed_train_inputs(rules: Sequence[Rule], sets: Sequence[EvalSet]) -> dict[str, list[str]]:
    """``{rule: [parameter, ...]}``: the training-side inputs (``loss``, ``train``) left at their
    default, which nothing can feed when no evaluation set is the training data."""
    if any(s.mode == "train" for s in sets):
        return {}
    out: dict[str, list[str]] = {}
    for rule in rules:
        for param, value in rule.named_inputs().items():
            if param in ("loss", "train") and _DEFAULT_INPUTS[param] == value:
                out.setdefault(rule.name, []).append(param)
    return out


def _no_train_message(unfed: Mapping[str, Sequence[str]], sets: Sequence[EvalSet],
                      evals_log: Mapping[str, Any] | None = None, ranker: bool = False) -> str:
    """The start-of-training WARNING for :func:`_unfed_train_inputs`. Its fix names a metric the loss
    rules could read instead only where the run logs one that fits them: a held-out set's metric that
    is better low (one that does not saturate first), by the name the run records (trial 30c F5: it
    proposed loss='validation-logloss' to a training with no evaluation set, and to a ranker whose
    only metric was ndcg, better high: neither logs such a metric). ``ranker`` (a ``rank:*``
    objective): the sklearn example passes the query ids (``qid=``, ``eval_qid=``)."""
    rules = ", ".join(f"{name!r} ({', '.join(params)})" for name, params in unfed.items())
    held = ", ".join(s.name for s in sets) or "none"
    sk = ("fit(X, y, qid=qid, eval_set=[(X, y), (X_valid, y_valid)], eval_qid=[qid, qid_valid])" if ranker
          else "fit(X, y, eval_set=[(X, y), (X_valid, y_valid)])")
    named = ""
    if any("loss" in params for params in unfed.values()):
        logged = [(s, m) for s in sets for m in (evals_log or {}).get(s.raw, {})]
        lower = [(s, m) for s, m in logged if not higher_is_better(m)]
        steady = [(s, m) for s, m in lower if not _SATURATING.match(m)]
        if lower:
            s, m = (steady or lower)[-1]
            named = f", or name the metric the loss rules read (loss={s.name + '-' + m!r}, say)"
        elif logged:
            named = (f"; the loss rules cannot read a held-out metric instead: they judge a value that should fall, "
                     f"and every metric logged is better high ({', '.join(f'{s.name}-{m}' for s, m in logged)})")
        else:
            named = ("; with no evaluation set, XGBoost logs no metric at all (pass evals=, or eval_set= on the "
                     "sklearn API)")
    return (f"tripwire: no evaluation set is the training data (evaluation sets: {held}), so XGBoost logs no "
            f"training metric and these rules will read nothing: {rules}. Add the training data to the evaluation "
            f"sets (xgb.train(..., evals=[(dtrain, 'train'), (dvalid, 'validation')]); sklearn: {sk}){named}")


_SAME_ROUNDS = 5
"""Rounds from the start at which a held-out set's metrics equal the training set's before the callback
says the set holds the training data (with its rows and labels, :func:`_same_rows_and_labels`)."""
_SAME_RTOL = 1e-6
"""How close two metrics are to count as equal (relative): XGBoost logs them in full precision."""


def _same_value(a: Any, b: Any) -> bool:
    """Two logged metric values equal to :data:`_SAME_RTOL` relative (XGBoost's ``(mean, std)`` of
    ``xgb.cv`` by their means)."""
    x = float(a[0] if isinstance(a, tuple) else a)
    y = float(b[0] if isinstance(b, tuple) else b)
    return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= _SAME_RTOL * max(abs(x), abs(y))


def _fmt_value(v: Any) -> str:
    """A logged metric value for a message (6 significant digits)."""
    return f"{float(v[0] if isinstance(v, tuple) else v):.6g}"


def _same_rows_and_labels(d: Any, dtrain: Any) -> int | None:
    """The row count where evaluation matrix ``d`` has as many rows as the training matrix and the same
    labels in some order; None where not, or where either cannot say (a matrix not found)."""
    if d is None or dtrain is None:
        return None
    try:
        n = int(d.num_row())
        if n != int(dtrain.num_row()) or int(d.num_col()) != int(dtrain.num_col()):
            return None
        a, b = np.asarray(d.get_label(), dtype=np.float64), np.asarray(dtrain.get_label(), dtype=np.float64)
        return n if a.shape == b.shape and np.array_equal(np.sort(a), np.sort(b)) else None
    except Exception:  # noqa: BLE001 - a matrix that cannot say: not known to be the training data
        return None


def _set_names(sets: Sequence[EvalSet]) -> str:
    """``'validation'``, ``'validation_0' (recorded as 'train')``, joined."""
    return ", ".join(repr(s.raw) + (f" (recorded as {s.name!r})" if s.name != s.raw else "") for s in sets)


def _sets_held(sets: Sequence[EvalSet]) -> str:
    """``evaluation sets: train, all of them the training data`` (``no evaluation sets``), for a message
    where no set is held out."""
    if not sets:
        return "no evaluation sets"
    return f"evaluation sets: {', '.join(s.name for s in sets)}, all of them the training data"


def _eval_is_train_effects(sets: Sequence[EvalSet], named: Sequence[EvalSet], read: bool,
                           rules: Sequence[Rule], told: str | None = None) -> list[str]:
    """What the evaluation sets ``named`` being the training data does, for the ``eval_is_train``
    message: ``read`` where the rules read them as the validation set (a held-out set whose metrics
    are the training set's), else they are recorded as training data and the rules have no other
    held-out set where ``sets`` has none; ``told``: XGBoost's name of the set whose metric a tuner's
    trial is told (None: no trial)."""
    paired = [r.name for r in rules if {"train", "validation"} <= set(r.named_inputs())]
    classes = [r.name for r in rules if isinstance(r, ClassRoundRule)]
    held_out = any(s.mode == "eval" for s in sets)
    effects = []
    if read:
        if paired:
            effects.append(f"{' and '.join(paired)} {'compares' if len(paired) == 1 else 'compare'} the training "
                           "metric with itself and can never fire")
        if classes:
            effects.append(f"{' and '.join(classes)} {'judges' if len(classes) == 1 else 'judge'} predictions of "
                           "the training data")
    elif not held_out:
        if paired:
            effects.append(f"{' and '.join(paired)} {'reads' if len(paired) == 1 else 'read'} no validation metric")
        if classes:
            effects.append(f"{' and '.join(classes)} {'gets' if len(classes) == 1 else 'get'} no validation labels")
    if sets and sets[-1] in named:
        effects.append("XGBoost's early stopping, which watches the last set, stops late or never")
    if told is not None and any(s.raw == told for s in named):
        effects.append("the tuner's trial is told a training metric")
    return effects


_RANKER_HELD_OUT_FIX = (
    "evaluate whole query groups left out of training: xgb.train(..., evals=[(dtrain, 'train'), (dvalid, "
    "'validation')]) with dvalid = xgb.DMatrix(X_valid, label=y_valid, qid=qid_valid) built from queries that are not "
    "in dtrain (sklearn's GroupShuffleSplit on the query ids, not train_test_split, which splits a query's rows apart; "
    "the sklearn API: fit(X_train, y_train, qid=qid_train, eval_set=[(X_train, y_train), (X_valid, y_valid)], "
    "eval_qid=[qid_train, qid_valid]))")
"""A ranker's twin of ``XGBOOST_HELD_OUT_FIX``: held-out data split by query (trial 30c F6)."""


def _eval_is_train_message(head: str, effects: Sequence[str], sets: Sequence[EvalSet], ranker: bool = False) -> str:
    """The ``eval_is_train`` message: ``head`` (which set, and how it is known), what it does
    (``effects``), and the fix for the API in use (sklearn's set names: ``eval_set=``). ``ranker``
    (a ``rank:*`` objective): the split keeps each query's rows together and passes the query ids
    (trial 30c F6: sklearn's ``train_test_split`` was offered to an ``XGBRanker``, which splits queries
    apart, and the example left out ``qid=`` and ``eval_qid=``)."""
    return f"{head}: it holds no held-out data, so each of its \"validation\" numbers is a training number" + \
        (f" ({'; '.join(effects)})" if effects else "") + f". {_held_out_fix(sets, ranker)}."


def _held_out_fix(sets: Sequence[EvalSet], ranker: bool) -> str:
    """How to evaluate data left out of training, for the API in use (sklearn's set names) and the
    objective (a ranker's split is by query: sklearn's ``GroupShuffleSplit`` on the query ids)."""
    sklearn = bool(sets) and all(_SKLEARN_NAME.match(s.raw) for s in sets)
    if ranker and sklearn:
        return ("Pass query groups left out of training: fit(X_train, y_train, qid=qid_train, eval_set=[(X_train, "
                "y_train), (X_valid, y_valid)], eval_qid=[qid_train, qid_valid]) with whole queries split off before "
                "fitting (sklearn's GroupShuffleSplit(...).split(X, y, groups=qid), then each part sorted by qid), "
                "never train_test_split, which splits a query's rows apart")
    if ranker:
        return ("Evaluate query groups left out of training: xgb.train(..., evals=[(dtrain, 'train'), (dvalid, "
                "'validation')]) with dvalid = xgb.DMatrix(X_valid, label=y_valid, qid=qid_valid) built from whole "
                "queries that are not in dtrain (sklearn's GroupShuffleSplit(...).split(X, y, groups=qid), then each "
                "part sorted by qid), never train_test_split, which splits a query's rows apart")
    if sklearn:
        return ("Pass data left out of training: fit(X_train, y_train, eval_set=[(X_train, y_train), (X_valid, "
                "y_valid)]) with X_valid, y_valid split off before fitting (sklearn's train_test_split)")
    return ("Evaluate data left out of training: xgb.train(..., evals=[(dtrain, 'train'), (dvalid, 'validation')]) "
            "with dvalid built from rows that are not in dtrain (sklearn's train_test_split)")


def _metrics(sets: Sequence[tuple[EvalSet, Any]], mode: str, evals_log: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for s, _ in sets:
        if s.mode != mode:
            continue
        for metric, values in evals_log.get(s.raw, {}).items():
            if values:
                v = values[-1]
                out[f"{s.name}-{metric}"] = float(v[0] if isinstance(v, tuple) else v)
    return out


_MODEL_STATE = frozenset({"num_trees", "num_feature", "num_target"})
"""Leaves of ``Booster.save_config()`` that describe the model or the data, not a setting: the trees
built so far (1 after round 0), the data's feature columns, the label's columns."""

_INTERNAL = frozenset({"debug_synchronize", "max_cached_hist_node", "fail_on_invalid_gpu_id", "validate_parameters",
                       "max_row_perbatch"})
"""Leaves of ``Booster.save_config()`` that are XGBoost's runtime or debugging switches, not settings of
the model: a debug check of the histogram builder, its node cache (the uint64 maximum by default),
whether a bad GPU id fails, whether unknown parameters are warned of, ``gblinear``'s deprecated row
batch (trial 30c F8: ``max_cached_hist_node = 1.8e19`` among the hyperparameters)."""

_ALIASES = {"learning_rate": "eta", "min_split_loss": "gamma", "reg_lambda": "lambda", "reg_alpha": "alpha",
            "n_jobs": "nthread", "random_state": "seed"}
"""XGBoost's aliases, each saved beside its parameter with the same value (``Booster.save_config()``
lists both): the alias is left out, the parameter is stored under XGBoost's own name (trial 30c F8:
``eta`` and ``learning_rate``, ``lambda`` and ``reg_lambda``... stored twice)."""


def hyperparameters(config_json: str) -> dict[str, float]:
    """Numeric hyperparameters from ``Booster.save_config()`` as ``hyperparameters/<name>``.

    Every leaf of the configuration that reads as a number (``"0.3"``, ``"6"``, ``"[5E-1]"``)
    counts; strings such as the objective or the tree method are skipped, and so are the model's
    state (:data:`_MODEL_STATE`; trial 24a: ``hyperparameters/num_trees`` read 1, the trees after
    round 0, for a 50-round model) and XGBoost's runtime and debugging switches (:data:`_INTERNAL`).
    A parameter is stored once, under XGBoost's own name (``eta``, ``gamma``, ``lambda``, ``alpha``,
    ``nthread``, ``seed``), not again under its alias (:data:`_ALIASES`: ``learning_rate``, ...).
    A vector of one element (``"[5E-1]"``, a binary model's ``base_score``) is stored as that
    number; a vector of several (the ``base_score`` of a multi-class, quantile or multi-output
    model, one per class or output; ``quantile_alpha``) as one number per element,
    ``hyperparameters/<name>/0``, ``/1``, ... in the vector's order (trial 30c F1: they were left
    out). A name seen twice with different values is qualified by its parent section
    (``tree_train_param.eta``, ``poisson_regression_param.max_delta_step``)."""
    out: dict[str, float] = {}
    values: dict[str, list[float]] = {}  # per name stored: the leaf's numbers

    def store(path: tuple[str, ...], numbers: list[float]) -> None:
        name = path[-1]
        if name in values and values[name] != numbers and len(path) > 1:
            name = f"{path[-2]}.{path[-1]}"
        if name in values:
            return
        values[name] = numbers
        if len(numbers) == 1:
            out[f"hyperparameters/{name}"] = numbers[0]
        else:
            out.update((f"hyperparameters/{name}/{i}", v) for i, v in enumerate(numbers))

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                key = str(k)
                if _ALIASES.get(key) in node:  # (an alias saved beside its parameter: stored once)
                    continue
                walk(v, path + (_ALIASES.get(key, key),))
        elif isinstance(node, list):
            for v in node:
                walk(v, path)
        elif path and path[-1] != "version" and path[-1] not in _MODEL_STATE and path[-1] not in _INTERNAL:
            numbers = _numbers(node)
            if numbers:
                store(path, numbers)

    walk(json.loads(config_json), ())
    return out


def _numbers(value: Any) -> list[float] | None:
    """The number(s) a configuration leaf holds: ``[v]`` for a number or a string that reads as one
    (``"0.3"``, ``"[5E-1]"``), one per element for a vector string (``"[1E-1,5E-1,9E-1]"``); None for
    anything else (a string, a boolean, an empty vector, a NaN)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if math.isnan(float(value)) else [float(value)]
    if not isinstance(value, str):
        return None
    text = value.strip()
    parts = text[1:-1].split(",") if text.startswith("[") and text.endswith("]") else [text]
    try:
        out = [float(p) for p in parts]
    except ValueError:
        return None
    return out if out and not any(math.isnan(v) for v in out) else None


def _allgather_rows(rows: np.ndarray, rank: int, world: int, width: int = 1) -> tuple[np.ndarray, int]:
    """Concatenate every worker's rows in rank order, on every worker (two allreduces); with the
    largest ``width`` (the label columns) any worker gave (-1 from a worker without rows)."""
    meta = np.zeros(3 * world)
    meta[rank] = rows.shape[0]
    meta[world + rank] = rows.shape[1]
    meta[2 * world + rank] = width + 1  # (+1: the -1 of a worker without rows sums as 0)
    meta = collective.allreduce(meta, collective.Op.SUM)
    counts = meta[:world].astype(np.int64)
    ncol = int(meta[world : 2 * world].max())
    total, start = int(counts.sum()), int(counts[:rank].sum())
    buf = np.zeros((total, ncol))
    buf[start : start + rows.shape[0], : rows.shape[1]] = rows
    return collective.allreduce(buf, collective.Op.SUM).reshape(total, ncol), int(meta[2 * world :].max()) - 1
