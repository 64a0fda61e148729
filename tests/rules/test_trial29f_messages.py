"""Trial 29f (and 29a F4): the loss rules' messages name the causes a fresh user's runs had.

- F3: label-sorted data fed with ``shuffle=False`` was stopped by ``loss_not_decreasing``'s "fell at
  first and then rose" branch, whose causes never mentioned the data's order.
- F4: a cross-entropy summed over batches of 512 (PyTorch ``reduction="sum"``, a first loss of
  about 512 x ln 10 = 1179) was stopped by ``oscillating_loss``, whose message named MXNet's summed
  loss only, and "a batch size too small" as one of the usual causes.
- 29a F4: a loss moving 2.310-2.359 at every step (lr=0) read "has not changed in 59 steps (it holds
  2.326)": what has not changed is its level, a median.
"""

from __future__ import annotations

import numpy as np
import pytest

import tripwire

torch = pytest.importorskip("torch")
datasets = pytest.importorskip("sklearn.datasets")


def _fit(rule: object, planned: int, *, sort: bool, batch: int, lr: float, reduction: str = "mean",
         steps: int | None = None) -> list[tripwire.Finding]:
    """A digits MLP (64-64-64-10) fed to a Session holding ``rule`` (the Lightning
    callback's save interval 10, the loss kept at every step); SGD with momentum 0.9 as in the trial; the
    batches in order, not shuffled."""
    digits = datasets.load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(x))[:1400]
    x, y = x[order], y[order]
    if sort:
        by_label = np.argsort(y, kind="stable")
        x, y = x[by_label], y[by_label]
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    session = tripwire.Session(write=False, rules=[rule], actions=[])
    session.set_planned_steps(planned)
    starts = list(range(0, len(x) - batch + 1, batch))
    for step in range(steps or planned):
        a = starts[step % len(starts)]
        loss = torch.nn.functional.cross_entropy(net(xt[a:a + batch]), yt[a:a + batch], reduction=reduction)
        opt.zero_grad()
        loss.backward()
        opt.step()
        session.step("train", step, {"loss": (loss.item(), "losses")})
        if session.findings:
            break
    session.close()
    return session.findings


def test_label_sorted_data_names_the_data_order() -> None:
    found = _fit("loss_not_decreasing", 440, sort=True, batch=32, lr=0.05, steps=120)
    assert [f.step for f in found] == [50], [(f.step, f.message) for f in found]
    message = found[0].message
    assert "and then rose again" in message, message
    assert "data sorted by label with shuffle=False: pass shuffle=True" in message, message
    # (in the branch's own causes, before the generic list)
    assert message.index("shuffle=True") < message.index("Usual causes"), message


def test_the_shuffled_twin_is_not_stopped() -> None:
    # the same data shuffled once (a fixed order with every class in each batch): it learns
    assert _fit("loss_not_decreasing", 440, sort=False, batch=32, lr=0.05, steps=200) == []


def test_a_summed_cross_entropy_names_reduction_sum_first() -> None:
    found = _fit("oscillating_loss", 180, sort=False, batch=512, lr=0.1, reduction="sum", steps=60)
    assert found and found[0].rule == "oscillating_loss", found
    message = found[0].message
    first = message[message.index("loss started at "):]
    assert float(first.split()[3].rstrip(",")) == pytest.approx(512 * np.log(10), rel=0.05), message
    assert "far from unit scale: most likely a loss summed over the batch (PyTorch: reduction='sum'" in message
    # the PyTorch form among the usual causes too, and a small batch only after it, not as certain
    assert "PyTorch: reduction='sum', a cross-entropy's first value then about the batch size x ln(classes)" in message
    assert "or a batch size too small" not in message, message
    assert message.index("reduction='sum', a cross") < message.index("less often a batch so small"), message


def test_a_loss_at_unit_scale_gets_no_summed_loss_lead(feed, loss_records) -> None:
    # an oscillation of a loss that started near ln 10: the usual causes, without the scale sentence
    values = [2.3] * 20 + [2.3 + 3.0 * (i % 2) for i in range(20)]
    found = feed("oscillating_loss", loss_records(values))
    assert found, "expected an oscillation"
    assert "far from unit scale" not in found[0].message and "reduction='sum'" in found[0].message, found[0].message


def test_a_loss_whose_level_holds_says_its_level_has_not_changed() -> None:
    # lr=0 (trial 29a): the batches' losses differ, their medians do not
    values = np.tile([2.31, 2.359, 2.326], 40)
    session = tripwire.Session(write=False, rules=["loss_not_decreasing"], actions=[])
    session.set_planned_steps(500)
    for step, value in enumerate(values):
        session.step("train", step, {"loss": (float(value), "losses")})
    session.close()
    assert [f.step for f in session.findings] == [50]
    message = session.findings[0].message
    assert message.startswith("loss's level has not changed in 50 steps (its start level and its lowest level "
                              "since, each a median of its values, are both 2.326)"), message
    assert "it holds" not in message, message


def test_exploding_gradient_names_pytorchs_summed_loss_as_oscillating_loss_does(feed) -> None:
    # (the two rules' wording of a summed loss agree: PyTorch's reduction='sum', B x ln(classes))
    grad = np.full((4, 4), 500.0)  # (l2 norm 2000, beyond max_norm 1000)
    records = [("train", s, {"gradients/layers.0.weight": (grad, "gradients"), "gradients/layers.1.weight": (grad, "gradients"),
                             "loss": (np.float64(1179.0), "losses")}) for s in range(3)]
    found = feed("exploding_gradient", records)
    assert found and found[0].rule == "exploding_gradient", found
    message = found[0].message
    assert ("a loss summed over the batch or the pixels instead of averaged: PyTorch's reduction='sum', a "
            "cross-entropy summed over a batch of B starting near B x ln(classes)") in message, message
