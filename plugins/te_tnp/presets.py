"""TE-TNP model presets (kind ``model``): ``te-tnp`` and ``te-pt-tnp``.

Paper sizes (TE-TNP, Ashman et al. 2024, 1-D GP experiments): Dz = 128, 5 layers,
8 heads x 16, kernel MLP 2 x 128 (hidden layers x width), ReLU, pre-norm; the head's
second output is a pre-softplus variance (App. F.1). Each layer is a self-attention block
on the context, then a cross-attention block from the targets to the updated context
(App. F.1; the encoder's ``update_order="context-first"``, as the authors' code runs it),
with no LayerNorm after the last layer (App. F.1 describes none, the code has none).
The paper does not give the initialisation: the preset starts as the authors' code does
(spec ``init="fan-in-uniform"``, PyTorch's default, with every layer a copy of the first:
``identical_initial_layers``), from which ours learns as their code does (docs/parity.md).
Thesis variants are spec overrides of ``te-tnp``, e.g.::

    build_model("te-tnp", encoder={"attention": {"form": "pre", "relative": "rbf"}})
    build_model("te-tnp", dim_x=2, encoder={"attention": {"distance": "norm"}})
    build_model("te-tnp", encoder={"attention": {"location_update": True}})
    build_model("te-pt-tnp", encoder={"style": "perceiver", "init": "attention"})
"""

TE_ATTENTION = {"name": "te", "form": "post", "distance": "difference",
                "kernel_width": 128, "kernel_layers": 2}

#: App. F.1: "The decoder parameterises the mean and pre-softplus variance of a Gaussian
#: likelihood with heterogeneous noise" (the authors' code likewise: sigma = sqrt(softplus(raw))
#: + floor); the floor 1e-3 on sigma is ours (their config's is 0)
TE_LIKELIHOOD = {"name": "normal", "min_scale": 1e-3, "softplus_of": "variance"}

TE_TNP = {
    "description": "TE-TNP: translation-equivariant transformer NP (Ashman et al. 2024).",
    "kind": "conditional",
    "encoder": {"name": "transformer", "attention": TE_ATTENTION, "layers": 5, "width": 128,
                "num_heads": 8, "head_dim": 16, "embed_x": False, "update_order": "context-first",
                "identical_initial_layers": True, "final_norm": False},
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": TE_LIKELIHOOD,
    "init": "fan-in-uniform",
}

TE_PT_TNP = {
    "description": "TE-PT-TNP: TE-TNP with M=32 pseudo-tokens (IST style, mean-initialised).",
    "kind": "conditional",
    "encoder": {"name": "pseudo-token", "attention": TE_ATTENTION, "num_pseudo": 32,
                "style": "ist", "init": "mean", "layers": 5, "width": 128, "num_heads": 8,
                "head_dim": 16},
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": TE_LIKELIHOOD,
}
