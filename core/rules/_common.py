"""Shared machinery of the built-in rules (private).

Built-in rules subclass :class:`BuiltinRule`, which adds two things to :class:`Rule`:

- ``worker``: ``None`` (every worker in the history; in-process that is the session's own rank) or
  one worker (``tripwire watch`` builds one rule instance per worker of a stored run);
- a check may return :data:`NO_DATA` when nothing it reads was captured at this step: the
  ``patience`` streak is then left as it is (a sparse collection does not reset it).

Everything here reads only the :class:`~tripwire.History` API: no framework import.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .._config import BUILTIN_COLLECTIONS, MODES, SCALAR_KINDS
from .._errors import ConfigError, TensorNotFoundError
from .._finding import Finding
from .._history import History
from .._validate import check_float, check_str, did_you_mean
from ._base import Rule
from ._registry import _init_parameters


class _NoData:
    """Sentinel: the rule had nothing new to read at this step (streak unchanged)."""

    def __repr__(self) -> str:
        return "NO_DATA"


NO_DATA: Any = _NoData()


class BuiltinRule(Rule):
    """Base of the built-in rules: per-worker evaluation and :data:`NO_DATA` handling."""

    #: ``None``: every worker of the history; an int: only that worker (set by ``tripwire watch``).
    worker: int | None = None
    #: Per mode, the first step of the training the rule was last armed for (set by :meth:`rearm`,
    #: from ``Session.new_training``: a later Keras ``fit`` of a new model through the same
    #: callback): a rule that reads a series from its start reads it from there
    #: (:meth:`this_training`; trials 25a, 25c). A later fit that continues the same training (the
    #: same model, its weights as the last fit left them) leaves it as it is (trial 25e).
    armed_from: dict[str, int] = {}
    #: Per mode, the first step of the latest fit (a training's own, or one that continued it; set
    #: by :meth:`rearm` in both cases, ``{}`` until then): a rule that looks back over the steps
    #: before its first evaluation does not look into an earlier fit's (:meth:`look_back_floor`;
    #: trial 23v: an earlier fit's NaN validation loss stopped a healthy re-run).
    fit_from: dict[str, int] = {}

    def look_back_floor(self, mode: str) -> int:
        """The last step before which this rule's look-back does not go: ``start_step - 1``, or the
        step before the latest fit through the session (a new training's, or a continued one's)."""
        return max(self.start_step, self.fit_from.get(mode, 0), self.armed_from.get(mode, 0)) - 1

    def rearm(self, mode_steps: Mapping[str, int], continued: bool = False) -> None:
        """Arm the rule for a later fit through the same session (``Session.new_training``), whose
        steps of each mode start at ``mode_steps[mode]``.

        A new training (``continued`` False: a new model, or weights initialized again): the rule
        judges only that training's steps (:meth:`training_start`), as a fresh rule would, and its
        running state (the patience streak, ``every``'s last evaluation, and what :meth:`restart`
        forgets) starts again (trials 25a, 25c: ``loss_diverging`` and ``oscillating_loss`` stopped
        a healthy re-fit on the earlier fit's fallen or exploded losses).

        A fit that continues the training (``continued`` True: the same model, its weights as the
        last fit left them): the rule keeps its view of the earlier fits, its state and the series
        it reads from the training's start (trial 25e: ``loss_not_decreasing`` stopped a converged
        model's "train some more" fit, judging it alone); only its look-back starts at this fit
        (:meth:`look_back_floor`, trial 23v) and what :meth:`new_fit` forgets."""
        steps = {str(m): int(s) for m, s in mode_steps.items()}
        self.fit_from = steps
        if not continued:
            self.armed_from = dict(steps)
            self._streak, self._last_eval = {}, {}
            self.restart()
        self.new_fit()

    def restart(self) -> None:
        """Forget what the rule kept of the trainings before the one it is armed for (running
        minima, windows, rounds, counters, caches); subclasses that keep such state extend it. The
        default keeps nothing."""

    def new_fit(self) -> None:
        """Forget what the rule kept of the time before a later fit, a new training's or one that
        continues the last (``stalled_training``: when it last judged; the user's pause between two
        fits is no stall). The default keeps nothing to forget."""

    def training_start(self, mode: str) -> int:
        """The first step (of ``mode``) of the training the rule is armed for: 0 until
        :meth:`rearm` arms it for a new training (a continued fit keeps its training's start)."""
        return self.armed_from.get(mode, 0)

    def this_training(self, steps: np.ndarray, values: np.ndarray, mode: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of a series (of ``mode``) from the first step of the training the rule
        is armed for on: views, found by a bisection (a session's steps ascend from one training to
        the next), not a scan of the run."""
        i = since_step(steps, self.training_start(mode))
        return (steps[i:], values[i:]) if i else (steps, values)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.armed_from:  # (a resumed later training keeps judging its own steps only)
            state["armed_from"] = dict(self.armed_from)
        if self.fit_from and self.fit_from != self.armed_from:  # (a continued fit's look-back: trial 25e)
            state["fit_from"] = dict(self.fit_from)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        armed = state.get("armed_from") or {}
        self.armed_from = {str(m): int(s) for m, s in armed.items()} if isinstance(armed, Mapping) else {}
        fit = state.get("fit_from") or {}
        self.fit_from = {str(m): int(s) for m, s in fit.items()} if isinstance(fit, Mapping) and fit \
            else dict(self.armed_from)

    def workers(self, history: History) -> list[int]:
        if self.worker is not None:
            return [self.worker]
        return history.workers or [0]

    def nothing_read(self, history: History) -> str | None:
        """Why the rule read nothing in ``history`` although the collections it needs hold tensors
        (the tensors it reads are some of a collection's: ``weight_update_ratio`` reads the
        ``update_ratio/<param>`` tensors of the ``optimizer`` collection, which holds the learning
        rates and the loss scale too), as one message (``rule 'name' had nothing to read: ...``);
        None where it read something, or where the collection itself is missing (said by
        :func:`unfed_rules`). :func:`unmatched_inputs` gives it where it gives the inputs of a mode not
        recorded yet, at the end of a training and in ``tripwire watch``, not while training runs (the
        tensors may come later). The default reads nothing of the history: None."""
        return None

    def evaluate(self, history: History, step: int, mode: str) -> list[Finding]:
        if not self.due(step, mode):
            return []
        self._last_eval[mode] = step
        result = self.check(history, step, mode)
        if result is NO_DATA:
            return []
        return self._patient(self.as_findings(result), mode)


def since_step(steps: np.ndarray, start: int) -> int:
    """The index of the first of ``steps`` (ascending) at or after ``start``: 0 where ``start`` is 0
    or the series starts there or later (no bisection then)."""
    if start <= 0 or not len(steps) or steps[0] >= start:
        return 0
    return int(np.searchsorted(steps, start, side="left"))


# ------------------------------------------------------------------------------------ validation
def check_regex(value: Any, path: str, allow_none: bool = False) -> str | None:
    """A string that compiles as a regular expression."""
    if value is None and allow_none:
        return None
    check_str(value, path)
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigError(f"{path}: got {value!r}, not a valid regular expression ({exc}); accepted: a regular expression") from None
    return value


def check_finite(value: Any, path: str, *, minimum: float | None = None) -> float:
    """A finite number (``>= minimum``): a threshold whose infinity would hold its clause always,
    and fire the rule on any run (trial 24f: ``unchanged_tensor``'s ``atol=inf``)."""
    number = check_float(value, path, minimum=minimum)
    if number in (float("inf"), float("-inf")):
        accepted = "a finite number" + (f" >= {minimum}" if minimum is not None else "")
        raise ConfigError(f"{path}: got {value!r}; accepted: {accepted} (an infinite threshold holds its "
                          "condition whatever the values read)")
    return number


def check_collections(value: Any, path: str, allow_none: bool = False) -> tuple[str, ...] | None:
    """A built-in collection name or a non-empty list of them."""
    if value is None and allow_none:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(
            f"{path}: got {value!r}; accepted: a non-empty list of built-in collections ({', '.join(BUILTIN_COLLECTIONS)})"
        )
    return tuple(check_str(v, f"{path}[{i}]", choices=BUILTIN_COLLECTIONS) for i, v in enumerate(value))


def check_ordered(rule: str, low_name: str, low: float, high_name: str, high: float, high_default: float) -> None:
    """``low < high``, else a :class:`ConfigError` that names the bound the user set: ``high`` where
    it is not its default, else ``low`` (trial 23m: ``min_ratio: 2.0`` alone was refused as
    "max_ratio: got 1.0", a parameter the user had not given)."""
    if high > low:
        return
    if high == high_default:
        raise ConfigError(f"{rule}.{low_name}: got {low!r}; accepted: a number < {high_name} ({high!r}, its default; "
                          f"set {high_name} too for a larger {low_name})")
    raise ConfigError(f"{rule}.{high_name}: got {high!r}; accepted: a number > {low_name} ({low!r})")


def check_optional_bool(value: Any, path: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"{path}: got {value!r}; accepted: true, false or null (inferred from the metric's name)")


# ---------------------------------------------------------------------------------------- lookup
def names_in(history: History, collection: str, include: str | None = None, exclude: str | None = None) -> list[str]:
    """Tensors of ``collection`` (``[]`` when it was not captured) filtered by regexes (re.search).

    Kept on the history per ``(collection, include, exclude)`` while the collection holds as many
    tensors (a collection only grows): the gradient rules ask at every save step, and the filter
    searched every name with two regexes each time (36p: 150 gradients, 0.3 ms a step)."""
    held = getattr(history, "_collections", None)
    size = len(held[collection]) if isinstance(held, dict) and collection in held else -1
    cache = _cache_on(history, _NAMES_CACHE_ATTR)
    key = (collection, include, exclude)
    hit = cache.get(key) if cache is not None and size >= 0 else None
    if hit is not None and hit[0] == size:
        return list(hit[1])
    try:
        names = history.tensor_names(collection)
    except TensorNotFoundError:
        return []
    if include is not None:
        pat = re.compile(include)
        names = [n for n in names if pat.search(n)]
    if exclude:
        pat = re.compile(exclude)
        names = [n for n in names if not pat.search(n)]
    if cache is not None and size >= 0 and (key in cache or len(cache) < 256):
        cache[key] = (size, tuple(names))
    return names


_NAMES_CACHE_ATTR = "_tripwire_rule_names_cache"


def _cache_on(history: History, attr: str) -> dict[Any, Any] | None:
    """A dict kept on ``history`` under ``attr`` (made at the first call), or None where the history
    takes no attribute."""
    cache = getattr(history, attr, None)
    if cache is None:
        cache = {}
        try:
            setattr(history, attr, cache)
        except AttributeError:  # pragma: no cover - History without __dict__
            return None
    return cache


_ORDER_CACHE_ATTR = "_tripwire_rule_order_cache"


def in_capture_order(history: History, names: Sequence[str]) -> list[str]:
    """``names`` in the order the adapter first offered them (network order for parameters).

    Falls back to a natural sort (``fc2`` before ``fc10``) for names without scalar records."""
    key = tuple(sorted(names))
    cache = _cache_on(history, _ORDER_CACHE_ATTR)
    if cache is None:
        cache = {}
    hit = cache.get(key)
    if hit is not None:
        return list(hit)
    wanted = set(names)
    order: list[str] = []
    seen: set[str] = set()
    for tensor, _ in history.scalar_keys():
        if tensor in wanted and tensor not in seen:
            seen.add(tensor)
            order.append(tensor)
    order += sorted((n for n in names if n not in seen), key=natural_key)
    if len(cache) < 64:
        cache[key] = tuple(order)
    return order


def natural_key(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def value_at(history: History, tensor: str, reduction: str, step: int, mode: str, worker: int) -> float | None:
    """The value of one reduction at exactly ``step`` (None when it was not captured then)."""
    latest = history.latest(tensor, reduction, mode, worker)
    if latest is not None and latest[0] == step:
        return latest[1]
    return history.value(tensor, reduction, step, mode, worker)


def matching_tensors(history: History, pattern: str, collections: Iterable[str] | None = None, *,
                     search: bool = False) -> list[str]:
    """A tensor named exactly ``pattern``, else every tensor whose name fully matches the regex (with
    ``search``: in which the regex is found, as :func:`first_tensor` looks)."""
    if history.has_tensor(pattern):
        return [pattern]
    try:
        pat = re.compile(pattern)
    except re.error:
        return []
    if collections is None:
        names = history.tensor_names()
    else:
        names = sorted({n for c in collections for n in names_in(history, c)})
    return [n for n in names if (pat.search(n) if search else pat.fullmatch(n))]


def series_any_mode(
    history: History, tensor: str, mode: str, worker: int
) -> tuple[np.ndarray, np.ndarray, str]:
    """The ``raw`` series of a scalar in ``mode``; when empty there, in the first mode that has it
    (integrations differ in where they log validation metrics)."""
    steps, values = history.series(tensor, "raw", mode, worker)
    if len(steps):
        return steps, values, mode
    for other in history.modes():
        if other != mode:
            steps, values = history.series(tensor, "raw", other, worker)
            if len(steps):
                return steps, values, other
    return steps, values, mode


_HIGHER_IS_BETTER = re.compile(
    r"(?i)(auc|acc|accuracy|precision|recall|(^|[^a-z])f1|fscore|f_score|map|ndcg|r2|iou|dice|bleu|rouge|top_?\d|pr_auc|aucpr|score|correlation|spearman|pearson"
    r"|kappa|cosine|similarity|matthews|(^|[^a-z])mcc|psnr|ssim|explained_?variance"  # (trial 43k: val_cosine_similarity)
    r"|auroc|auprc|(^|[^a-z])prc($|[^a-z])|specificity|sensitivity|io_?u|signal_?noise|corr_?coef|concordance"  # (43n)
    r"|(^|[^a-z])pre($|@))"  # (XGBoost's precision at k: pre@5)
)
_LOWER_IS_BETTER = re.compile(r"(?i)(loss|error|err|mse|mae|rmse|mape|logloss|nll|perplexity|cross_?entropy|deviance|gamma|tweedie|poisson|cox"
                              r"|kl_?div|(^|[^a-z])kld|huber|hinge|(^|[^a-z])[wc]er($|[^a-z])|distance|dissimilar"
                              r"|log_?cosh|brier|(^|[^a-z])(b?ce|ece|bpc)($|[^a-z])|rmsle|mphe|nloglik|mase)")


def higher_is_better(name: str) -> bool:
    """Infer the direction of a metric from its name (``loss``/``error``/``rmse``: lower is better;
    ``auc``/``accuracy``/``map``/``ndcg``/``f1``/``pre@k``: higher is better). Unknown names: lower."""
    base = name.rsplit("/", 1)[-1]
    metric = base.split("-", 1)[1] if "-" in base else ""  # XGBoost: "validation-auc"
    base = metric or base  # ("map@5-", XGBoost's own name, has nothing after its '-')
    if _LOWER_IS_BETTER.search(base):
        return False
    return bool(_HIGHER_IS_BETTER.search(base))


def scalar_kind(collection: str) -> bool:
    return collection in SCALAR_KINDS or collection in ("labels", "predictions", "feature_importance", "trees")


def fmt(x: float) -> str:
    """A number for messages: 3 significant digits."""
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return str(x)
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e5:
        return f"{x:.4g}"
    return f"{x:.3g}"


def fmt_vs(value: float, limit: float) -> tuple[str, str]:
    """``(value, limit)`` for a message that sets a value beside the limit it is compared with: each
    as :func:`fmt` gives it, with more significant digits (up to 17, float64's) where that is needed
    for the texts to compare as the numbers do, so that a value above its limit never reads as equal
    to it or below it (trial 32e: "mean 5 ... (limits |mean| <= 5)" of a mean of 5.0001; "norm 1000
    (limit max_norm=1000)" of 1000.01). The value's text also compares with the limit itself as the
    value does (a limit the message gives in another form, ``burst`` times ``max_norm``, is not
    printed). A limit that :func:`fmt` gives exactly (the round numbers users set: 1000, 5, 1e4)
    keeps that text; equal numbers read equal; a NaN or infinite value or limit is as :func:`fmt`
    gives it."""
    fv, fl = fmt(value), fmt(limit)
    if not (math.isfinite(value) and math.isfinite(limit)):
        return fv, fl
    want = (value > limit) - (value < limit)
    exact = float(fl) == limit
    for digits in range(4, 18):
        shown_v, shown_l = float(fv), float(fl)
        if ((shown_v > shown_l) - (shown_v < shown_l) == want
                and (shown_v > limit) - (shown_v < limit) == want):
            break
        fv = f"{value:.{digits}g}"
        fl = fl if exact else f"{limit:.{digits}g}"
    return fv, fl


def fmt_apart(a: float, b: float) -> tuple[str, str]:
    """Two numbers for messages, each as :func:`fmt` gives it where that tells them apart, else with
    as many significant digits as that takes (up to 17, float64's: trial 23m, ``similar_across_runs``
    said "is 1 ..., the reference run has 1" of values 2e-5 apart)."""
    fa, fb = fmt(a), fmt(b)
    if fa != fb or a == b or a != a or b != b or a in (float("inf"), float("-inf")):
        return fa, fb
    for digits in range(5, 18):
        fa, fb = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if fa != fb:
            break
    return fa, fb


# -------------------------------------------------------------------------- classification arrays
def are_class_labels(labels: np.ndarray) -> bool:
    """Labels of a classification task: class indices (integers, or floats holding integers) or
    one-hot rows. Any non-integral value means a regression target, to which class rules do not
    apply."""
    lab = np.asarray(labels)
    if lab.ndim == 2 and lab.shape[1] > 1:
        return True
    if lab.dtype.kind == "f":
        finite = lab[np.isfinite(lab)]
        return bool(np.all(finite == np.rint(finite)))
    return lab.dtype.kind in "biu"


def prediction_kind(predictions: np.ndarray) -> str:
    """What predictions hold: ``"columns"`` (per-class scores, probabilities or logits, or one-hot
    rows), ``"indices"`` (class indices), or one value per sample: ``"probability"`` (in [0, 1]),
    ``"logit"`` (negative values too) or ``"values"`` (non-negative, some above 1: a regressor's
    output, a count model's rates, a Cox model's risk scores, to which the class rules do not apply)."""
    pred = np.asarray(predictions)
    if pred.ndim == 2 and pred.shape[1] > 1:
        return "columns"
    flat = pred.reshape(-1)
    if pred.dtype.kind != "f" or np.all(flat == np.rint(flat)):
        return "indices"
    finite = flat[np.isfinite(flat)]
    if not len(finite) or (finite.min() >= 0.0 and finite.max() <= 1.0):
        return "probability"
    return "logit" if finite.min() < 0.0 else "values"


def are_class_predictions(predictions: np.ndarray) -> bool:
    """Predictions of a classifier (see :func:`prediction_kind`): anything but a regressor's values."""
    return prediction_kind(predictions) != "values"


def to_classes(labels: np.ndarray, predictions: np.ndarray | None, threshold: float = 0.5) -> tuple[np.ndarray, np.ndarray | None]:
    """Class indices from labels (indices or one-hot) and predictions (indices, probabilities or
    logits per class, or one binary probability per sample)."""
    lab = np.asarray(labels)
    if lab.ndim == 2 and lab.shape[1] > 1:
        lab = lab.argmax(axis=1)
    lab = lab.reshape(-1)
    if lab.dtype.kind == "f":
        lab = np.rint(lab)
    lab = lab.astype(np.int64)
    if predictions is None:
        return lab, None
    pred = np.asarray(predictions)
    kind = prediction_kind(pred)
    if kind == "columns":
        out = pred.argmax(axis=1)
    elif kind == "indices":
        out = pred.reshape(-1)
    else:  # one binary probability per sample, cut at threshold (a logit: at 0)
        out = (pred.reshape(-1) > (threshold if kind == "probability" else 0.0)).astype(np.int64)
    out = np.asarray(out).reshape(-1).astype(np.int64)
    if len(out) != len(lab):
        raise ValueError(f"labels and predictions differ in length ({len(lab)} and {len(out)})")
    return lab, out


def finite_samples(labels: np.ndarray, predictions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``labels`` and ``predictions`` without the samples whose label or prediction (a row of
    per-class scores: any of its values) is not finite. A NaN score predicts no class: cut at a
    threshold or taken ``argmax`` of, it read as class 0, and a diverged model's NaN predictions
    were a "neglected minority class" (trial 23m); the non-finite values are ``exploding_tensor``'s
    finding. Arrays of another length than the labels are returned as they are."""
    lab, pred = np.asarray(labels), np.asarray(predictions)
    if lab.ndim == 0 or pred.ndim == 0 or (lab.dtype.kind not in "fc" and pred.dtype.kind not in "fc"):
        return lab, pred
    n = len(lab)
    ok = np.ones(n, dtype=bool)
    for arr in (lab, pred):
        if arr.dtype.kind not in "fc":
            continue
        per_sample = arr.reshape(len(arr), -1) if arr.ndim == 2 else arr.reshape(-1, 1)
        if per_sample.shape[0] != n:
            return lab, pred
        ok &= np.isfinite(per_sample).all(axis=1)
    if ok.all():
        return lab, pred
    return lab.reshape(n, -1)[ok].reshape((-1,) + lab.shape[1:]), pred.reshape(n, -1)[ok].reshape((-1,) + pred.shape[1:])


class RoundAccumulator:
    """Confusion counts of evaluation *rounds*: eval records between two stretches of training.

    A round's verdict is taken once, at the first record where it holds ``min_samples`` samples;
    ``verdicts`` keeps the last ones (True: the condition held)."""

    def __init__(self) -> None:
        self.train_marker = -1
        self.counts: dict[tuple[int, int], int] = {}
        self.samples = 0
        self.decided = False
        self.verdicts: list[bool] = []
        self.last_step: int | None = None
        #: fingerprint of the labels of the round's first record (a new pass over the same
        #: validation data starts with the same labels)
        self.first_labels: str | None = None
        #: the round's first :data:`SCORE_SAMPLES` labels and prediction scores (rows of a
        #: per-class score matrix, or one binary probability), where the predictions carry scores
        self.score_labels: list[np.ndarray] = []
        self.scores: list[np.ndarray] = []

    def start_round(self, train_marker: int) -> None:
        """Begin a new round (empty counts) at this training marker."""
        self.train_marker = train_marker
        self.counts = {}
        self.samples = 0
        self.decided = False
        self.first_labels = None
        self.score_labels, self.scores = [], []

    def starts_over(self, labels: np.ndarray) -> bool:
        """Whether a record with these labels begins a new pass over the validation data: the
        round holds at least one complete verdict's worth of samples (``decided``) and its first
        record had exactly these labels (an evaluation loader that does not shuffle repeats them)."""
        return self.decided and bool(self.first_labels) and self.first_labels == fingerprint(labels)

    def add(self, labels: np.ndarray, predictions: np.ndarray, raw_labels: np.ndarray | None = None,
            raw_scores: np.ndarray | None = None) -> None:
        if self.first_labels is None and raw_labels is not None:
            # only a record holding two classes or more can mark a pass's start: one that holds one
            # class only (an all-majority batch of imbalanced data) recurs within the pass, which
            # split every pass into rounds of a few batches, too few minority samples each to be
            # judged (trial 17i: class_imbalance silent with validation batches of 32, firing with
            # 256). "" marks a round without such a start: its rounds follow the training alone.
            self.first_labels = fingerprint(raw_labels) if _classes_in(raw_labels) > 1 else ""
        width = raw_scores.shape[1] if raw_scores is not None and raw_scores.ndim == 2 else 1
        if raw_scores is not None and sum(len(x) for x in self.score_labels) < min(SCORE_SAMPLES, SCORE_VALUES // width):
            self.score_labels.append(np.asarray(labels))
            self.scores.append(raw_scores)
        pairs, n = np.unique(np.stack([labels, predictions], axis=1), axis=0, return_counts=True)
        for (t, p), c in zip(pairs.tolist(), n.tolist()):
            self.counts[(t, p)] = self.counts.get((t, p), 0) + c
        self.samples += len(labels)

    def class_auc(self, c: int) -> float | None:
        """One-vs-rest AUC of class ``c``'s score over the round's kept samples (how well the
        model ranks that class's samples above the others, whatever its decision threshold);
        None without scores or without samples of both sides."""
        if not self.scores:
            return None
        lab = np.concatenate(self.score_labels)
        sc = np.concatenate(self.scores)
        if sc.ndim == 2 and sc.shape[1] > 1:
            if not 0 <= c < sc.shape[1]:
                return None
            score = sc[:, c].astype(np.float64)
        else:  # one binary probability per sample: class 1's score (class 0's: its complement)
            score = sc.reshape(-1).astype(np.float64) * (1.0 if c == 1 else -1.0)
        pos = lab == c
        npos, nneg = int(pos.sum()), int((~pos).sum())
        if not npos or not nneg or not np.all(np.isfinite(score)):
            return None
        _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
        ranks = (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]  # (1-based, ties averaged)
        return float((ranks[pos].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))

    def matrix(self) -> tuple[list[int], np.ndarray]:
        classes = sorted({k[0] for k in self.counts} | {k[1] for k in self.counts})
        index = {c: i for i, c in enumerate(classes)}
        m = np.zeros((len(classes), len(classes)), dtype=np.int64)
        for (t, p), c in self.counts.items():
            m[index[t], index[p]] += c
        return classes, m

    def state_dict(self) -> dict[str, Any]:
        return {
            "train_marker": self.train_marker,
            "counts": [[t, p, c] for (t, p), c in sorted(self.counts.items())],
            "samples": self.samples,
            "decided": self.decided,
            "verdicts": list(self.verdicts),
            "last_step": self.last_step,
            "first_labels": self.first_labels,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.train_marker = int(state.get("train_marker", -1))
        self.counts = {(int(t), int(p)): int(c) for t, p, c in state.get("counts", [])}
        self.samples = int(state.get("samples", 0))
        self.decided = bool(state.get("decided", False))
        self.verdicts = [bool(v) for v in state.get("verdicts", [])]
        last = state.get("last_step")
        self.last_step = None if last is None else int(last)
        first = state.get("first_labels")
        self.first_labels = None if first is None else str(first)


SCORE_SAMPLES = 2048
SCORE_VALUES = 1 << 18
"""Samples of a round whose scores are kept (for :meth:`RoundAccumulator.class_auc`), and at most
this many values (fewer samples with many classes). Not part of the rule's state: a round resumed
from a checkpoint is judged on what it sees after the resume."""


def class_scores(predictions: np.ndarray) -> np.ndarray | None:
    """Predictions that carry scores (probabilities or logits per class, or one binary
    probability or logit per sample), as they are; None for class indices."""
    pred = np.asarray(predictions)
    kind = prediction_kind(pred)
    if kind == "indices" or pred.dtype.kind != "f":
        return None
    return pred if kind == "columns" else pred.reshape(-1)


def _classes_in(labels: np.ndarray) -> int:
    """Distinct classes in a labels array (rows of a one-hot matrix, else values)."""
    arr = np.asarray(labels)
    if arr.ndim == 2 and arr.shape[1] > 1:
        return len(np.unique(arr.argmax(axis=1)))
    return len(np.unique(arr.reshape(-1)))


def fingerprint(labels: np.ndarray) -> str:
    """A digest of a labels array (shape, dtype and contents)."""
    arr = np.ascontiguousarray(np.asarray(labels))
    digest = hashlib.blake2b(arr.tobytes(), digest_size=16)
    digest.update(f"{arr.shape}{arr.dtype.str}".encode())
    return digest.hexdigest()


def train_marker(history: History, worker: int) -> int:
    """A number that changes whenever training made progress (new train records)."""
    return len(history.wall_times("train", worker)[0])


def read_pair(history: History, labels: str, predictions: str, step: int, mode: str, worker: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Labels and predictions saved at ``step`` (None when either is missing)."""
    try:
        if step not in history.array_steps(labels, "raw", mode, worker) and history.value(labels, "raw", step, mode, worker) is None:
            return None
        if step not in history.array_steps(predictions, "raw", mode, worker) and history.value(predictions, "raw", step, mode, worker) is None:
            return None
        lab = history.array(labels, step, "raw", mode, worker)
        pred = history.array(predictions, step, "raw", mode, worker)
    except TensorNotFoundError:
        return None
    return lab, pred


def first_tensor(history: History, collection: str, pattern: str) -> str | None:
    """The tensor named ``pattern``, else the first (capture order) of ``collection`` matching it."""
    if history.has_tensor(pattern):
        return pattern
    names = [n for n in names_in(history, collection) if re.search(pattern, n)]
    if not names:
        return None
    return in_capture_order(history, names)[0]


# ------------------------------------------------------------------------------ planned training
def planned_steps(history: History) -> int | None:
    """The planned number of train steps when the integration knows it (``None``: unknown)."""
    n = getattr(history, "planned_steps", None)
    return int(n) if isinstance(n, (int, np.integer)) and n >= 1 else None


def scaled_steps(history: History, explicit: int | None, fraction: float, floor: int, fallback: int) -> int:
    """A window in steps: ``explicit`` when given, else ``max(floor, ceil(fraction * planned))``
    when the planned training length is known, else ``fallback``."""
    if explicit is not None:
        return explicit
    planned = planned_steps(history)
    if planned is None:
        return fallback
    return max(floor, int(np.ceil(fraction * planned)))


def unfed_rules(rules: Iterable[Rule], have: Iterable[str]) -> dict[str, list[str]]:
    """``{rule: [collections it needs of which the run holds none]}`` for a run holding the
    collections ``have``; losses and metrics stand for each other (XGBoost's evaluation results
    are its losses). A rule that :attr:`~tripwire.Rule.reads_any` of its collections is fed by one
    of them (trial 19a: ``all_zero`` on a run of gradients only judged them, and was said never to
    have judged); one that reads every captured collection (:meth:`~tripwire.Rule.reads_every_collection_but`)
    by any it does not leave out."""
    held = set(have)
    if held & {"losses", "metrics"}:
        held |= {"losses", "metrics"}
    out: dict[str, list[str]] = {}
    for rule in rules:
        needed = {req.collection for req in rule.requirements() if not req.optional}
        missing = sorted(needed - held)
        left_out = rule.reads_every_collection_but()
        if left_out is not None and held - left_out:
            continue  # (it reads whatever the run captured: trial 32a F2)
        if missing and not (rule.reads_any and needed & held):
            out[rule.name] = missing
    return out


def optimizer_read_in_full(collections: Iterable[Any], rules: Iterable[Rule], names: Iterable[str] | None = None) -> bool:
    """Whether a training captures the ``optimizer`` kind in full: the learning rates (``lr/<group>``)
    and the update ratios (``update_ratio/<param>``, which take a copy of the parameters at each save
    step). True where one of ``collections`` (the config's own, ``Config.collections``: not those its
    rules add) takes the ``optimizer`` kind (the ``optimizer`` collection, a collection of that kind,
    or a custom one of any kind), or where a rule needs the ``optimizer`` collection (a
    :class:`~tripwire.Requirement` that is not ``optional``: ``weight_update_ratio``). False where
    only rules that read it optionally ask for it (``loss_scale_collapse`` and ``exploding_gradient``,
    of the ``default`` set, read the ``loss_scale`` alone): the integrations then offer the loss scale
    alone, and no parameter is copied for update ratios. ``names``: the ``optimizer``-kind tensors an
    integration would offer (``lr/0``, ``update_ratio/<param>``), where it knows them: a custom
    collection of any kind then counts only where its ``include`` takes one of them (trial 36k: a
    collection of one layer's tensors, ``include: ['^fc1\\.']``, beside the default rules made the
    Lightning callback copy every parameter and store learning rates and update ratios nobody asked for)."""
    wanted = list(names) if names is not None else None
    for c in collections:
        if not c.accepts_kind("optimizer"):
            continue
        if wanted is None or c.kinds is not None or any(c.matches(n, "optimizer") for n in wanted):
            return True
    for rule in rules:
        try:
            needs = rule.requirements()
        except Exception:  # noqa: BLE001 - (one whose requirements() raises is refused when it is built)
            continue
        if any(req.collection == "optimizer" and not req.optional for req in needs):
            return True
    return False


def unfed_message(rule: str | Sequence[str], missing: Sequence[str], have: Iterable[str]) -> str:
    """``rule`` (or several rules missing the same collections: one message for them all) had
    nothing to read: no tensor of the ``missing`` collections was captured, and what the run holds
    tensors of (``have``). Said of what was captured, not of the config (trial 28e F10: "this run
    has no 'gradients' collection" came right after a line listing the config's collections,
    gradients among them)."""
    rules = [rule] if isinstance(rule, str) else list(rule)
    who = f"rule {rules[0]!r}" if len(rules) == 1 else f"rules {', '.join(map(repr, rules))}"
    names = list(map(repr, missing))
    which = (f"the {names[0]} collection" if len(names) == 1 else
             f"the {', '.join(names[:-1])} or {names[-1]} collections")
    return (f"{who} had nothing to read: no tensor of {which} was captured "
            f"(the run holds tensors of: {', '.join(sorted(have)) or 'none'})")


def filtered_out(rule: Rule, history: History, collection: str, what: str, include: str | None,
                 exclude: str | None = None, *, prefix: str = "") -> str | None:
    """A rule's :meth:`~BuiltinRule.nothing_read` message where its ``include`` (and ``exclude``)
    regexes leave out every tensor of ``collection`` the run holds (whose name starts with
    ``prefix``: ``update_ratio/`` of the ``optimizer`` collection): ``rule 'name' had nothing to
    read: include=... and exclude=... leave out every <what> captured (<names>), so the rule never
    judged``. None where they leave one in, or where the collection holds none (:func:`unfed_message`
    says that). A filter at its default is said so; one longer than 80 characters is cut, or, at its
    default (the gradient rules' ``exclude``), left to ``tripwire rules <rule>`` to show. Trial 32e F4: an
    ``include`` matching nothing (``conv`` for a model whose layers are ``features.*``) turned
    ``dead_relu``, ``exploding_gradient``, ``vanishing_gradient`` and ``tensor_variance`` off
    without a word; only ``weight_update_ratio`` said so."""
    held = [n for n in names_in(history, collection) if n.startswith(prefix)]
    if not held or any(n.startswith(prefix) for n in names_in(history, collection, include, exclude)):
        return None
    defaults = _init_parameters(type(rule))
    said = []
    for param, value in (("include", include), ("exclude", exclude)):
        if value is None or (param == "exclude" and not value):
            continue
        text, default = repr(value), getattr(defaults.get(param), "default", None)
        if value == default:
            said.append(f"{param}={text} (its default)" if len(text) <= 80 else
                        f"{param} (its default, which `tripwire rules {rule.name}` shows)")
        else:
            said.append(f"{param}={text if len(text) <= 80 else text[:77] + '...'}")
    ordered = in_capture_order(history, held)
    shown = ", ".join(ordered[:5]) + (f" and {len(ordered) - 5} more" if len(ordered) > 5 else "")
    verb = "leave" if len(said) > 1 else "leaves"
    return (f"rule {rule.name!r} had nothing to read: {' and '.join(said)} {verb} out every {what} captured "
            f"({shown}), so the rule never judged")


_MODE_WORDS = {"train": "training step", "eval": "evaluation", "test": "test step", "predict": "prediction step"}
"""What a record of each mode is, in a message: ``no evaluation (mode eval) was recorded``."""

_HELD_OUT = ("val", "valid", "test", "eval")
"""How a held-out value's name starts (``val_loss``, ``validation-logloss``, ``test_acc``)."""


def input_mode(rule: Rule, param: str) -> str | None:
    """The mode in which ``rule`` reads what its parameter ``param`` names (:meth:`Rule.named_inputs`):
    the rule's ``<param>_mode`` where it has one (``overfit``/``overtraining``: ``train_mode``,
    ``validation_mode``), else its one mode where it judges a single mode (a loss rule reads its
    ``loss`` in the mode it judges, ``train`` by default), else None (any mode)."""
    mode = getattr(rule, f"{param}_mode", None)
    if isinstance(mode, str) and mode in _MODE_WORDS:
        return mode
    modes = tuple(getattr(rule, "modes", ()) or ())
    return modes[0] if len(modes) == 1 and modes[0] in _MODE_WORDS else None


def captured_in_mode(history: History, name: str, mode: str) -> bool:
    """Whether ``history`` holds a value of ``name`` (a scalar of any reduction, or an array) in
    ``mode``, by any worker."""
    reductions = history.reductions(name)
    kinds = history.array_kinds(name)
    for worker in history.workers:
        for reduction in reductions:
            try:
                if len(history.series(name, reduction, mode, worker)[0]):
                    return True
            except TensorNotFoundError:
                continue
        for kind in kinds:
            try:
                if history.array_steps(name, kind, mode, worker):
                    return True
            except TensorNotFoundError:
                continue
    return False


def unmatched_inputs(rules: Iterable[Rule], history: History, trained: bool | None = None, *,
                     unrecorded: bool = True) -> list[str]:
    """One message per rule parameter that names a loss or metric (:meth:`Rule.named_inputs`) and
    matched none of ``history`` (a misspelled ``val_loss``, or ``loss`` on XGBoost, which logs
    ``train-logloss``): what the rule reads under that name was missing all run. ``trained``:
    whether training steps ran (default: whether ``history`` holds any; a config that captures
    nothing in mode train, an XGBoost metrics include of the validation set only, has none).

    Where the parameter is read in one mode other than train (:func:`input_mode`: ``overfit``'s
    ``validation`` in mode eval) and the run recorded nothing in that mode (but records of
    another), the message says so, and suggests no other name: the name may be right, and the
    training stopped before its first evaluation, or never ran one (trials 27g, 27h: "validation='val_loss' ...; did you mean 'loss'?" after a rule
    stopped training in its first epoch). A "did you mean" names only a tensor captured in that mode
    (trial 27f: a validation name pointed at ``train-logloss``, a training metric, makes ``overfit``
    compare the training metric with itself), and for a held-out name (``val_...``) one that looks
    held-out where the mode is unknown or ``train``; a training name is never pointed at a held-out
    one (``loss`` is not ``val_loss``). ``unrecorded`` False leaves the parameters read in a mode
    not recorded yet out (a training still running may evaluate later: said when it ends), and the
    rules' own :meth:`BuiltinRule.nothing_read` (the tensors may come later too); with it, each
    rule's :meth:`~BuiltinRule.nothing_read` message comes first, where it has one."""
    if not (bool(history.steps("train")) if trained is None else trained):
        return []  # no training (an evaluation-only run): the rules had nothing to read anyway
    out = []
    recorded = set(history.modes())
    for rule in rules:
        # (a rule that reads some of a collection's tensors, none captured: weight_update_ratio with
        # learning rates but no update ratio, trial 30a; said when the training ended, as the inputs of
        # a mode not recorded yet)
        reader = getattr(rule, "nothing_read", None)
        said = reader(history) if unrecorded and callable(reader) else None
        if said:
            out.append(said)
        collections = tuple(getattr(rule, "input_collections", ("losses", "metrics")))
        scores = collections == ("losses", "metrics")
        captured = sorted({n for c in collections for n in names_in(history, c)})
        if not captured and not scores:
            continue  # nothing of those collections at all: said elsewhere (what was never captured)
        search = getattr(rule, "input_match", "fullmatch") == "search"
        for param, pattern in rule.named_inputs().items():
            if matching_tensors(history, pattern, collections, search=search):
                continue
            mode = input_mode(rule, param)
            if mode not in (None, "train") and mode not in recorded and recorded:
                if not unrecorded:
                    continue
                others = [m for m in MODES if m in recorded]
                held_modes = (f"mode{'s' if len(others) > 1 else ''} {', '.join(others)} only" if others
                              else "nothing")
                out.append(f"rule {rule.name!r}: {param}={pattern!r} read nothing: no {_MODE_WORDS[mode]} (mode "
                           f"{mode}) was recorded in this run (it recorded {held_modes}), so the rule had nothing "
                           f"to read under any name: the training stopped before its first {_MODE_WORDS[mode]}, "
                           f"ran none, or saved none")
                continue
            # the names it could have meant: captured in the mode it reads (trial 27f: a validation
            # name is not pointed at a training metric, nor the training loss at a validation one)
            held = [n for n in captured if mode is None or captured_in_mode(history, n, mode)]
            if pattern.startswith(_HELD_OUT):
                # a validation name's look-alike is a held-out one (val_loss: validation-logloss, not
                # train-logloss); in a held-out mode (eval) whatever it holds is held out (Keras's loss)
                alike = [n for n in held if n.startswith(_HELD_OUT)] or (held if mode not in (None, "train") else [])
            else:
                # a training loss's name is not a validation one's misspelling (loss is not val_loss)
                alike = [n for n in held if not n.startswith(_HELD_OUT)]
            what = "loss or metric" if scores else f"{' or '.join(collections)} tensor"
            default = getattr(_init_parameters(type(rule)).get(param), "default", None)
            training = [n for n in captured if not n.startswith(_HELD_OUT)]
            if scores and pattern == default and training and all(higher_is_better(n) for n in training):
                # (its default, and nothing it could read: an XGBoost ranker logs ndcg and map only)
                out.append(f"rule {rule.name!r}: {param}={pattern!r} (its default) matches no loss or metric of "
                           f"this run, and none of the training's metrics is lower-is-better ("
                           f"{', '.join(training)} {'is' if len(training) == 1 else 'are'} higher-is-better; captured: "
                           f"{', '.join(captured)}): the rule read nothing; name a "
                           f"lower-is-better metric with {param}=..., or leave the rule out")
                continue
            if scores and _adversarial(captured):
                # (trial 41f: a Keras GAN's rules were offered "did you mean 'g_loss'?", which the docs warn
                # against: pointed at it, loss_not_decreasing stopped a GAN that was learning)
                out.append(f"rule {rule.name!r}: {param}={pattern!r} matches no {what} of this run (captured: "
                           f"{', '.join(captured)}): the rule read nothing under that name. The losses of a GAN "
                           f"(a generator's and a discriminator's) do not fall by design (docs/rules.md): point "
                           f"{param}= at a validation metric of the samples, or leave the rule out")
                continue
            out.append(f"rule {rule.name!r}: {param}={pattern!r} matches no {what} of this run"
                       f"{did_you_mean(pattern, alike)} (captured: {', '.join(captured) or 'none'}); "
                       f"the rule read nothing under that name")
    return out


_GENERATOR = re.compile(r"(^|[/_.-])(g|gen|generator)[_.-]?loss", re.IGNORECASE)
_DISCRIMINATOR = re.compile(r"(^|[/_.-])(d|disc|discriminator|critic)[_.-]?loss", re.IGNORECASE)


def _adversarial(names: Sequence[str]) -> bool:
    """Whether ``names`` hold a generator's and a discriminator's loss (``g_loss`` and ``d_loss``,
    ``gen_loss`` and ``disc_loss``): a GAN, whose losses do not fall by design."""
    return any(_GENERATOR.search(n) for n in names) and any(_DISCRIMINATOR.search(n) for n in names)
