"""The README's usage examples, run as a new user would write them (tiny data)."""

from __future__ import annotations

import numpy as np
import pytest

import tripwire


@pytest.mark.slow
def test_readme_lightning_example(tmp_path) -> None:
    import lightning as L
    import torch
    from torch import nn

    from tripwire.integrations.lightning import TripwireCallback

    torch.manual_seed(0)

    class Model(L.LightningModule):
        def __init__(self, lr: float) -> None:
            super().__init__()
            self.lr = lr
            self.layer = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

        def training_step(self, batch, _):
            x, y = batch
            loss = nn.functional.mse_loss(self.layer(x), y)
            self.log("loss", loss)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", nn.functional.mse_loss(self.layer(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.lr)

    x = torch.randn(256, 8)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True) * 100)
    train_loader = torch.utils.data.DataLoader(data, batch_size=32)
    val_loader = torch.utils.data.DataLoader(data, batch_size=64)

    # the README's example, with a learning rate that makes training diverge
    cb = TripwireCallback(rules=["default"], actions=["log", "stop_training"], out_dir=str(tmp_path / "exp1"))
    trainer = L.Trainer(max_epochs=10, callbacks=[cb], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Model(lr=0.5), train_loader, val_loader)
    assert cb.stopped_by is not None and cb.stopped_by.rule in ("exploding_tensor", "exploding_gradient", "oscillating_loss")
    assert trainer.global_step < 10 * 8

    run = tripwire.open_run(tmp_path / "exp1")
    assert run.steps(mode="train")
    grads = run.tensor_names(collection="gradients")
    steps, values = run.tensor(grads[0]).series("l2")
    assert len(steps) == len(values) > 0
    assert run.tensor(grads[0]).value("l2", int(steps[0])) == values[0]  # the README's one-step read
    assert run.findings and {"step", "mode", "worker", "tensor", "reduction", "value"} <= set(run.dataframe().columns)


@pytest.mark.slow
def test_readme_xgboost_example(tmp_path) -> None:
    import xgboost as xgb
    from sklearn.datasets import make_classification

    from tripwire.integrations.xgboost import TripwireCallback

    X, y = make_classification(n_samples=600, n_features=10, random_state=0)
    dtrain = xgb.DMatrix(X[:400], label=y[:400])
    dvalid = xgb.DMatrix(X[400:], label=y[400:])
    params = {"objective": "binary:logistic", "max_depth": 12, "eval_metric": "logloss", "min_child_weight": 0}

    cb = TripwireCallback(rules=[{"name": "tree_depth", "max_depth": 6, "actions": ["stop_training"]}], out_dir=str(tmp_path))
    booster = xgb.train(params, dtrain, 200, evals=[(dtrain, "train"), (dvalid, "validation")], callbacks=[cb], verbose_eval=False)
    assert cb.stopped_by is not None and cb.stopped_by.rule == "tree_depth"
    assert booster.num_boosted_rounds() < 200
    assert np.isfinite(tripwire.open_run(tmp_path).series("validation-logloss", "raw", "eval")[1]).all()


@pytest.mark.slow
@pytest.mark.parametrize("lr, stops", [(3.0, True), (0.05, False)])
def test_readme_own_pytorch_loop_example(tmp_path, lr: float, stops: bool) -> None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    x = torch.randn(512, 8)
    y = (x[:, 0] + x[:, 1] > 0).long()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    epochs = 15

    def validate(model: nn.Module) -> float:
        with torch.no_grad():
            return float(loss_fn(model(x[:128]), y[:128]))

    # the README's loop, as written there
    session = tripwire.Session(rules=["default"], actions=["log", "stop_training"], out_dir=str(tmp_path / "loop1"))
    session.set_planned_steps(len(loader) * epochs)
    step, stop = 0, False
    for epoch in range(epochs):
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            plan = session.begin_step("train", step)
            plan.add("loss", loss.detach(), "losses")
            if plan.wants("gradients"):
                for name, p in model.named_parameters():
                    plan.add(f"gradients/{name}", p.grad, "gradients")
            stop = session.end_step().stop
            optimizer.step()
            step += 1
            if stop:
                break
        if stop:
            break
        session.step("eval", epoch, {"val_loss": (validate(model), "losses")}, summary=True)
    session.close()

    run = tripwire.open_run(tmp_path / "loop1")
    assert (session.stopped_by is not None) is stops, session.findings
    assert run.status == ("stopped" if stops else "complete")
    assert run.steps("train") and run.tensor_names(collection="gradients")
    assert len(run.series("loss")[0]) == step  # every step's loss
    if not stops:
        assert run.series("val_loss")[0].tolist() == list(range(epochs))


def test_every_config_yaml_block_of_the_docs_loads(tmp_path, monkeypatch) -> None:
    # trial 19a: docs/rules.md's XGBoost config listed `overfit` twice, which the config refuses
    import re
    from pathlib import Path

    import yaml

    from tripwire._session import check_config  # (what `tripwire validate` runs)

    # config.md's example names a custom rule of the user's own package
    (tmp_path / "mypackage").mkdir()
    (tmp_path / "mypackage" / "__init__.py").write_text("")
    (tmp_path / "mypackage" / "rules.py").write_text(
        "from tripwire.rules import Rule\n\n"
        "class MyRule(Rule):\n"
        "    name = 'my_rule'\n\n"
        "    def __init__(self, threshold=1, **common):\n"
        "        super().__init__(**common)\n"
        "        self.threshold = threshold\n\n"
        "    def check(self, history, step, mode):\n"
        "        return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    root = Path(__file__).resolve().parents[1]
    config_keys = {"out_dir", "name", "save", "collections", "rules", "actions", "strict", "writer"}
    checked = []
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S)):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and set(data) <= config_keys:  # (not tune.md's job files)
                check_config(tripwire.load_config(data))
                checked.append(f"{doc.name}#{i}")
    assert len(checked) >= 5 and any(c.startswith("rules.md") for c in checked)


def test_readme_own_rule_example(tmp_path, monkeypatch) -> None:
    from tripwire.rules import RuleContractError, check_rule

    monkeypatch.chdir(tmp_path)

    def grad_too_small(history, step, mode):
        got = history.latest("gradients/fc.weight", "l2", mode)
        return f"fc.weight's gradient l2 is {got[1]:.2g}" if got and got[1] < 1e-8 else None

    rule = tripwire.FunctionRule(grad_too_small, requirements=[tripwire.Requirement("gradients", ("l2",))],
                                 actions=["log", "stop_training"])
    check_rule(rule)
    session = tripwire.Session(rules=["default", rule], out_dir="runs/loop2", save_interval=1)
    decision = session.step("train", 0, {"loss": (1.0, "losses"), "gradients/fc.weight": (np.zeros((2, 2)), "gradients")})
    assert decision.stop and session.stopped_by.rule == "grad_too_small"
    session.close()

    def broken(history, step, mode):
        return 1 / 0

    with pytest.raises(RuleContractError, match="ZeroDivisionError"):
        check_rule(broken)
