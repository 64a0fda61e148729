"""What the framework callbacks share about other callbacks' hooks, how they say a stop, and how
they tell a later fit that continues the model (no framework import; no import of ``tripwire``
either: the Session says a stop through :func:`say_stop` too)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from tripwire import Finding

logger = logging.getLogger("tripwire")

SAYS_STOP: frozenset[str] = frozenset({"keras", "lightning"})
"""The integrations (a Session's ``framework``) whose callback logs :func:`say_stop`'s line itself, with
what only it knows (the step training stops at, where that is not the finding's: Lightning's
distributed stop; the finding of another rank); for any other (a hand-written loop's ``python``,
``mxnet``, ``xgboost``) the Session logs it where a rule's ``stop_training`` action takes effect
(trial 27h F9: a hand loop and MXNet's hook logged no such line). Once per stop either way."""


def defines_own(obj: Any, name: str, base: type) -> bool:
    """Whether ``obj`` has its own ``name`` method (its class's or an instance attribute, as the
    frameworks' ``LambdaCallback`` sets them) rather than ``base``'s."""
    fn = getattr(obj, name, None)
    return getattr(fn, "__func__", fn) is not getattr(base, name, None)


def frames_above(frame: Any, depth: int) -> Iterator[Any]:
    """``frame`` and the frames above it, ``depth`` at most (fewer at the top of the stack): where a
    callback looks for the framework's call that ran its hook (``fit``'s arguments, the callback
    list, ``xgboost.train``'s locals)."""
    for _ in range(depth):
        if frame is None:
            return
        yield frame
        frame = frame.f_back


def say_stop(found: Finding, mode: str | None = None, step: int | None = None) -> None:
    """The one line logged (a WARNING) when a rule's finding stops training, by the callback of an
    integration of :data:`SAYS_STOP`, else by the Session (the finding's own message is its log
    action's, and is in the run and in ``callback.findings``); an eval step, which counts
    validation batches, names the train step it followed too (trial 22c). Given the ``mode`` and
    ``step`` at which training stops, where they are not the finding's own, it names them too (trial
    26h: "stopping training: rule 'exploding_tensor' at step 7" where training stopped at step 10, the
    save step at which the NaN loss kept at step 7 was judged)."""
    after = found.details.get("train_step") if found.mode != "train" else None
    then = f", after train step {after}" if isinstance(after, int) and after >= 0 else ""
    if mode is None or step is None or (found.mode, found.step) == (mode, step):
        logger.warning("tripwire: stopping training: rule %r at step %d (%s%s)", found.rule, found.step, found.mode,
                       then)
    else:
        logger.warning("tripwire: stopping training at %s step %d: rule %r at step %d (%s%s)", mode, step, found.rule,
                       found.step, found.mode, then)


def same_fingerprint(before: tuple[tuple[int, ...], np.ndarray] | None,
                     now: tuple[tuple[int, ...], np.ndarray] | None) -> bool:
    """Whether two fingerprints of a model's weights, ``(the weights' ids, a statistic or two of
    each)`` taken by a callback at a fit's end and at the next fit's start, are of the same weights
    with the same values: the later fit continues the training (trials 25e, 25h)."""
    if before is None or now is None or before[0] != now[0] or before[1].shape != now[1].shape:
        return False
    return bool(np.allclose(now[1], before[1], rtol=1e-6, atol=0.0, equal_nan=True))


def same_as_any(before: Sequence[tuple[tuple[int, ...], np.ndarray]],
                now: tuple[tuple[int, ...], np.ndarray] | None) -> bool:
    """Whether ``now``, a fingerprint taken at a fit's start, is :func:`same_fingerprint` as any of
    ``before``: the fingerprints a callback took at the last fit's epoch ends and at its end. The
    weights a fit hands on are those it ended with, or an epoch end's restored after it (Keras's
    ``EarlyStopping(restore_best_weights=True)`` at its ``on_train_end``, which runs after tripwire's
    own where it is listed after it; a best checkpoint loaded after the fit): each is the training
    continued (trial 26j: the fit after a restore was taken for a new model, and
    ``loss_not_decreasing``, judging a converged model alone, stopped it)."""
    return now is not None and any(same_fingerprint(b, now) for b in before)
