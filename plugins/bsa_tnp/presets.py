"""BSA-TNP model preset (kind ``model``): ``bsa-tnp``."""

#: BSA-TNP at the paper's size (App. A): 6 KRBlocks, tokens of 64, attention at 4 heads x
#: 32 (= 128), embedding MLP 256-128-64, FFN 256-64, head 128-128 (the paper's 256-64
#: head is within a few thousand parameters), 5 spatial RBF basis functions per head
#: per block (tiles: see :mod:`.attention`). About 0.47M parameters (paper: about 0.48M).
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
    "head": {"width": 128, "hidden_layers": 2},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
}
