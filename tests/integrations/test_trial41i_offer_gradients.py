"""Trial 41i F6: with a custom collection of any kind (``include`` naming one gradient) the plan wants
gradients, and ``offer_gradients`` offered every one: each the collection's patterns left out was
"not captured" in a WARNING the user never asked for. Only the names a due collection takes are
offered now."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import tripwire  # noqa: E402
from tripwire.integrations.torch import offer_gradients  # noqa: E402


def test_offer_gradients_offers_what_a_collection_takes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    cfg = {"collections": {"losses": {}, "first_layer": {"include": [r"^gradients/0\.weight$"], "reductions": ["l2"]}},
           "rules": [], "save": {"interval": 1}}
    offered = []
    with caplog.at_level(logging.INFO, logger="tripwire"):
        with tripwire.Session(cfg, out_dir=tmp_path / "run") as s:
            for step in range(2):
                model.zero_grad()
                loss = model(torch.randn(5, 3)).pow(2).mean()
                loss.backward()
                plan = s.begin_step("train", step)
                plan.add("loss", loss.detach(), "losses")
                offered.append(offer_gradients(model, plan))
                s.end_step()
    assert offered == [1, 1]
    assert not [r for r in caplog.records if "is not captured" in r.getMessage()], caplog.text
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor_names() == ["gradients/0.weight", "loss"]
    assert run.series("gradients/0.weight", "l2")[0].tolist() == [0, 1]
