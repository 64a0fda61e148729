"""What the framework callbacks share about other callbacks' hooks, how they say a stop, and how
they tell a later fit that continues the model (no framework import; no import of ``tripwire``
either: the Session says a stop through :func:`say_stop` too)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
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


def say_stop(found: Finding, mode: str | None = None, step: int | None = None, rank: int | None = None,
             train_step: int | None = None) -> None:
    """:func:`_say_stop_line`, whose own failure (a logging handler of the user's that raises) is
    dropped: the stop is taken whatever the line (trial 43g: such a handler ended the fit failed)."""
    try:
        _say_stop_line(found, mode, step, rank, train_step)
    except Exception:  # noqa: BLE001 - (the handler's own error: nothing left to say it with)
        pass


def _say_stop_line(found: Finding, mode: str | None = None, step: int | None = None, rank: int | None = None,
                   train_step: int | None = None) -> None:
    """The one line logged (a WARNING) when a rule's finding stops training, by the callback of an
    integration of :data:`SAYS_STOP`, else by the Session (the finding's own message is its log
    action's, and is in the run and in ``callback.findings``); an eval step, which counts
    validation batches, names the train step it followed too (trial 22c). Given the ``mode`` and
    ``step`` at which training stops, where they are not the finding's own, it names them too (trial
    26h: "stopping training: rule 'exploding_tensor' at step 7" where training stopped at step 10, the
    save step at which the NaN loss kept at step 7 was judged).

    ``rank``: the rank of a distributed job (world size > 1) that stops, named after ``tripwire:``
    as the Lightning callback names it, so that the ranks' lines on one console can be told apart
    (trial 30b F3): ``tripwire: rank 1: stopping training: rule 'exploding_tensor' at step 23
    (train)``. A ``distributed_stop`` check (another rank's rule stopped this one:
    ``Session.stopped_by_rank``, Lightning's) names the rule of the rank it quotes (its
    ``details["stopped_by"]``): ``tripwire: rank 0: stopping training: rank 1's rule
    'exploding_tensor' at step 23 (train)``, ``rank 1's stop`` where its rule is not known,
    ``another rank's stop`` where neither is. ``train_step``: the train step before the stop's step
    where that step is not a train step (an eval step, which counts validation batches), named
    after it: ``stopping training at eval step 0, after train step 9: ...`` (trial 38f)."""
    who = "" if rank is None else f"rank {rank}: "
    if found.rule == "distributed_stop" and found.source == "check":  # (another rank's stop: no rule of this one)
        stoppers = found.details.get("stopped_by")
        listed = [s for s in stoppers if isinstance(s, Mapping)] if isinstance(stoppers, (list, tuple)) else []
        named = [_stopper_words(s) for s in listed[:2]]
        if len(listed) > 2:
            named.append(f"{len(listed) - 2} more ranks' rules")
        what = " and ".join(named) if named else "another rank's stop"
        first = (listed[0].get("mode"), listed[0].get("step")) if listed and "step" in listed[0] else None
        at = (found.mode, found.step) if mode is None or step is None else (mode, step)
        after = f", after train step {train_step}" if at[0] != "train" and train_step is not None and train_step >= 0 else ""
        stops = ("stopping training" if first is None or first == at else
                 f"stopping training at {at[0]} step {at[1]}{after}")  # (as the other rank's line: trial 38p)
        logger.warning("tripwire: %s%s: %s", who, stops, what)
        return
    after = found.details.get("train_step") if found.mode != "train" else None
    then = f", after train step {after}" if isinstance(after, int) and after >= 0 else ""
    # (another rank's finding, sent back by tripwire watch's stop request: whose it is; trial 38i)
    whose = f"rank {found.worker}'s rule" if rank is not None and found.worker != rank else "rule"
    if mode is None or step is None or (found.mode, found.step) == (mode, step):
        logger.warning("tripwire: %sstopping training: %s %r at step %d (%s%s)", who, whose, found.rule, found.step,
                       found.mode, then)
    else:
        before = f", after train step {train_step}" if mode != "train" and train_step is not None and train_step >= 0 else ""
        logger.warning("tripwire: %sstopping training at %s step %d%s: %s %r at step %d (%s%s)", who, mode, step,
                       before, whose, found.rule, found.step, found.mode, then)


def stopper_entry(found: Finding, rank: int | None) -> dict[str, Any]:
    """How a ``distributed_stop`` quotes the finding that stopped another rank (an entry of its
    ``details["stopped_by"]``): ``rank``, ``rule``, ``step``, ``mode``, ``message`` (cut by
    :func:`shortened`), and ``train_step`` for a finding outside training that knows the train step
    before it (``Session.stopped_by_rank``; the Lightning callback gathers one from each stopping rank)."""
    entry: dict[str, Any] = {"rank": rank, "rule": found.rule, "step": int(found.step), "mode": found.mode,
                             "message": shortened(found.message)}
    after = found.details.get("train_step") if found.mode != "train" else None
    if isinstance(after, int) and not isinstance(after, bool) and after >= 0:
        entry["train_step"] = after
    return entry


def stopper_said(entry: Mapping[str, Any]) -> str:
    """What a ``distributed_stop``'s message says of the stop it quotes (a :func:`stopper_entry`):
    ``rank 1's rule 'exploding_tensor' (train step 23: the loss is nan ...) stopped training``."""
    after = entry.get("train_step")
    then = f", after train step {after}" if isinstance(after, int) and not isinstance(after, bool) and after >= 0 else ""
    return (f"rank {entry['rank']}'s rule {entry['rule']!r} ({entry['mode']} step {entry['step']}{then}: "
            f"{entry['message']}) stopped training")


def _stopper_words(stopper: Mapping[str, Any]) -> str:
    """How the stop line names another rank's stop that a ``distributed_stop`` quotes (one entry of
    its ``details["stopped_by"]``: ``rank``, and ``rule``, ``step``, ``mode``, ``train_step`` where
    known): ``rank 1's rule 'exploding_tensor' at step 23 (train)``, else ``rank 1's stop``."""
    rank = stopper.get("rank")
    if stopper.get("rule") is None:
        return f"rank {rank}'s stop"
    after = stopper.get("train_step")
    then = f", after train step {after}" if isinstance(after, int) and not isinstance(after, bool) and after >= 0 else ""
    return f"rank {rank}'s rule {stopper.get('rule')!r} at step {stopper.get('step')} ({stopper.get('mode')}{then})"


QUOTED = 300
"""The most characters of another rank's finding message a ``distributed_stop`` quotes."""


def shortened(message: str, most: int = QUOTED) -> str:
    """``message`` on one line, cut to at most ``most`` characters (and `` ...``) where it is longer:
    after its last whole sentence that fits, else after its last whole word (trial 28a F5), as a
    ``distributed_stop`` quotes another rank's finding (``Session.stopped_by_rank``, the Lightning
    callback's own copy of it)."""
    from tripwire._finding import short_text  # (here: this module imports no tripwire module as it loads)

    return short_text(message, most, sentence="last")


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


def ended_as(session: Any, status: str | None) -> str:
    """The status ``session.close(status)`` just wrote in the end marker: ``status``, else as the
    session decided it (``stopped`` where a finding stopped training, ``failed`` where the training
    failed, else ``complete``): what a callback's repr says of its run."""
    if status is not None:
        return status
    return "stopped" if session.stopped_by is not None else "failed" if getattr(session, "_failed", False) else "complete"
