"""Rules and an action of your own, on a hand-written training loop (numpy only: no framework).

    python examples/custom_rule.py            # about a second; the run goes to ./tripwire-runs/custom-rule-<date>-<time>

Needs: pip install -e "." (numpy only, a dependency of tripwire; any extra, as ".[lightning]", has it too)

1. ``loss_above``: a plain function ``fn(history, step, mode)`` wrapped as ``tripwire.FunctionRule``
   (a string it returns is the finding's message).
2. ``GradSpike``: a ``tripwire.Rule`` subclass, registered with ``@tripwire.register_rule`` so that a
   config names it ``grad_spike``. It reads gradients, which a session captures only for a rule whose
   ``requirements()`` asks for them, and keeps its state in ``state_dict()`` (a checkpoint resumes it).
3. ``page``: a custom action, a callable ``(finding)``, given per rule in the config.
4. ``tripwire.rules.check_rule`` checks both against the contract every built-in rule passes (a test
   of yours would call it).

The loop fits a linear regression by gradient descent; at step 40 its learning rate is raised
60-fold, the gradients' norm jumps and the loss climbs: ``grad_spike`` finds the jump and stops the
training (its action ``stop_training``), ``page`` is called with the finding.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import tripwire
from tripwire.rules import Finding, Requirement, Rule, check_float, check_rule, register_rule


# 1. a function rule: the training loss above a limit
def loss_above(history: Any, step: int, mode: str) -> str | None:
    """The training loss at this step is above 100."""
    value = history.value("loss", "raw", step, mode)
    return f"the loss is {value:.4g}, above 100" if value is not None and value > 100 else None


loss_above_rule = tripwire.FunctionRule(loss_above, requirements=[Requirement("losses", ("raw",))], severity="error")


# 2. a rule class of your own, registered under its name
@register_rule
class GradSpike(Rule):
    """The gradients' norm jumps above ``factor`` times the lowest norm seen so far."""

    name = "grad_spike"

    def __init__(self, factor: float = 10.0, tensor: str = "gradients/w", **common: Any) -> None:
        super().__init__(**common)  # (start_step, patience, every, modes, severity, actions, repeat)
        self.factor = check_float(factor, "grad_spike.factor", minimum=1.0)
        self.tensor = tensor
        self.lowest: float | None = None

    def requirements(self) -> list[Requirement]:
        # without it, a session would not capture gradients, and the rule would never judge one
        return [Requirement("gradients", reductions=("l2",))]

    def check(self, history: Any, step: int, mode: str) -> Finding | None:
        norm = history.value(self.tensor, "l2", step, mode)
        if norm is None:  # (not saved at this step)
            return None
        found = None
        if self.lowest is not None and norm > self.factor * self.lowest:
            found = self.finding(step, mode, f"{self.tensor}'s norm {norm:.4g} is {norm / self.lowest:.0f}x its lowest "
                                 f"({self.lowest:.4g}); the learning rate may be too high", tensors=[self.tensor])
        self.lowest = norm if self.lowest is None else min(self.lowest, norm)
        return found

    def state_dict(self) -> dict[str, Any]:  # (what check() keeps: a resumed training continues it)
        return {**super().state_dict(), "lowest": self.lowest}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.lowest = state.get("lowest")


# 3. a custom action
PAGED: list[Finding] = []


def page(finding: Finding) -> None:
    """What a team's pager would get."""
    PAGED.append(finding)
    print(f"page: {finding.rule} at step {finding.step}: {finding.message}")


def main() -> None:
    # 4. the rules pass the contract the built-in rules pass
    check_rule(GradSpike, factor=10.0)
    check_rule(loss_above_rule)

    config = {
        "name": time.strftime("custom-rule-%Y%m%d-%H%M%S"),
        "save": {"interval": 5},
        "rules": [
            "default",
            {"name": "grad_spike", "factor": 10.0, "actions": ["log", page, "stop_training"]},  # by its registered name
            loss_above_rule,
        ],
    }
    session = tripwire.Session(config)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4))
    y = x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=256)
    w = np.zeros(4)
    stopped_at = None
    for step in range(100):
        lr = 0.05 if step < 40 else 3.0  # the fault: the learning rate raised 60-fold at step 40
        err = x @ w - y
        loss = float(np.mean(err ** 2))
        grad = 2 * x.T @ err / len(y)
        plan = session.begin_step("train", step)
        if plan.keeps("losses"):
            plan.add("loss", loss, "losses")
        if plan.wants("gradients"):  # (true at the save steps: grad_spike asked for gradients)
            plan.add("gradients/w", grad, "gradients")
        decision = session.end_step()
        if decision.stop:
            stopped_at = step
            break
        w -= lr * grad
    session.close()
    print(f"stopped at step {stopped_at}; stopped by: {session.stopped_by}")
    print(f"findings: {[(f.rule, f.step) for f in session.findings]}; paged: {[(f.rule, f.step) for f in PAGED]}")
    print(f"run: {session.out_dir}")


if __name__ == "__main__":
    main()
