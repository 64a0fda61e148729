"""A hand-written loop's complex layer output is captured as its magnitude (capture_activations, as the
Lightning callback does), and a complex parameter beside half-precision ones keeps its imaginary part in
update ratios (session 30, after trial 30a F1)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tripwire
from tripwire.integrations._torch import update_ratios
from tripwire.integrations.torch import capture_activations


class Spectral(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.rfft(x)


def test_a_complex_layer_output_is_captured_as_its_magnitude(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(8, 8), Spectral())
    x = torch.randn(4, 8)
    with tripwire.Session(out_dir=str(tmp_path / "run"), rules=[], save_interval=1,
                          collections={"activations": {"reductions": ["l2", "max"]}}) as session:
        plan = session.begin_step("train", 0)
        with capture_activations(model, plan):
            out = model(x)
        session.end_step()
    run = tripwire.open_run(tmp_path / "run")
    assert run.tensor("1/output").value("l2", 0, mode="train") == pytest.approx(
        float(torch.linalg.vector_norm(out.detach()).item()), rel=1e-5)
    assert run.tensor("1/output").value("max", 0, mode="train") == pytest.approx(
        float(out.detach().abs().max()), rel=1e-6)


def test_update_ratios_keep_a_complex_parameter_beside_half_ones() -> None:
    half = torch.ones(4, dtype=torch.bfloat16)
    spec = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex64)
    half_after, spec_after = half + 0.5, spec + 1j
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (casting a complex tensor to float32 warns: the imaginary part is lost)
        got = update_ratios([half, spec], [half_after, spec_after]).numpy()
    want_spec = float(torch.linalg.vector_norm(spec_after - spec) / torch.linalg.vector_norm(spec))
    np.testing.assert_allclose(got, [0.5, want_spec], rtol=1e-6)


def test_a_data_parallel_models_layers_are_named_as_the_wrapped_modules(tmp_path: Path) -> None:
    """capture_activations names a DataParallel/DDP model's layers as the module it wraps (``0/output``,
    not ``module.0/output``), as capture_update_ratios and the DDP recipe's gradients name them (30g)."""
    model = nn.DataParallel(nn.Sequential(nn.Linear(8, 4), nn.ReLU()))
    with tripwire.Session(out_dir=str(tmp_path / "run"), rules=[], save_interval=1,
                          collections={"activations": {"reductions": ["l2"]}}) as session:
        plan = session.begin_step("train", 0)
        with capture_activations(model, plan):
            model(torch.randn(2, 8))
        session.end_step()
    names = set(tripwire.open_run(tmp_path / "run").tensor_names())
    assert {"0/output", "1/output"} <= names and not any(n.startswith("module.") for n in names), names
