"""BSA-TNP model preset (kind ``model``): ``bsa-tnp``."""

#: BSA-TNP at the paper's size (App. A): 6 KRBlocks, tokens of 64, attention at 4 heads x
#: 32 (= 128), embedding MLP 256-128-64, FFN 256-64, head 256-64 ("identical to the
#: feedforward layers except it has an additional layer projecting to the output
#: dimension", App. A), 5 spatial RBF basis functions per head per block (tiles: see
#: :mod:`.attention`). 473,074 parameters (paper: about 0.478M; the authors' code has
#: 475,770: biases on the q/k/v projections, a 4-d observed/unobserved embedding, a
#: LayerNorm after the embedding MLP; benchmarks/parity/bsa_tnp).
BSA_TNP = {
    "description": "BSA-TNP: KRBlocks with biased scan attention, translation invariant "
                   "(Jenson et al. 2025).",
    "kind": "conditional",
    "encoder": {"name": "kr-block",
                "attention": {"name": "biased",
                              "groups": [{"name": "space", "dims": None, "basis": 5,
                                          "distance": "euclidean"}]},
                "layers": 6, "width": 64, "num_heads": 4, "head_dim": 32, "ffn_width": 256,
                "embed_widths": [256, 128], "positions": "auto", "embed_positions": False},
    "head": {"width": [256, 64]},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
}
