"""Trial 26k, finding 1: fp16 with ``torch.amp.GradScaler`` in a hand-written loop. A step the scaler
skips (its gradients overflowed at the loss scale: normal, at the initial scale above all) stopped a
healthy run at step 0 through ``exploding_tensor`` (critical) when the loop offered the gradients,
and nothing said how to tell such a step without torch internals. ``tripwire.integrations.scaler_skips``
tells it (after ``scaler.unscale_``; a host sync at the steps that save gradients only)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire import ConfigError, Session  # noqa: E402
from tripwire.integrations import scaler_skips  # noqa: E402


def _loop(out: Path, *, use_helper: bool, steps: int = 40) -> tuple[Session, list[bool], int | None]:
    """A healthy fp16 loop on the CPU whose first steps overflow at the initial scale (2**40)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 5))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    x, y = torch.randn(256, 20), torch.randint(0, 5, (256,))
    session = Session({"save": {"interval": 5}, "rules": ["default"], "actions": ["log", "stop_training"]},
                      out_dir=str(out))
    session.set_planned_steps(steps)
    skipped: list[bool] = []
    stopped = None
    for step in range(steps):
        xb, yb = x[step % 8 * 32:][:32], y[step % 8 * 32:][:32]
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(xb).float(), yb)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        plan = session.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        if plan.wants("gradients") and not (use_helper and scaler_skips(scaler, opt)):
            for name, p in model.named_parameters():
                plan.add(f"gradients/{name}", p.grad, "gradients")
        stop = session.end_step().stop
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        skipped.append(scaler.get_scale() < before)
        if stop:
            stopped = step
            break
    session.close()
    return session, skipped, stopped


def test_without_the_helper_a_skipped_step_stops_a_healthy_run(tmp_path: Path) -> None:
    session, skipped, stopped = _loop(tmp_path / "run", use_helper=False)
    assert skipped[0] and stopped == 0 and session.stopped_by is not None
    assert session.stopped_by.rule == "exploding_tensor"


def test_with_scaler_skips_the_loop_offers_no_gradients_of_a_skipped_step(tmp_path: Path) -> None:
    session, skipped, stopped = _loop(tmp_path / "run", use_helper=True)
    assert stopped is None and session.findings == [] and len(skipped) == 40
    assert skipped[0] and not all(skipped)  # (overflowed at first, then the scale came down)
    run = tripwire.open_run(tmp_path / "run")
    saved = run.tensor("gradients/0.weight").steps()
    assert saved and all(not skipped[s] for s in saved)  # gradients only of the steps the scaler applied
    assert [s for s in range(0, 40, 5) if not skipped[s]] == saved


def test_scaler_skips_answers_what_the_scaler_does(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4)
    loss = model(torch.randn(3, 4)).sum()
    scaler.scale(loss).backward()
    with pytest.raises(ConfigError, match=r"scaler_skips: the scaler has not unscaled the gradients of this optimizer "
                                          r"\(SGD\) at this step, .*accepted: call scaler.unscale_\(optimizer\)"):
        scaler_skips(scaler, opt)
    scaler.unscale_(opt)
    assert scaler_skips(scaler, opt) is False
    opt.zero_grad()
    scaler2 = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)  # (the scaled gradients overflow float32)
    scaler2.scale(model(torch.randn(3, 4)).sum() * 1e30).backward()
    scaler2.unscale_(opt)
    assert scaler_skips(scaler2, opt) is True
    scale = scaler2.get_scale()
    scaler2.step(opt)
    scaler2.update()
    assert scaler2.get_scale() < scale  # (it skipped the step, as the helper said)
    with pytest.raises(ConfigError, match="has not unscaled"):  # (after update(): a new step)
        scaler_skips(scaler2, opt)
    assert scaler_skips(torch.amp.GradScaler("cpu", enabled=False), opt) is False  # bf16, fp32: no scaling
    assert scaler_skips(None, opt) is False
    with pytest.raises(ConfigError, match=r"scaler_skips: scaler='fp16' \(str\); accepted: a torch.amp.GradScaler"):
        scaler_skips("fp16", opt)
