"""Findings (what a rule saw) and decisions (what the session tells the adapter to do)."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterable, Mapping
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
        """``[warning] exploding_gradient at step 10 (train): <message>``: the finding's line, as run
        readers, ``tripwire inspect`` (a stop reason) and ``tripwire watch`` print it; a worker other
        than 0 is named (``(train, rank 1)``). The ``log`` action's line is :func:`log_line`'s."""
        return self._line(rank_always=False)

    def _line(self, rank_always: bool) -> str:
        train_step = self.details.get("train_step") if self.mode != "train" else None
        # (a worker other than 0: a distributed job's rank; every rank where the caller knows the world size > 1)
        rank = f", rank {self.worker}" if self.worker or rank_always else ""
        where = f"step {self.step} ({self.mode}{rank})" if train_step is None else \
            f"step {self.step} ({self.mode}, after train step {train_step}{rank})"
        return f"[{self.severity}] {self.rule} at {where}: {self.message}"

    def __repr__(self) -> str:
        """``Finding(rule='exploding_gradient', step=10, mode='train', severity='warning', message='the
        gradient ... ...')``: where and what, the message cut to its first sentence or
        :data:`REPR_MESSAGE` characters (trial 30f F6: the whole advice and a raw ``wall_time`` made a
        563-character line, and a list of findings a wall of text); ``worker``, ``kind`` and ``source``
        where they are not the default's. The whole finding: ``str(finding)``, :meth:`to_dict`."""
        extra = "".join(f", {k}={v!r}" for k, v, default in (("worker", self.worker, 0), ("kind", self.kind, "finding"),
                                                              ("source", self.source, "in-process")) if v != default)
        return (f"Finding(rule={self.rule!r}, step={self.step!r}, mode={self.mode!r}, severity={self.severity!r}"
                f"{extra}, message={short_text(self.message, REPR_MESSAGE)!r})")

    def _repr_html_(self) -> str:
        """A small table for a notebook (Jupyter calls it to display a finding): rule, severity, where
        (step, mode, the train step an eval step came after, the worker), the tensors, when (UTC),
        who made it and the whole message; every value escaped."""
        train_step = self.details.get("train_step") if self.mode != "train" else None
        where = f"{self.mode} step {self.step}" + (f", after train step {train_step}" if train_step is not None else "")
        rows = [("rule", self.rule), ("severity", self.severity), ("where", where), ("worker", self.worker)]
        if self.tensors:
            rows.append(("tensors", ", ".join(self.tensors)))
        if self.wall_time:
            rows.append(("time", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.wall_time))))
        rows.append(("made by", self.source + (" (the rule raised)" if self.kind == "error" else "")))
        rows.append(("message", self.message))
        return html_table(rows, caption="tripwire finding")


#: The longest message :meth:`Finding.__repr__` shows whole (characters; a longer one is cut).
REPR_MESSAGE = 100


def short_text(text: str, most: int, *, sentence: str = "first") -> str:
    """``text`` on one line, cut where it is longer than ``most`` characters: after a whole sentence
    that fits (ending in ``.``, ``;``, ``?`` or ``!``, past a third of ``most``; ``sentence``: the
    ``"first"`` such one, or the ``"last"``), else after its last whole word that fits, and `` ...``
    added."""
    text = " ".join(str(text).split())
    if len(text) <= most:
        return text
    head = text[:most + 1]
    ends = [m.start() for m in re.finditer(r"[.;?!] ", head) if m.start() >= most // 3]
    if ends:
        end = ends[0] if sentence == "first" else ends[-1]
        return text[:end + 1].rstrip(";") + " ..."
    space = head.rfind(" ")
    return (text[:space] if space > 0 else text[:most]).rstrip(",;:(") + " ..."


def log_line(finding: Finding, world_size: int = 1) -> str:
    """The line the ``log`` action logs for ``finding`` on the ``tripwire`` logger:
    ``tripwire: [warning] exploding_gradient at step 10 (train): <message>``, ``str(finding)`` after
    the ``tripwire:`` of every line tripwire logs (trial 30f F8: under Python's default logging, a
    notebook cell full of a framework's output said nowhere where the line came from); with
    ``world_size`` > 1 every rank is named, rank 0 too (``(train, rank 0)``; trial 30b: rank 0's
    lines named no rank, rank 1's did)."""
    return f"tripwire: {finding._line(rank_always=world_size > 1)}"


def html_table(rows: Iterable[tuple[str, Any]], caption: str | None = None) -> str:
    """A small HTML table of ``(name, value)`` rows for a notebook's ``_repr_html_``: no style
    sheet, no script, every name and value escaped (``html.escape``); a value keeps its line
    breaks."""
    body = "".join(
        f"<tr><th style=\"text-align:left;vertical-align:top\">{html.escape(str(k))}</th>"
        f"<td style=\"text-align:left;white-space:pre-wrap\">{html.escape(str(v))}</td></tr>" for k, v in rows)
    head = f"<caption style=\"text-align:left\">{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{head}{body}</table>"


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
