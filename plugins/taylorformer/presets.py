"""Model presets of the Taylorformer family: ``taylorformer`` and its ablations.

``taylorformer``
    The paper's ETT forecasting setting (Nivron et al. 2023, Table 3 and Algorithm 1):
    MHA-X + MHA-XY streams, 4 layers, 6 heads x 11 (head_dim), output (model) width 32,
    positional encoding ``enc_dim`` 32, dropout 0.05, a linear head (``hidden_layers`` 0:
    ``O = Linear(concat(O_X, O_XY))``), Gaussian likelihood with scale
    ``0.001 + softplus(raw)`` (the paper adds 0.001 to sigma in its NLL), and the
    LocalTaylor wrapper with ``p = 0`` (mean = y_n + network) and ``q = 1`` (first-order
    Taylor features), ``k = 1`` (nearest-neighbour slopes; raise for noisy data).
    The FFN hidden width defaults to the model width (32). 89,636 parameters for 1-D
    x and y (the paper reports about 90K for its ETT model). Use it for 1-D GP tasks
    too; sizes are spec overrides
    (``build_model("taylorformer", encoder={"layers": 6})``).

Ablations (the paper's Sec. 4.3 / Fig. 5), by spec::

    build_model("taylorformer", encoder={"streams": ["xy"]})               # MHA-XY + LocalTaylor
    build_model("taylorformer", encoder={"streams": ["x"]})                # MHA-X + LocalTaylor
    build_model("taylorformer", encoder={"streams": ["xy"]}, wrapper=None) # base transformer decoder
    build_model("taylorformer", encoder={"streams": ["x"]}, wrapper=None)  # MHA-X only
    build_model("taylorformer", wrapper=None)                              # both streams, no LocalTaylor

The first two are also registered as ``taylorformer-xy`` and ``taylorformer-x``.
"""
import copy

TAYLORFORMER = {
    "description": "Taylorformer: MHA-X + MHA-XY + LocalTaylor (p=0, q=1), autoregressive (Nivron et al. 2023).",
    "kind": "autoregressive",
    "encoder": {"name": "taylorformer", "streams": ["x", "xy"], "layers": 4, "width": 32,
                "num_heads": 6, "head_dim": 11, "enc_dim": 32, "dropout": 0.05},
    "head": {"width": 32, "hidden_layers": 0},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
    "wrapper": {"name": "local-taylor", "p": 0, "q": 1, "k": 1},
}


def ablation(streams, label):
    """The ``taylorformer`` preset with only the given ``streams``."""
    spec = copy.deepcopy(TAYLORFORMER)
    spec["encoder"]["streams"] = streams
    spec["description"] = f"Taylorformer ablation: {label} + LocalTaylor (p=0, q=1)."
    return spec


TAYLORFORMER_XY = ablation(["xy"], "MHA-XY only")
TAYLORFORMER_X = ablation(["x"], "MHA-X only")
