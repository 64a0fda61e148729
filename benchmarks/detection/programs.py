"""The detection suite's programs: fault programs (one planted fault each, labelled with the rules
expected to fire) and healthy controls (labelled with none). See ../../docs/benchmarks.md.

Each program is ``fn(seed) -> Result``; frameworks: ``torch`` (a hand-written loop feeding a
Session the tensors the Lightning callback offers), ``lightning``, ``keras`` and ``xgboost`` (their
TripwireCallback), ``mxnet`` (``programs_mxnet.py``: TripwireHook, run in the MXNet environment).
Each fault program names how its onset (the step where the fault shows) is found
(``_harness.ONSETS``). The held-out set is in ``programs_holdout.py``."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from _frameworks import keras_run, lightning_run, xgb_run
from _harness import ONSETS, Result, digits, digits_relabelled, mlp, tabular, torch_loop
from _harness import seed_all as _seed


@dataclass(frozen=True)
class Program:
    name: str
    framework: str
    expected: tuple[str, ...]  # empty: a healthy control
    fn: Callable[[int], Result]
    about: str
    onset: str = "start"  # how the step where the fault shows is found: a key of _harness.ONSETS
    set: str = "dev"  # "dev": the set the thresholds were calibrated on; "holdout"/"holdout2": written after

    @property
    def healthy(self) -> bool:
        return not self.expected


PROGRAMS: list[Program] = []


def program(name: str, framework: str, expected: tuple[str, ...], about: str, onset: str = "start",
            set_: str = "dev") -> Callable[[Callable[[int], Result]], Callable[[int], Result]]:
    if onset not in ONSETS:
        raise ValueError(f"{name}: onset {onset!r}; known: {', '.join(ONSETS)}")

    def deco(fn: Callable[[int], Result]) -> Callable[[int], Result]:
        PROGRAMS.append(Program(name, framework, expected, fn, about, onset, set_))
        return fn
    return deco


def _init_normal(std: float, bias: float | None = None) -> Callable[[Any], None]:
    def init(m: Any) -> None:
        import torch

        torch.nn.init.normal_(m.weight, 0.0, std)
        if bias is not None:
            torch.nn.init.constant_(m.bias, bias)
    return init


def _init_const(value: float) -> Callable[[Any], None]:
    def init(m: Any) -> None:
        import torch

        torch.nn.init.constant_(m.weight, value)
        torch.nn.init.zeros_(m.bias)
    return init


STEPS = 2000

# ===================================================================================== faults (torch)


@program("nan_lr_huge", "torch", ("exploding_tensor",), "linear regression, SGD with learning rate 1.0: diverges to inf/NaN", onset="nonfinite")
def nan_lr_huge(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 1]), _regression(seed), seed=seed, steps=STEPS, lr=1.0, optimizer="sgd", momentum=0.0, loss="mse")


def _regression(seed: int) -> tuple[np.ndarray, ...]:
    Xtr, _, Xva, _ = digits(seed)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=64).astype(np.float32)
    t_tr, t_va = Xtr @ w, Xva @ w
    m, sd = t_tr.mean(), t_tr.std()
    return Xtr, (t_tr - m) / sd, Xva, (t_va - m) / sd


@program("nan_log_zero", "torch", ("exploding_tensor",), "log(softmax) by hand, linear model on inputs x100: log(0) = -inf", onset="nonfinite")
def nan_log_zero(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    return torch_loop(mlp([64, 10]), (Xtr * 100, ytr, Xva * 100, yva), seed=seed, steps=STEPS, lr=1e-2, loss="nll_log")


@program("nan_in_input", "torch", ("exploding_tensor",), "a NaN appears in the input batches from step 400", onset="nonfinite")
def nan_in_input(seed: int) -> Result:
    _seed(seed)

    def inject(step: int, x: Any, y: Any) -> tuple[Any, Any]:
        if step >= 400:
            x = x.clone()
            x[0, 0] = float("nan")
        return x, y
    return torch_loop(mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, inject=inject)


@program("exploding_deep_normal_init", "torch", ("exploding_gradient",), "8-layer ReLU net, N(0, 1) init")
def exploding_deep_normal_init(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64] + [64] * 7 + [10], init=_init_normal(1.0)), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("exploding_unscaled_targets", "torch", ("exploding_gradient",), "regression on targets x1e4 (MSE)")
def exploding_unscaled_targets(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=64).astype(np.float32)
    t_tr, t_va = (Xtr @ w) * 1e4, (Xva @ w) * 1e4
    return torch_loop(mlp([64, 64, 1]), (Xtr, t_tr, Xva, t_va), seed=seed, steps=STEPS, lr=1e-3, loss="mse")


@program("vanishing_deep_sigmoid", "torch", ("vanishing_gradient",), "12-layer sigmoid net")
def vanishing_deep_sigmoid(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64] + [32] * 11 + [10], act="sigmoid"), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("vanishing_tiny_init", "torch", ("vanishing_gradient", "poor_weight_initialization"), "6-layer tanh net, N(0, 1e-4) init")
def vanishing_tiny_init(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64] + [64] * 5 + [10], act="tanh", init=_init_normal(1e-4)), digits(seed), seed=seed, steps=STEPS, lr=1e-3, optimizer="sgd")


@program("dead_relu_negative_bias", "torch", ("dead_relu",), "ReLU net whose biases start at -10")
def dead_relu_negative_bias(seed: int) -> Result:
    _seed(seed)

    def init(m: Any) -> None:
        import torch

        torch.nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5))
        torch.nn.init.constant_(m.bias, -10.0)
    return torch_loop(mlp([64, 64, 64, 10], init=init), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("dead_relu_high_lr", "torch", ("dead_relu",), "ReLU net knocked dead by an SGD lr of 5 for 20 steps at step 400", onset="planted")
def dead_relu_high_lr(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 128, 128, 10]), digits(seed), seed=seed, steps=STEPS, lr=0.05, optimizer="sgd",
                      schedule=lambda s: 100.0 if 400 <= s < 420 else 1.0)


@program("saturated_tanh_scaled_inputs", "torch", ("saturated_activation", "input_not_normalized"), "tanh net fed inputs x100")
def saturated_tanh_scaled_inputs(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    return torch_loop(mlp([64, 64, 64, 10], act="tanh"), (Xtr * 100, ytr, Xva * 100, yva), seed=seed, steps=STEPS, lr=1e-3)


@program("saturated_sigmoid_large_init", "torch", ("saturated_activation", "poor_weight_initialization"), "sigmoid net, N(0, 5) init")
def saturated_sigmoid_large_init(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10], act="sigmoid", init=_init_normal(5.0)), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("poor_init_zero", "torch", ("poor_weight_initialization", "all_zero"), "every weight initialised to 0")
def poor_init_zero(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10], init=_init_const(0.0)), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("poor_init_constant", "torch", ("poor_weight_initialization",), "every weight initialised to 0.05")
def poor_init_constant(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10], act="tanh", init=_init_const(0.05)), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("input_pixels_0_255", "torch", ("input_not_normalized",), "raw 0-255 pixels, no rescaling")
def input_pixels_0_255(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10]), digits(seed, scale="pixels"), seed=seed, steps=STEPS, lr=1e-3)


@program("input_unscaled_tabular", "torch", ("input_not_normalized",), "tabular features on scales 1..1000")
def input_unscaled_tabular(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = tabular(seed)
    scale = np.logspace(0, 3, Xtr.shape[1]).astype(np.float32)
    return torch_loop(mlp([20, 64, 2]), (Xtr * scale + 500, ytr, Xva * scale + 500, yva), seed=seed, steps=STEPS, lr=1e-3)


@program("loss_flat_lr_tiny", "torch", ("loss_not_decreasing",), "learning rate 1e-7")
def loss_flat_lr_tiny(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-7)


@program("loss_frozen_parameters", "torch", ("loss_not_decreasing", "unchanged_tensor", "weight_update_ratio"),
         "no parameter given to the optimizer")
def loss_frozen_parameters(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, params=[])


@program("loss_shuffled_labels", "torch", ("loss_not_decreasing",), "labels shuffled independently of the inputs")
def loss_shuffled_labels(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    rng = np.random.default_rng(seed + 1)
    return torch_loop(mlp([64, 32, 10]), (Xtr, rng.permutation(ytr), Xva, rng.permutation(yva)), seed=seed, steps=STEPS, lr=1e-3)


@program("oscillating_adam_high_lr", "torch", ("oscillating_loss",), "linear regression, Adam with learning rate 0.5", onset="first_swing")
def oscillating_adam_high_lr(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 1]), _regression(seed), seed=seed, steps=STEPS, lr=0.5, loss="mse")


@program("oscillating_missing_zero_grad", "torch", ("oscillating_loss",), "SGD+momentum without optimizer.zero_grad()", onset="first_swing")
def oscillating_missing_zero_grad(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=0.01, optimizer="sgd", zero_grad=False)


@program("diverging_step_lr_gamma_typo", "torch", ("loss_diverging",),
         "Adam 1e-3, a step schedule that multiplies the learning rate by 30 at step 800 (0.1 was meant)",
         onset="planted")
def diverging_step_lr_gamma_typo(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-3,
                      schedule=lambda s: 30.0 if s >= 800 else 1.0)


@program("overfit_tiny_subset", "torch", ("overfit",), "a 1000-unit MLP trained on 60 samples", onset="best_val")
def overfit_tiny_subset(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    rng = np.random.default_rng(seed)
    noisy = ytr[:60].copy()
    flip = rng.random(60) < 0.3
    noisy[flip] = rng.integers(0, 10, flip.sum())
    return torch_loop(mlp([64, 256, 256, 10]), (Xtr[:60], noisy, Xva, yva), seed=seed, steps=STEPS, lr=1e-3, batch=30,
                      eval_every=20)


@program("overfit_label_noise", "torch", ("overfit",), "50% of the training labels replaced at random, large MLP", onset="best_val")
def overfit_label_noise(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    rng = np.random.default_rng(seed)
    y = ytr.copy()
    flip = rng.random(len(y)) < 0.5
    y[flip] = rng.integers(0, 10, flip.sum())
    return torch_loop(mlp([64, 256, 256, 10]), (Xtr, y, Xva, yva), seed=seed, steps=STEPS, lr=1e-3, eval_every=50)


@program("class_imbalance_95_5", "torch", ("class_imbalance",), "95:5 classes, hard boundary, no class weights")
def class_imbalance_95_5(seed: int) -> Result:
    _seed(seed)
    data = tabular(seed, n=3000, weights=[0.95, 0.05], class_sep=0.5, flip_y=0.0)
    return torch_loop(mlp([20, 16, 2]), data, seed=seed, steps=STEPS, lr=1e-3)


@program("confusion_swapped_labels", "torch", ("confusion",), "every training 3 labelled 8")
def confusion_swapped_labels(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10]), digits_relabelled(seed, 3, 8), seed=seed, steps=STEPS, lr=1e-3)


@program("update_ratio_adam_lr_1", "torch", ("weight_update_ratio",), "Adam with learning rate 1.0")
def update_ratio_adam_lr_1(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1.0)


# ================================================================================= healthy (torch)
def _warmup_cosine(total: int, warm: int, restarts: int = 1) -> Callable[[int], float]:
    period = (total - warm) // restarts

    def f(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        k = (step - warm) % period
        return 0.5 * (1 + math.cos(math.pi * k / period))
    return f


@program("healthy_mlp_adam", "torch", (), "the fixed twin: MLP, Adam 1e-3, standardised digits")
def healthy_mlp_adam(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("healthy_step_lr_decay", "torch", (), "the fixed twin of the gamma typo: the learning rate x0.1 at step 800")
def healthy_step_lr_decay(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=1e-3,
                      schedule=lambda s: 0.1 if s >= 800 else 1.0)


@program("healthy_warmup_cosine_restarts", "torch", (), "warm-up then cosine with 2 warm restarts (loss spikes), SGD")
def healthy_warmup_cosine(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 128, 10]), digits(seed), seed=seed, steps=STEPS, lr=0.1, optimizer="sgd",
                      schedule=_warmup_cosine(STEPS, 60, restarts=3))


@program("healthy_batchnorm_deep", "torch", (), "10-layer ReLU net with BatchNorm")
def healthy_batchnorm_deep(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64] + [64] * 9 + [10], bn=True), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("healthy_class_weighted_imbalance", "torch", (), "95:5 classes with class weights 1:19")
def healthy_class_weighted(seed: int) -> Result:
    _seed(seed)
    data = tabular(seed, n=3000, weights=[0.95, 0.05], class_sep=0.5, flip_y=0.0)
    return torch_loop(mlp([20, 16, 2]), data, seed=seed, steps=STEPS, lr=1e-3, class_weight=[1.0, 19.0])


@program("healthy_fast_convergence_plateau", "torch", (), "easy data: converged in ~50 steps, then a long plateau")
def healthy_plateau(seed: int) -> Result:
    _seed(seed)
    data = tabular(seed, n=2000, class_sep=3.0, flip_y=0.0)
    return torch_loop(mlp([20, 32, 2]), data, seed=seed, steps=STEPS, lr=1e-2)


@program("healthy_relu_sparsity", "torch", (), "wide ReLU net with ~50% zeros, SGD")
def healthy_relu_sparsity(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 256, 256, 10]), digits(seed), seed=seed, steps=STEPS, lr=0.05, optimizer="sgd")


@program("healthy_pixels_rescaling_layer", "torch", (), "raw 0-255 pixels behind a Rescaling(1/255) layer")
def healthy_pixels_rescaling(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10], rescale=1 / 255.0), digits(seed, scale="pixels"), seed=seed, steps=STEPS, lr=3e-3)


@program("healthy_tanh_xavier", "torch", (), "tanh net, Xavier init, standardised inputs")
def healthy_tanh(seed: int) -> Result:
    _seed(seed)

    def init(m: Any) -> None:
        import torch

        torch.nn.init.xavier_uniform_(m.weight)
        torch.nn.init.zeros_(m.bias)
    return torch_loop(mlp([64, 64, 64, 10], act="tanh", init=init), digits(seed), seed=seed, steps=STEPS, lr=1e-3)


@program("healthy_sigmoid_shallow", "torch", (), "2-hidden-layer sigmoid net (the fixed twin of the deep one)")
def healthy_sigmoid(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 64, 10], act="sigmoid"), digits(seed), seed=seed, steps=STEPS, lr=3e-3)


@program("healthy_sgd_small_batch", "torch", (), "SGD+momentum with batch 8 (noisy losses)")
def healthy_small_batch(seed: int) -> Result:
    _seed(seed)
    return torch_loop(mlp([64, 64, 10]), digits(seed), seed=seed, steps=STEPS, lr=0.01, optimizer="sgd", batch=8)


@program("healthy_regression", "torch", (), "regression with standardised targets (MSE)")
def healthy_regression(seed: int) -> Result:
    _seed(seed)
    Xtr, ytr, Xva, yva = digits(seed)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=64).astype(np.float32)
    t_tr, t_va = Xtr @ w, Xva @ w
    m, s = t_tr.mean(), t_tr.std()
    return torch_loop(mlp([64, 64, 1]), (Xtr, (t_tr - m) / s, Xva, (t_va - m) / s), seed=seed, steps=STEPS, lr=1e-3, loss="mse")


@program("healthy_partly_frozen", "torch", (), "fine-tuning: the first layer frozen on purpose")
def healthy_partly_frozen(seed: int) -> Result:
    _seed(seed)
    model = mlp([64, 64, 64, 10])
    first = list(model.children())[0]
    for p in first.parameters():
        p.requires_grad_(False)
    return torch_loop(model, digits(seed), seed=seed, steps=STEPS, lr=1e-3, params=[p for p in model.parameters() if p.requires_grad])


@program("healthy_multiclass_tabular", "torch", (), "4-class tabular data with 5% label noise, MLP")
def healthy_multiclass(seed: int) -> Result:
    _seed(seed)
    data = tabular(seed, n=3000, classes=4, flip_y=0.05, class_sep=1.5)
    return torch_loop(mlp([20, 64, 4]), data, seed=seed, steps=STEPS, lr=1e-3)


# ====================================================================================== callbacks
@program("xgb_trees_too_deep", "xgboost", ("tree_depth",), "max_depth=20, min_child_weight=0 on noisy data")
def xgb_trees_too_deep(seed: int) -> Result:
    return xgb_run(seed, tabular(seed, n=3000, flip_y=0.2), 60, max_depth=20, min_child_weight=0, eta=0.3)


@program("xgb_feature_leak", "xgboost", ("feature_importance_overweight",), "a feature that copies the label (with 5% noise)")
def xgb_feature_leak(seed: int) -> Result:
    Xtr, ytr, Xva, yva = tabular(seed, n=3000, flip_y=0.1, class_sep=0.7)
    rng = np.random.default_rng(seed)

    def leak(y: np.ndarray) -> np.ndarray:
        return np.where(rng.random(len(y)) < 0.05, 1 - y, y) + rng.normal(0, 0.1, len(y))
    return xgb_run(seed, (np.c_[Xtr, leak(ytr)], ytr, np.c_[Xva, leak(yva)], yva), 100, max_depth=4, eta=0.1)


@program("xgb_overfit_rounds", "xgboost", ("overfit",), "eta 0.5, depth 10 on 30% label noise", onset="best_val")
def xgb_overfit_rounds(seed: int) -> Result:
    return xgb_run(seed, tabular(seed, n=2000, flip_y=0.3), 100, max_depth=10, eta=0.5)


@program("xgb_class_imbalance", "xgboost", ("class_imbalance",), "95:5 classes, hard boundary, no scale_pos_weight")
def xgb_class_imbalance(seed: int) -> Result:
    return xgb_run(seed, tabular(seed, n=3000, weights=[0.95, 0.05], class_sep=0.3, flip_y=0.02), 60, max_depth=3, eta=0.1)


@program("xgb_healthy_default", "xgboost", (), "depth 6, eta 0.1, 100 rounds")
def xgb_healthy_default(seed: int) -> Result:
    return xgb_run(seed, tabular(seed, n=3000, flip_y=0.05), 100, max_depth=6, eta=0.1)


@program("xgb_healthy_imbalance_weighted", "xgboost", (), "95:5 classes with scale_pos_weight=19")
def xgb_healthy_weighted(seed: int) -> Result:
    return xgb_run(seed, tabular(seed, n=3000, weights=[0.95, 0.05], class_sep=0.3, flip_y=0.02), 60, max_depth=3, eta=0.1,
                scale_pos_weight=19.0)


@program("xgb_healthy_imbalance_eta_low", "xgboost", (),
         "95:5 classes, separable, no scale_pos_weight, eta 0.05: minority recall 0 for the first rounds, then high")
def xgb_healthy_imbalance_eta_low(seed: int) -> Result:
    # (session 16's trial: class_imbalance fired at round 1 on such boosters, which predict about the
    # prior for every sample until enough trees have accumulated)
    return xgb_run(seed, tabular(seed, n=3000, weights=[0.95, 0.05], class_sep=2.0, flip_y=0.0, informative=5), 150,
                   max_depth=6, eta=0.05)


@program("xgb_healthy_strong_feature", "xgboost", (), "one strong but honest feature among 20 (40% of the signal)")
def xgb_healthy_strong_feature(seed: int) -> Result:
    Xtr, ytr, Xva, yva = tabular(seed, n=3000, flip_y=0.05)
    rng = np.random.default_rng(seed)
    return xgb_run(seed, (np.c_[Xtr, ytr + rng.normal(0, 1.0, len(ytr))], ytr, np.c_[Xva, yva + rng.normal(0, 1.0, len(yva))], yva),
                100, max_depth=4, eta=0.1)


# ---------------------------------------------------------------------------------------- lightning
@program("lightning_nan_lr_huge", "lightning", ("exploding_tensor",), "Lightning linear regression, SGD lr 1.0: diverges", onset="nonfinite")
def lightning_nan(seed: int) -> Result:
    return lightning_run(seed, mlp([64, 1]), _regression(seed), epochs=45, lr=1.0, loss="mse", opt="sgd")


@program("lightning_vanishing_deep_sigmoid", "lightning", ("vanishing_gradient",), "Lightning, 12-layer sigmoid net")
def lightning_vanishing(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    return lightning_run(seed, mlp([64] + [32] * 11 + [10], act="sigmoid"), digits(seed), epochs=45, lr=1e-3)


@program("lightning_loss_lr_tiny", "lightning", ("loss_not_decreasing",), "Lightning, learning rate 1e-7")
def lightning_lr_tiny(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    return lightning_run(seed, mlp([64, 64, 10]), digits(seed), epochs=45, lr=1e-7)


@program("lightning_healthy_mlp", "lightning", (), "Lightning MLP, Adam 1e-3")
def lightning_healthy(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    return lightning_run(seed, mlp([64, 64, 64, 10]), digits(seed), epochs=10, lr=1e-3)


@program("lightning_healthy_batchnorm", "lightning", (), "Lightning, 8-layer ReLU net with BatchNorm")
def lightning_healthy_bn(seed: int) -> Result:
    import torch

    torch.manual_seed(seed)
    return lightning_run(seed, mlp([64] + [64] * 7 + [10], bn=True), digits(seed), epochs=10, lr=1e-3)


# -------------------------------------------------------------------------------------------- keras
@program("keras_loss_lr_tiny", "keras", ("loss_not_decreasing",), "Keras, learning rate 1e-7")
def keras_lr_tiny(seed: int) -> Result:
    return keras_run(seed, lambda k: [k.layers.Dense(64, activation="relu"), k.layers.Dense(10)], digits(seed), epochs=45, lr=1e-7)


@program("keras_dead_relu_negative_bias", "keras", ("dead_relu",), "Keras, ReLU layers with bias initialised to -10")
def keras_dead_relu(seed: int) -> Result:
    def layers(k: Any) -> list[Any]:
        init = k.initializers.Constant(-10.0)
        return [k.layers.Dense(64, activation="relu", bias_initializer=init), k.layers.Dense(64, activation="relu", bias_initializer=init),
                k.layers.Dense(10)]
    return keras_run(seed, layers, digits(seed), epochs=45, lr=1e-3)


@program("keras_healthy_rescaling", "keras", (), "Keras, raw 0-255 pixels behind a Rescaling(1/255) layer")
def keras_healthy_rescaling(seed: int) -> Result:
    return keras_run(seed, lambda k: [k.layers.Rescaling(1 / 255.0), k.layers.Dense(64, activation="relu"), k.layers.Dense(10)],
                  digits(seed, scale="pixels"), epochs=10, lr=3e-3)


@program("keras_healthy_mlp", "keras", (), "Keras MLP, Adam 1e-3")
def keras_healthy(seed: int) -> Result:
    return keras_run(seed, lambda k: [k.layers.Dense(64, activation="relu"), k.layers.Dense(64, activation="relu"), k.layers.Dense(10)],
                  digits(seed), epochs=10, lr=1e-3)


# the MXNet programs (run in their own environment by run.py) and the held-out set
import programs_mxnet  # noqa: E402,F401
import programs_holdout  # noqa: E402,F401
import programs_holdout2  # noqa: E402,F401
