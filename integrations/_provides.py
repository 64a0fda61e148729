"""What each integration captures: the kinds a rule or collection may need from it, and the modes in
which it offers a kind where not in every mode (private; read by the callbacks, which refuse a rule
or collection needing none of their kinds, by ``tripwire validate --framework``, which must not
import the frameworks, and by the Session, which says a collection captured nothing only where the
integration offers its kinds; no import at all: the Session reads it while ``tripwire`` is imported)."""

from __future__ import annotations

PROVIDES: dict[str, tuple[str, ...]] = {
    "keras": ("activation_inputs", "activations", "biases", "gradients", "inputs", "labels", "losses", "metrics",
              "optimizer", "predictions", "relu_outputs", "weights"),
    "lightning": ("activation_inputs", "activations", "biases", "gradients", "inputs", "labels", "losses", "metrics",
                  "optimizer", "predictions", "relu_outputs", "weights"),
    "mxnet": ("activation_inputs", "activations", "biases", "gradients", "inputs", "losses", "metrics", "optimizer",
              "relu_outputs", "weights"),
    "xgboost": ("feature_importance", "hyperparameters", "labels", "metrics", "predictions", "trees"),
}

OFFERED_IN: dict[str, dict[str, frozenset[str]]] = {
    "lightning": {"predictions": frozenset({"eval", "test", "predict"})},  # (docs/lightning.md: none at train steps)
}
"""Per framework, the modes in which its integration offers a kind at all, where not every mode (a
kind not listed: any mode; a framework not listed: every kind in any mode): a collection saved in
other modes only is not said to have captured nothing there (trial 27d: a Lightning fit without
validation said that ``predictions``, saved in predict, captured nothing)."""

#: How to hold data out of an XGBoost training: the fix the XGBoost callback's WARNING gives for a run
#: whose evaluation sets are all the training data, and ``tripwire watch`` gives for such a stored run
#: (one text for both; here, where the watch reads it without importing xgboost).
XGBOOST_HELD_OUT_FIX = ("evaluate data left out of training: xgb.train(..., evals=[(dtrain, 'train'), "
                        "(dvalid, 'validation')]) with dvalid built from rows that are not in dtrain (sklearn's "
                        "train_test_split; the sklearn API: fit(X_train, y_train, eval_set=[(X_train, y_train), "
                        "(X_valid, y_valid)]))")
