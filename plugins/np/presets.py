"""Model presets ``np`` and ``anp`` (kind ``model``, model kind ``latent``).

Sizes of the Taylorformer paper's NP and ANP baselines for 1-D regression (App. A.1; all
dense layers 128 wide, ReLU): NP latent path 3 dense layers before the mean over points
and 2 after, deterministic path 4 before, decoder 4; ANP the same latent path and decoder,
its deterministic path 4 dense layers for the values and 2 for the keys and queries, 8
heads. The ANP's self-attention on the context (in both paths) is Kim et al.'s and the
NP/ANP code's the paper says it follows (Nguyen & Grover 2022). Both train on the ELBO with
one draw of z over the context and targets together (Kim et al. 2019) and predict with a
mixture over 50 draws from the prior.
"""

_COMMON = {"width": 128, "latent_dim": 128, "latent_layers": 3, "latent_post_layers": 2,
           "num_heads": 8, "objective": "elbo", "train_samples": 1, "eval_samples": 50,
           "reconstruct_context": True}

NP = {
    "description": "Neural process: mean-pooled deterministic and latent paths (Garnelo et al. 2018).",
    "kind": "latent",
    "encoder": {"name": "np", **_COMMON, "layers": 4, "deterministic_post_layers": 0},
    "head": {"width": 128, "hidden_layers": 3},
    "likelihood": {"name": "np-normal", "min_scale": 0.1},
}

ANP = {
    "description": "Attentive NP: self-attention, cross-attention deterministic path, latent path (Kim et al. 2019).",
    "kind": "latent",
    "encoder": {"name": "anp", **_COMMON, "layers": 4, "query_layers": 2, "self_attention": True},
    "head": {"width": 128, "hidden_layers": 3},
    "likelihood": {"name": "np-normal", "min_scale": 0.1},
}
