"""Trial 30a F5: in a hand-written loop ``weight_update_ratio`` read nothing and said nothing (a Session
derives no update ratio from the weights offered, and no doc said a loop must offer them).
``tripwire.integrations.torch.capture_update_ratios(model, plan)`` offers them around the optimizer
step, as the Lightning callback takes them, and the rule names a run that holds none at its end."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import tripwire  # noqa: E402
from tripwire.integrations.torch import capture_update_ratios  # noqa: E402

torch.set_num_threads(1)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _loop(session: tripwire.Session, model: nn.Module, steps: int, lr: float = 0.1, wrap: bool = True,
          frozen: str | None = None) -> dict[int, dict[str, float]]:
    """A hand-written loop; returns each step's own update ratios, computed here in float64."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4, generator=g)
    y = (x[:, 0] > 0).long()
    if frozen is not None:
        dict(model.named_parameters())[frozen].requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    mine: dict[int, dict[str, float]] = {}
    for step in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        plan = session.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        if plan.wants("optimizer"):
            plan.add("lr/0", lr, "optimizer")
        before = {n: p.detach().double().clone() for n, p in model.named_parameters()}
        if wrap:
            with capture_update_ratios(model, plan):
                opt.step()
        else:
            opt.step()
        mine[step] = {n: float(torch.linalg.vector_norm(p.detach().double() - before[n])
                               / torch.linalg.vector_norm(before[n])) for n, p in model.named_parameters()}
        session.end_step()
    return mine


def test_the_update_ratios_are_the_lightning_callbacks(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["weight_update_ratio"], save_interval=2)
    mine = _loop(session, _model(), 6, frozen="2.bias")
    session.close()
    run = tripwire.open_run(tmp_path / "run")
    names = sorted(n for n in run.tensor_names() if n.startswith("update_ratio/"))
    # (a parameter that needs no gradient is left out: its ratio 0 would read as "does not learn")
    assert names == ["update_ratio/0.bias", "update_ratio/0.weight", "update_ratio/2.weight"], names
    for name in names:
        steps, values = run.series(name)
        assert steps.tolist() == [0, 2, 4]
        assert np.allclose(values, [mine[s][name.removeprefix("update_ratio/")] for s in steps.tolist()], rtol=1e-5)


def test_the_rule_judges_a_loop_that_offers_them(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["weight_update_ratio"], save_interval=1)
    _loop(session, _model(), 8, lr=0.0)  # (nothing moves)
    session.close()
    [found] = session.findings
    assert found.rule == "weight_update_ratio" and found.step == 4 and "the parameters do not move" in found.message


def test_a_loop_that_offers_no_update_ratio_is_named_at_its_end(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                                ) -> None:
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["weight_update_ratio"], save_interval=1)
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _loop(session, _model(), 8, lr=0.0, wrap=False)
        session.close()
    assert session.findings == []
    [said] = [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]
    assert ("rule 'weight_update_ratio' had nothing to read: no update ratio (update_ratio/<param>, of the optimizer "
            "collection) was captured (it holds: lr/0)") in said, said
    assert "tripwire.integrations.torch.capture_update_ratios(model, plan) around optimizer.step()" in said, said
    # tripwire watch says the same of the stored run, and counts the rule unjudged (exit 3)
    watcher = tripwire.Watcher(str(tmp_path / "run"), {"rules": ["weight_update_ratio"]}, record=False,
                               echo=lambda f: None)
    watcher.watch(once=True)
    assert watcher.unjudged() == ["weight_update_ratio"]
    assert [f"tripwire: {m}" for m in watcher.unmatched() if "had nothing to read" in m] == [said]


def test_include_and_exclude_that_leave_every_ratio_out_are_named(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    session = tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1,
                               rules=[{"name": "weight_update_ratio", "include": "^nothing$"}])
    with caplog.at_level(logging.WARNING, logger="tripwire"):
        _loop(session, _model(), 3)
        session.close()
    [said] = [r.getMessage() for r in caplog.records if "had nothing to read" in r.getMessage()]
    assert "include='^nothing$' and exclude=" in said and "leave out every update ratio captured" in said, said


def test_nothing_is_copied_where_no_update_ratio_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tripwire.integrations.torch import _updates

    copied: list[Any] = []
    real = _updates.snapshot
    monkeypatch.setattr(_updates, "snapshot", lambda params, **kw: copied.append(len(params)) or real(params, **kw))
    # the default set reads the optimizer kind for the loss scale alone; a step that saves nothing
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["default"], save_interval=4)
    _loop(session, _model(), 3)
    session.close()
    assert copied == []
    assert not [n for n in tripwire.open_run(tmp_path / "run").tensor_names() if n.startswith("update_ratio/")]
    # with the optimizer collection: at its save steps only (0 and 4 of 6)
    session = tripwire.Session(out_dir=str(tmp_path / "run2"), rules=[], include_collections=["optimizer"],
                               save_interval=4)
    _loop(session, _model(), 6)
    session.close()
    assert copied == [4, 4]


def test_none_or_an_exception_offers_nothing(tmp_path: Path) -> None:
    session = tripwire.Session(out_dir=str(tmp_path / "run"), rules=["weight_update_ratio"], save_interval=1)
    model = _model()
    plan = session.begin_step("train", 0)
    with capture_update_ratios(model, None):  # (a step the GradScaler skips)
        pass
    with pytest.raises(RuntimeError, match="boom"), capture_update_ratios(model, plan):
        raise RuntimeError("boom")
    session.end_step()
    session.close()
    assert not [n for n in tripwire.open_run(tmp_path / "run").tensor_names() if n.startswith("update_ratio/")]


def test_bad_arguments_are_refused() -> None:
    session = tripwire.Session(write=False, rules=["weight_update_ratio"])
    plan = session.begin_step("train", 0)
    with pytest.raises(tripwire.ConfigError, match=r"capture_update_ratios: model=.*accepted: a torch.nn.Module"):
        with capture_update_ratios("model", plan):  # type: ignore[arg-type]
            pass
    with pytest.raises(tripwire.ConfigError, match=r"capture_update_ratios: plan=.*accepted: the StepPlan of this step"):
        with capture_update_ratios(_model(), {"plan": 1}):  # type: ignore[arg-type]
            pass
    session.end_step()
    session.close()
