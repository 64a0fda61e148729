"""tripwire for hand-written PyTorch loops (a ``tripwire.Session``): ``capture_activations``,
``capture_update_ratios`` and ``offer_gradients``.

    from tripwire.integrations.torch import capture_activations, capture_update_ratios, offer_gradients

    plan = session.begin_step("train", step)
    with capture_activations(model, plan):   # forward hooks while the block runs, at save steps only
        out = model(x)
    loss = loss_fn(out, y)
    plan.add("loss", loss.detach(), "losses")
    optimizer.zero_grad()
    loss.backward()
    offer_gradients(model, plan)              # gradients/<param>, at save steps only
    with capture_update_ratios(model, plan):  # a copy of the parameters, at save steps only
        optimizer.step()
    decision = session.end_step()

The layer outputs go in as the Lightning callback's do: ``<layer>/output`` (``activations``),
``<layer>/input`` of ReLU/Tanh/Sigmoid layers (``activation_inputs``), ReLU outputs
(``relu_outputs``); the update ratios as ``update_ratio/<param>`` (``optimizer``), which
``weight_update_ratio`` reads; the gradients as ``gradients/<param>`` (``gradients``). The three
name alike: the model's ``named_modules()``/``named_parameters()`` names with ``torch.compile``'s
``_orig_mod.`` dropped, of a ``DistributedDataParallel`` the wrapped module's. Needs torch (the
``lightning`` extra brings it); torch is imported on first use of one of them. See
docs/architecture.md, "In a hand-written loop".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .._torch import capture_activations
    from ._updates import capture_update_ratios, offer_gradients

from tripwire._errors import require

require(("torch",), "lightning", " (or torch alone: pip install torch)")

__all__ = ["capture_activations", "capture_update_ratios", "offer_gradients"]


def __getattr__(name: str) -> Any:
    if name == "capture_activations":
        from .._torch import capture_activations

        globals()["capture_activations"] = capture_activations
        return capture_activations
    if name == "capture_update_ratios":
        from ._updates import capture_update_ratios

        globals()["capture_update_ratios"] = capture_update_ratios
        return capture_update_ratios
    if name == "offer_gradients":
        from ._updates import offer_gradients

        globals()["offer_gradients"] = offer_gradients
        return offer_gradients
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}; available: {', '.join(__all__)}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
