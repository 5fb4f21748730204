"""Model presets of the TNP family (kind ``model``): ``cnp``, ``tnp-d``, ``tnp-a``.

A preset is a complete spec; ``build_model({"preset": "tnp-d", ...})`` deep-merges
overrides on top of it. Sizes follow the papers (TNP-D at the TE-TNP paper's size;
TNP-A at its 1-D regression size: 6 layers, width 64, 4 heads x 16, FFN 128, MLP head
64 x 2; override the sizes for a comparison at equal parameter counts).
"""

CNP = {
    "description": "Conditional NP with a deep-set encoder (Garnelo et al. 2018).",
    "kind": "conditional",
    "encoder": {"name": "deepset", "width": 128, "layers": 3},
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
}

TNP_D = {
    "description": "TNP-D: transformer NP, factorised Gaussian (Nguyen & Grover 2022).",
    "kind": "conditional",
    "encoder": {"name": "transformer", "attention": "mha-xy", "layers": 5, "width": 128,
                "num_heads": 8, "head_dim": 16},
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
}

TNP_A = {
    "description": "TNP-A: autoregressive transformer NP on the doubled sequence (Nguyen & Grover 2022).",
    "kind": "autoregressive",
    "encoder": {"name": "tnp-a", "layers": 6, "width": 64, "num_heads": 4, "head_dim": 16,
                "ffn_width": 128},
    "head": {"width": 64, "hidden_layers": 2},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
}
