"""Trial 41d F2/F3: a SIGTERM under Lightning (its own handler stops the loop and raises its
``SIGTERMException``) ended the run ``failed`` with the reason
``lightning.pytorch.utilities.exceptions.SIGTERMException`` and ``callback.stop_reason`` None, where
the Keras callback and a hand loop say ``SIGTERM: the process was asked to terminate: ...``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("lightning")

import tripwire  # noqa: E402

SCRIPT = textwrap.dedent("""\
    import os, signal, sys
    sys.path.insert(0, {tests!r})
    import lightning as L, torch
    from tiny_lightning import TinyNet
    from tripwire.integrations.lightning import TripwireCallback

    class Killed(TinyNet):
        def training_step(self, batch, batch_idx):
            if self.global_step == 5:
                os.kill(os.getpid(), signal.SIGTERM)
            return super().training_step(batch, batch_idx)

    data = torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    cb = TripwireCallback(out_dir={out!r}, save_interval=1)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    try:
        trainer.fit(Killed(), torch.utils.data.DataLoader(data, batch_size=8))
    except BaseException as exc:
        print("raised", type(exc).__name__)
    print("stop_reason", cb.stop_reason)
    """)


def test_a_sigterm_under_lightning_names_the_signal(tmp_path: Path) -> None:
    out = tmp_path / "run"
    script = SCRIPT.format(tests=str(Path(__file__).parent), out=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert "raised SIGTERMException" in done.stdout, (done.stdout, done.stderr)
    reason = ("SIGTERM: the process was asked to terminate: a scheduler's preemption, docker stop, kill; Lightning "
              "stopped its loop (SIGTERMException), the callback wrote its records and ended the run failed")
    assert f"stop_reason {reason}" in done.stdout.splitlines()
    run = tripwire.open_run(out)
    assert run.status == "failed" and run.stop_reasons == {0: reason}
    assert run.steps("train")[:6] == [0, 1, 2, 3, 4, 5]
