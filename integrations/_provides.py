"""What each integration captures: the kinds a rule or collection may need from it (private; read
by the callbacks, which refuse a rule or collection needing none of their kinds, and by ``tripwire
validate --framework``, which must not import the frameworks)."""

from __future__ import annotations

PROVIDES: dict[str, tuple[str, ...]] = {
    "keras": ("activation_inputs", "activations", "biases", "gradients", "inputs", "labels", "losses", "metrics",
              "optimizer", "predictions", "relu_outputs", "weights"),
    "lightning": ("activation_inputs", "activations", "biases", "gradients", "inputs", "labels", "losses", "metrics",
                  "optimizer", "predictions", "relu_outputs", "weights"),
    "mxnet": ("activation_inputs", "activations", "biases", "gradients", "losses", "metrics", "relu_outputs",
              "weights"),
    "xgboost": ("feature_importance", "hyperparameters", "labels", "metrics", "predictions", "trees"),
}
