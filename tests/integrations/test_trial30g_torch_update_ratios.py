"""Trial 30g F3: ``capture_update_ratios`` stored a ratio of 0, at every save step, for a parameter
with a gradient that no optimizer holds (the Lightning callback stores none), and named the
parameters of a ``DistributedDataParallel`` model ``module.``-prefixed, unlike the gradients of the
DDP recipe. Only the optimizer's parameters get a ratio now, named as in the wrapped module."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import tripwire
from tripwire._errors import ConfigError

torch = pytest.importorskip("torch")
nn = torch.nn
from tripwire.integrations.torch import capture_update_ratios  # noqa: E402


def _fit(out: Path, model: "nn.Module", params: list, *, explicit: bool, wrap=None, by_hand: bool = False) -> list[str]:
    torch.manual_seed(0)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    s = tripwire.Session(out_dir=str(out), save_interval=1, collections=["losses", "optimizer"])
    x, y = torch.randn(32, 4), torch.randint(0, 2, (32,))
    net = wrap(model) if wrap is not None else model
    for step in range(2):
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        plan = s.begin_step("train", step)
        plan.add("loss", loss.detach(), "losses")
        with capture_update_ratios(net, plan, opt if explicit else None):
            if by_hand:
                with torch.no_grad():
                    for p in params:
                        p -= 0.1 * p.grad
            else:
                opt.step()
        s.end_step()
    s.close()
    return tripwire.open_run(out).tensor_names()


def _model() -> "nn.Module":
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


@pytest.mark.parametrize("explicit", [False, True])
def test_a_parameter_no_optimizer_holds_gets_no_ratio(tmp_path: Path, explicit: bool) -> None:
    model = _model()
    head = list(model[2].parameters())  # (the backbone, model[0], keeps requires_grad and gets gradients)
    names = _fit(tmp_path / "run", model, head, explicit=explicit)
    assert model[0].weight.grad is not None
    assert [n for n in names if n.startswith("update_ratio/")] == ["update_ratio/2.bias", "update_ratio/2.weight"]
    run = tripwire.open_run(tmp_path / "run")
    assert all(v > 0 for v in run.series("update_ratio/2.weight")[1])


def test_an_update_written_by_hand_still_gives_every_parameter_with_a_gradient(tmp_path: Path) -> None:
    model = _model()
    names = _fit(tmp_path / "run", model, list(model.parameters()), explicit=False, by_hand=True)
    assert [n for n in names if n.startswith("update_ratio/")] == [
        "update_ratio/0.bias", "update_ratio/0.weight", "update_ratio/2.bias", "update_ratio/2.weight"]


def test_a_ddp_model_is_named_as_the_module_it_wraps(tmp_path: Path) -> None:
    dist = torch.distributed
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        model = _model()
        names = _fit(tmp_path / "run", model, list(model.parameters()), explicit=False,
                     wrap=nn.parallel.DistributedDataParallel)
    finally:
        dist.destroy_process_group()
    assert [n for n in names if n.startswith("update_ratio/")] == [
        "update_ratio/0.bias", "update_ratio/0.weight", "update_ratio/2.bias", "update_ratio/2.weight"]


def test_an_optimizer_that_is_no_optimizer_is_refused_by_name(tmp_path: Path) -> None:
    s = tripwire.Session(out_dir=str(tmp_path / "run"), save_interval=1, collections=["losses", "optimizer"])
    plan = s.begin_step("train", 0)
    with pytest.raises(ConfigError, match=r"^capture_update_ratios: optimizer=\[1, 2\] \(list\); accepted: the "
                                          r"torch\.optim\.Optimizer whose step the block runs, or None"):
        with capture_update_ratios(_model(), plan, [1, 2]):  # type: ignore[arg-type]
            pass
    s.end_step()
    s.close()
