"""Findings (what a rule saw) and decisions (what the session tells the adapter to do)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SEVERITIES: tuple[str, ...] = ("info", "warning", "error", "critical")
KINDS: tuple[str, ...] = ("finding", "error")


@dataclass(frozen=True)
class Finding:
    """One result of a rule.

    ``rule``: the rule's YAML name; ``step``/``mode``: where it was seen; ``tensors``: the tensors
    involved; ``message``: what was seen, with the numbers, and what usually fixes it; ``severity``:
    one of :data:`SEVERITIES`; ``kind``: ``"finding"``, or ``"error"`` when the rule itself raised
    (``details["traceback"]`` then holds the traceback); ``source``: who made it: ``"in-process"``
    (the training's rules), ``"check"`` (no rule: a check recorded with ``Session.record_finding``,
    an integration's own such as Keras's ``loss_output_mismatch``; trial 27c2), ``"watch"``
    (``tripwire watch``), ``"request_stop"`` (the training, stopping for a ``tripwire.request_stop``).
    """

    rule: str
    step: int
    mode: str
    message: str
    tensors: tuple[str, ...] = ()
    severity: str = "warning"
    kind: str = "finding"
    worker: int = 0
    wall_time: float = field(default_factory=time.time)
    details: Mapping[str, Any] = field(default_factory=dict)
    source: str = "in-process"

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity: got {self.severity!r}; accepted: {', '.join(SEVERITIES)}")
        if self.kind not in KINDS:
            raise ValueError(f"kind: got {self.kind!r}; accepted: {', '.join(KINDS)}")
        object.__setattr__(self, "tensors", tuple(self.tensors))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "step": int(self.step),
            "mode": self.mode,
            "message": self.message,
            "tensors": list(self.tensors),
            "severity": self.severity,
            "kind": self.kind,
            "worker": int(self.worker),
            "wall_time": float(self.wall_time),
            "details": _plain(self.details),
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            rule=str(data["rule"]),
            step=int(data["step"]),
            mode=str(data["mode"]),
            message=str(data["message"]),
            tensors=tuple(data.get("tensors", ())),
            severity=str(data.get("severity", "warning")),
            kind=str(data.get("kind", "finding")),
            worker=int(data.get("worker", 0)),
            wall_time=float(data.get("wall_time", 0.0)),
            details=dict(data.get("details", {})),
            source=str(data.get("source", "in-process")),
        )

    def __str__(self) -> str:
        train_step = self.details.get("train_step") if self.mode != "train" else None
        rank = f", rank {self.worker}" if self.worker else ""  # (a worker other than 0: a distributed job's rank)
        where = f"step {self.step} ({self.mode}{rank})" if train_step is None else \
            f"step {self.step} ({self.mode}, after train step {train_step}{rank})"
        return f"[{self.severity}] {self.rule} at {where}: {self.message}"


def _plain(value: Any) -> Any:
    """Make details JSON-safe (numpy scalars and arrays to Python)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


@dataclass(frozen=True)
class Decision:
    """What the session tells an adapter after a step: stop or not, and why."""

    stop: bool = False
    reason: str = ""
    findings: tuple[Finding, ...] = ()
    stopped_by: Finding | None = None

    def __bool__(self) -> bool:
        return self.stop


CONTINUE = Decision()
