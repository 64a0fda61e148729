"""Trial 40e F3: ``capture_update_ratios`` under a config that reads no update ratio (the default rules,
whose ``loss_scale_collapse`` wants the optimizer kind for the loss scale alone) took nothing and said
nothing. It says so once, at INFO, with what records them."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import tripwire

torch = pytest.importorskip("torch")
nn = torch.nn

from tripwire.integrations.torch import capture_update_ratios  # noqa: E402


def _loop(out: Path, **config: object) -> None:
    torch.manual_seed(0)
    m = nn.Linear(4, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with tripwire.Session(out_dir=str(out), save_interval=1, **config) as s:
        for step in range(3):
            plan = s.begin_step("train", step)
            loss = nn.functional.mse_loss(m(torch.randn(8, 4)), torch.randn(8, 2))
            plan.add("loss", loss.detach(), "losses")
            opt.zero_grad()
            loss.backward()
            with capture_update_ratios(m, plan, opt):
                opt.step()
            s.end_step()


SAID = ("tripwire: capture_update_ratios takes nothing: this session reads no update ratio (its config captures no "
        "'optimizer' collection of them, and no rule needs one); add include_collections=['optimizer'] or the "
        "weight_update_ratio rule to record them")


def test_a_session_that_reads_no_update_ratio_says_so_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _loop(tmp_path / "a", rules=["default"])
    assert [r.getMessage() for r in caplog.records].count(SAID) == 1
    assert tripwire.open_run(tmp_path / "a").tensor_names(regex="update_ratio") == []
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="tripwire"):
        _loop(tmp_path / "b", rules=["default"], include_collections=["optimizer"])
    assert SAID not in [r.getMessage() for r in caplog.records]
    assert tripwire.open_run(tmp_path / "b").tensor_names(regex="update_ratio") == ["update_ratio/bias",
                                                                                     "update_ratio/weight"]
