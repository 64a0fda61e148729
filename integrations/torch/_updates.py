"""``capture_update_ratios``: the update ratios of a hand-written PyTorch loop's optimizer step;
``offer_gradients``: its gradients, named as the update ratios and activations are.

A :class:`tripwire.Session` derives nothing from the weights a loop offers: ``weight_update_ratio``
reads ``update_ratio/<param>`` tensors of the ``optimizer`` collection, which the framework
integrations take themselves (trial 30a: a loop that offered its weights and learning rate gave the
rule nothing to read, and nothing said so). This helper takes them as the Lightning callback does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from tripwire._errors import ConfigError, StepEndedError
from tripwire._session import StepPlan

from .._torch import checked_model_and_plan, clean_name, snapshot, update_ratios

logger = logging.getLogger("tripwire")

__all__ = ["capture_update_ratios", "offer_gradients"]


@contextlib.contextmanager
def capture_update_ratios(model: nn.Module, plan: StepPlan | None,
                          optimizer: torch.optim.Optimizer | None = None) -> Iterator[None]:
    """Offer the update ratio of each parameter of ``model`` that the optimizer step in the ``with``
    block moves, to ``plan`` (a :class:`tripwire.StepPlan` from ``session.begin_step``), as the
    Lightning callback takes it::

        plan = session.begin_step("train", step)
        loss = loss_fn(model(x), y)
        loss.backward()
        plan.add("loss", loss.detach(), "losses")
        with capture_update_ratios(model, plan, optimizer):
            optimizer.step()                    # the update whose ratios are taken
        decision = session.end_step()

    ``update_ratio/<param>`` (kind ``optimizer``) is ``||w_after - w_before|| / ||w_before||`` (L2
    norms over the whole tensor, in float32 for half-precision parameters, the complex norm for a
    complex one; +inf for a parameter that was all zeros before), one value per parameter, read when
    the step ends. ``<param>`` is the parameter's name in ``model.named_parameters()``
    (``torch.compile``'s ``_orig_mod.`` dropped; of a ``DistributedDataParallel`` or ``DataParallel``
    wrapper, the name in the module it wraps, without ``module.``), as the Lightning callback names
    it and as docs/architecture.md's loops offer the gradients (the DDP recipe offers those of the
    wrapped module: trial 30g F3, the ratios were ``update_ratio/module.0.weight`` beside
    ``gradients/0.weight``).

    The parameters taken are the optimizer's, as the Lightning callback takes them: those that
    require a gradient and have one as the block starts (an optimizer leaves a parameter without
    one as it is: its ratio 0 would read as "does not learn") and that ``optimizer`` holds (any of
    its ``param_groups``), whose ``update_ratio/<param>`` a due collection takes. Without
    ``optimizer``, those of the ``torch.optim.Optimizer`` objects whose ``step()`` ran in the block
    (seen by a step pre-hook that exists while the block runs); where none ran in it (an update
    written by hand, ``p -= lr * p.grad``; a step fp16's ``GradScaler`` skipped), every such
    parameter of ``model``. Trial 30g F3: a parameter with a gradient that no optimizer holds (the
    backbone left out of a fine-tuning optimizer, its ``requires_grad`` still True) got a ratio of
    0 at every save step, "does not learn", where the Lightning callback records none.

    Only where ``plan`` wants the ``optimizer`` kind (a save step of that collection) and the
    session reads update ratios at all (its config names the ``optimizer`` collection, or one of
    that kind, or a rule needs it: ``weight_update_ratio``; ``loss_scale_collapse`` of the
    ``default`` set reads the loss scale alone) are the parameters copied, on their device, as the
    block starts; anywhere else (``plan`` falsy or None) the block costs nothing. As the block ends
    without an exception the ratios are offered (an exception offers nothing). Under fp16 mixed
    precision a step the ``GradScaler`` skips moves nothing: pass ``None`` for it, as the Lightning
    callback records no ratio there (their 0 would read as "does not learn")::

        scaler.unscale_(optimizer)
        skipped = tripwire.integrations.scaler_skips(scaler, optimizer)
        with capture_update_ratios(model, None if skipped else plan, optimizer):
            scaler.step(optimizer)
        scaler.update()

    A ``ConfigError`` for a ``model`` that is no ``torch.nn.Module``, a ``plan`` that is no
    StepPlan (or None) or an ``optimizer`` that is no ``torch.optim.Optimizer`` (or None); a block
    entered twice at one step offers other values under the same names, a ``ConfigError`` too (one
    optimizer step per train step). A block given the plan of a step that has ended
    (``session.end_step()`` ran before it: the order of the README's loop, which ends the step
    before ``optimizer.step()``) is a :class:`tripwire.StepEndedError` as it starts, before the
    optimizer step in it runs, at any step (one that saves nothing too: the loop fails at its first
    step, not at a later save step; trial 31h F6), saying to put the block around
    ``optimizer.step()`` before ``end_step()``."""
    model = checked_model_and_plan("capture_update_ratios", model, plan,
                                   "the model whose parameters the optimizer step updates")
    if plan is not None and plan._ended:  # (at any step, before the optimizer step: trial 31h F6)
        raise StepEndedError(
            f"capture_update_ratios: the {plan.mode} step {plan.step} of this plan has ended (session.end_step() ran, "
            f"or the next begin_step) before the block began, so the update ratios of the optimizer step in it would "
            f"never be saved; accepted: the block around optimizer.step() before session.end_step() (plan = "
            f"session.begin_step(...); ...; with capture_update_ratios(model, plan, optimizer): optimizer.step(); "
            f"then session.end_step()), or plan=None to take none at this step")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(f"capture_update_ratios: optimizer={optimizer!r:.80} ({type(optimizer).__name__}); "
                          f"accepted: the torch.optim.Optimizer whose step the block runs, or None (the optimizers "
                          f"stepped in the block)")
    chosen = _chosen(model, plan) if plan and plan.wants("optimizer") else []
    if chosen and optimizer is not None:
        chosen = _held_by(chosen, [optimizer])
    if not chosen:
        yield
        return
    before = snapshot([p for _, p in chosen])
    stepped: list[torch.optim.Optimizer] = []
    handle = None if optimizer is not None else register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: stepped.append(opt))
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()
    if stepped:  # (only the parameters of the optimizers that stepped: trial 30g F3)
        held = {id(p) for _, p in _held_by(chosen, stepped)}
        before = [b for b, (_, p) in zip(before, chosen) if id(p) in held]
        chosen = [(k, p) for k, p in chosen if id(p) in held]
        if not chosen:
            return
    ratios = update_ratios(before, [p for _, p in chosen], inplace=True)
    for i, (key, _) in enumerate(chosen):
        plan.add(key, ratios[i], "optimizer")  # type: ignore[union-attr]


def offer_gradients(model: nn.Module, plan: StepPlan | None) -> int:
    """Offer the gradient of each parameter of ``model`` to ``plan`` (a :class:`tripwire.StepPlan` from
    ``session.begin_step``) as ``gradients/<param>`` (kind ``gradients``), where ``plan`` wants
    gradients (a save step of that collection); returns how many the step will save. The loop of
    the README and docs/architecture.md, with the names the other helpers and the Lightning callback
    give::

        plan = session.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        offer_gradients(model, plan)            # at save steps: gradients/fc1.weight, ...
        decision = session.end_step()           # the gradients are read here: before optimizer.step()
        optimizer.step()

    ``<param>`` is the parameter's name in ``model.named_parameters()`` with ``torch.compile``'s
    ``_orig_mod.`` dropped, and of a ``DistributedDataParallel`` or ``DataParallel`` wrapper the
    name in the module it wraps (no ``module.``): the names of ``update_ratio/<param>``
    (:func:`capture_update_ratios`) and of ``<layer>/output`` (``capture_activations``). Trial 31h
    F3: ``plan.add(f"gradients/{name}", ...)`` over a compiled model's ``named_parameters()`` stored
    ``gradients/_orig_mod.fc1.weight`` beside ``update_ratio/fc1.weight`` and ``fc1/output``.

    Each gradient is offered with ``plan.add`` (read when the step ends, so offer them before you
    clip in place, or end the step first), frozen and unused parameters (``.grad`` None) skipped, a
    parameter shared by two modules once. Where ``plan`` is falsy or None, or wants no gradients, no
    parameter is looked at and 0 is returned. Under fp16 mixed precision offer them after
    ``scaler.unscale_(optimizer)``, and not at a step the scaler skips::

        if plan.wants("gradients") and not tripwire.integrations.scaler_skips(scaler, optimizer):
            offer_gradients(model, plan)

    A ``ConfigError`` for a ``model`` that is no ``torch.nn.Module`` or a ``plan`` that is no
    StepPlan (or None); the errors of ``plan.add`` (a step that has ended: ``StepEndedError``)."""
    model = checked_model_and_plan("offer_gradients", model, plan, "the model whose parameters' gradients are offered")
    if not plan or not plan.wants("gradients"):
        return 0
    # only the names a due collection takes (trial 41i: a custom collection of any kind, include ['^fc1\.weight$'],
    # made the plan want gradients, and each gradient offered was "not captured" in a WARNING nobody asked for)
    named = ((f"gradients/{clean_name(name)}", p.grad) for name, p in model.named_parameters() if p.grad is not None)
    return sum(plan.add(name, grad, "gradients") for name, grad in named if plan.select(name, "gradients"))


def _held_by(chosen: list[tuple[str, torch.Tensor]],
             optimizers: list[torch.optim.Optimizer]) -> list[tuple[str, torch.Tensor]]:
    """The entries of ``chosen`` whose parameter one of ``optimizers`` holds (any param group)."""
    held = {id(p) for opt in optimizers for group in opt.param_groups for p in group["params"]}
    return [(k, p) for k, p in chosen if id(p) in held]


def _chosen(model: nn.Module, plan: StepPlan) -> list[tuple[str, torch.Tensor]]:
    """``(update_ratio/<param>, parameter)`` of the parameters whose ratio ``plan`` takes (see
    :func:`capture_update_ratios`); empty where the session reads no update ratio."""
    session: Any = plan.session
    if not session.optimizer_in_full:
        if not getattr(session, "_said_no_ratios", False):  # (trial 40e F3: nothing taken, and nothing said)
            session._said_no_ratios = True
            logger.info(
                "tripwire: capture_update_ratios takes nothing: this session reads no update ratio (its config "
                "captures no 'optimizer' collection of them, and no rule needs one); add include_collections="
                "['optimizer'] or the weight_update_ratio rule to record them")
        return []
    chosen = []
    for name, p in model.named_parameters():
        if not p.requires_grad or p.grad is None:
            continue
        key = f"update_ratio/{clean_name(name)}"
        if plan.select(key, "optimizer"):
            chosen.append((key, p))
    return chosen
