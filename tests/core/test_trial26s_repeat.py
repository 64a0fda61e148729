"""Trial 26c: ``repeat: false`` (the default) means the rule fires once and is then not evaluated
again in that training; ``help(tripwire.Rule)`` said it only held back the actions of later
findings ("act on every finding, not only the first")."""

from __future__ import annotations

from pathlib import Path

import tripwire
from tripwire import FunctionRule, Session


def _spikes(out: Path, repeat: bool) -> tuple[list[int], list[int], Session]:
    """A loss of 10 at steps 5 and 20 (1 elsewhere) judged by a rule that fires above 5: the steps
    the rule was evaluated at, the steps of the run's findings, and the session."""
    calls: list[int] = []

    def big_loss(history, step, mode):
        calls.append(step)
        got = history.latest("loss", "raw", mode)
        return f"loss {got[1]:.3g} > 5" if got and got[1] > 5 else None

    rule = FunctionRule(big_loss, name="big_loss", actions=["record"], repeat=repeat)
    s = Session(rules=[rule], out_dir=str(out), save_interval=1)
    for step in range(30):
        s.step("train", step, {"loss": (10.0 if step in (5, 20) else 1.0, "losses")})
    s.close()
    return calls, [f.step for f in tripwire.open_run(out).findings], s


def test_a_rule_without_repeat_fires_once_and_is_not_evaluated_again(tmp_path: Path) -> None:
    calls, found, s = _spikes(tmp_path / "once", repeat=False)
    assert found == [5] and calls == list(range(6))  # the spike at 20 is not judged: no finding
    calls, found, _ = _spikes(tmp_path / "repeat", repeat=True)
    assert found == [5, 20] and calls == list(range(30))
    # a new training arms it again
    s.reopen()
    s.new_training(continued=False)
    s.step("train", 30, {"loss": (10.0, "losses")})
    s.close()
    assert [f.step for f in s.findings] == [5, 30]


def test_the_repeat_docstring_says_what_the_session_does() -> None:
    doc = tripwire.Rule.__doc__ or ""
    assert "act on every finding, not only the first" not in doc  # (the actions alone were said to be held back)
    said = " ".join(doc.split())
    assert "the rule fires once" in said and "not evaluated again in that training" in said, said
    assert "every finding is written and acted on" in said
