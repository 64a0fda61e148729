"""Names and modes of XGBoost evaluation sets (pure functions, no XGBoost import).

XGBoost names metrics ``<evalset>-<metric>``. tripwire records an evaluation set's metrics under
mode ``train`` when the set *is* the training data (the same ``DMatrix`` object or one of the same
content, or the set's final name is ``train``) and under mode ``eval`` otherwise, at the same step number (the round).

``eval_names``:

- ``"auto"`` (default): names given by the user are kept. The sklearn API names its sets
  ``validation_0``, ``validation_1``, ...; when every set is named that way, the set that is the
  training data (``eval_set=[(X, y), ...]`` with the data given to ``fit``) becomes
  ``train`` and, when exactly one other set remains, it becomes ``validation``. So
  ``XGBClassifier(callbacks=[cb]).fit(X, y, eval_set=[(X, y), (Xv, yv)])`` records
  ``train-logloss`` and ``validation-logloss``, the names the built-in rules know.
- a mapping ``{xgboost name: tripwire name}``: rename those sets, keep the others.
- ``None``: keep XGBoost's names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tripwire._errors import ConfigError
from tripwire._validate import did_you_mean

__all__ = ["EvalSet", "check_eval_names", "resolve_eval_sets", "train_data_as_held_out"]

_SKLEARN_NAME = re.compile(r"^validation_\d+$")
#: A set name that stands for held-out data (``validation``, ``valid``, ``dval``, ``test``, ``holdout``, ``dev``, ``eval``).
_HELD_OUT_NAME = re.compile(r"(?i)val|test|hold|dev")


@dataclass(frozen=True)
class EvalSet:
    """One evaluation set: XGBoost's ``raw`` name, tripwire's ``name`` and ``mode``, its position
    in ``evals`` and whether it is the training ``DMatrix`` (None when unknown)."""

    raw: str
    name: str
    mode: str
    index: int
    is_train: bool | None


def check_eval_names(value: object) -> str | dict[str, str] | None:
    """Validate the ``eval_names`` argument."""
    if value is None or value == "auto":
        return value  # type: ignore[return-value]
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, name in value.items():
            if not isinstance(key, str) or not isinstance(name, str) or not name or "-" in name:
                raise ConfigError(
                    f"eval_names[{key!r}]: got {name!r}; accepted: a non-empty string without '-' "
                    "(XGBoost joins set and metric with '-')"
                )
            taken = next((k for k, n in out.items() if n == name), None)
            if taken is not None:  # (known from the mapping alone: refused here, before any fit; trial 37f)
                raise ConfigError(f"eval_names: evaluation sets {taken!r} and {key!r} would both be named {name!r}; "
                                  f"give them distinct names")
            out[key] = name
        return out
    raise ConfigError(f"eval_names: got {value!r}; accepted: 'auto', None or a mapping {{xgboost name: new name}}")


def resolve_eval_sets(
    raw_names: Sequence[str], is_train: Sequence[bool | None], eval_names: str | Mapping[str, str] | None
) -> list[EvalSet]:
    """Final names and modes of the evaluation sets (see the module docstring)."""
    raw = list(raw_names)
    flags = list(is_train)
    names = list(raw)
    if isinstance(eval_names, Mapping):
        for key in eval_names:
            if key not in raw:
                raise ConfigError(
                    f"eval_names: no evaluation set named {key!r}{did_you_mean(key, raw)}; "
                    f"the evaluation sets are: {', '.join(raw) or '(none)'}"
                )
        names = [eval_names.get(r, r) for r in raw]
    elif eval_names == "auto" and raw and all(_SKLEARN_NAME.match(r) for r in raw):
        train_idx = [i for i, f in enumerate(flags) if f]
        if len(train_idx) == 1:
            names[train_idx[0]] = "train"
        rest = [i for i in range(len(raw)) if i not in train_idx]
        if len(rest) == 1:
            names[rest[0]] = "validation"
    seen: dict[str, str] = {}
    for r, n in zip(raw, names):
        if n in seen:
            raise ConfigError(
                f"eval_names: evaluation sets {seen[n]!r} and {r!r} would both be named {n!r}; give them distinct names"
            )
        seen[n] = r
    return [
        EvalSet(r, n, "train" if (f or n == "train") else "eval", i, f)
        for i, (r, n, f) in enumerate(zip(raw, names, flags))
    ]


def train_data_as_held_out(sets: Sequence[EvalSet]) -> list[EvalSet]:
    """The evaluation sets that are the training data (``is_train``: the training ``DMatrix`` or one of
    the same content) where held-out data was meant (trial 27f: ``evals=[(dtrain, "train"), (dtrain,
    "validation")]`` and sklearn's ``eval_set=[(X_train, y_train)]`` were taken as a validation set):

    - a set whose name stands for held-out data (``validation``, ``valid``, ``test``, ``holdout``,
      ``dev``, ``eval``; the final name too, where ``eval_names`` renamed it), sklearn's
      ``validation_<i>`` aside (sklearn names every set so, the training data too);
    - where no set is held out: every set of the sklearn API (``eval_set=`` is sklearn's only way to
      ask for validation data), and every set but one named ``train`` when two or more sets are
      the training data (one of them was meant to be held out).

    A training set evaluated alone under a name of its own (``evals=[(dtrain, "train")]``,
    ``"dtrain"``) is not among them: it is how XGBoost logs a training metric."""
    trains = [s for s in sets if s.is_train]
    held_out = any(s.mode == "eval" for s in sets)
    out = []
    for s in trains:
        sklearn = bool(_SKLEARN_NAME.match(s.raw))
        named = ((not sklearn and bool(_HELD_OUT_NAME.search(s.raw)))
                 or (s.name != s.raw and bool(_HELD_OUT_NAME.search(s.name))))
        alone = not held_out and s.raw != "train" and (sklearn or len(trains) > 1)
        if named or alone:
            out.append(s)
    return out
