"""Built-in model presets (kind ``model``): name -> spec dict.

A preset is a complete spec; ``build_model({"preset": "tnp-d", ...})`` deep-merges
overrides on top of it. Sizes follow the papers (TNP-D at the TE-TNP paper's size).
"""
from taylorformer.hookspecs import hookimpl

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


@hookimpl
def register_models(register):
    register("cnp", CNP)
    register("tnp-d", TNP_D, aliases=["tnp"])
