"""Trial 42d F1: a hand loop that raised inside a save step of large CPU tensors, with no
``close()``, lost that step and every loss kept since the last save: the session, closed at exit,
ended its open step through the background reduction, whose executor the interpreter had shut down
already ("closing ... at exit failed: RuntimeError: cannot schedule new futures after shutdown");
the run held step 0 only. The step is now reduced on the exiting thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

import tripwire  # noqa: E402

SCRIPT = textwrap.dedent("""\
    import torch
    torch.set_num_threads(1)
    import tripwire
    s = tripwire.Session(out_dir={out!r}, save_interval=5, include_collections=["activations"])
    for step in range(9):
        plan = s.begin_step("train", step)
        plan.add("loss", torch.tensor(1.0 / (step + 1)), "losses")
        if plan.wants("activations"):
            plan.add("fc1/output", torch.randn({n}), "activations")
        if step == 5:
            raise RuntimeError("boom in step 5")
        s.end_step()
    """)


@pytest.mark.parametrize("n", [1000, 131072])
def test_a_save_step_open_at_exit_is_written(tmp_path: Path, n: int) -> None:
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(out=str(out), n=n)], capture_output=True, text=True,
                          timeout=300)
    assert "boom in step 5" in done.stderr
    assert "at exit failed" not in done.stderr, done.stderr
    run = tripwire.open_run(out)
    assert run.status == "failed"
    assert run.steps("train") == [0, 1, 2, 3, 4, 5]
    assert run.tensor("fc1/output").steps("train") == [0, 5]
    steps, values = run.tensor("loss").series(mode="train")
    assert list(steps) == [0, 1, 2, 3, 4, 5] and list(values) == pytest.approx([1 / (s + 1) for s in range(6)])
