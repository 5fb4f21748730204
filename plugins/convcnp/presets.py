"""ConvCNP model preset (kind ``model``): ``convcnp``.

Sizes of the BSA-TNP paper's ConvCNP baseline (App. A, the 2-D GP and SIR columns):
16 grid points per unit ("each pixel has its own grid point" on a 64x64 image of
[-2, 2]^2), SetConv encoding and decoding, 8 depthwise-separable residual blocks of kernel 9
and 128 channels, a head of 3 hidden layers of 128; 482,310 parameters in 2-D (the paper:
about 507K, its blocks also carrying batch normalisation). The grid follows the data on
the lattice k / 16 with 72 points per dimension (4.5 units: [-2, 2] and a margin), so a
shifted domain needs nothing and a wider one an override, e.g.
``build_model("convcnp", encoder={"grid_points": 136})`` for [-4, 4]. On a CPU it trains
several times faster without XLA (``--no-xla``; benchmarks/parity/convcnp). The architecture of
cambridge-mlg/tnp's GP experiments (``experiments/configs/models/convcnp.yml``: 32
channels, 5 plain blocks of kernel 9, a two-layer embedding, no density normalisation, a
fixed grid of 128 points on the target range, a pre-softplus variance) is the override
``encoder={"channels": 32, "cnn": "conv", "layers": 5, "normalise": False,
"embed_hidden_layers": 2, "grid_range": [-4, 4], "grid_points": 128}, head={"width": 32,
"hidden_layers": 2}, likelihood={"name": "normal", "min_scale": 0.0, "softplus_of": "variance"}``
(the same function as the reference's: benchmarks/parity/convcnp).
"""

CONVCNP = {
    "description": "ConvCNP: SetConv to a grid, CNN, SetConv to the targets (Gordon et al. 2020).",
    "kind": "conditional",
    "encoder": {"name": "convcnp", "channels": 128, "cnn": "resconv", "layers": 8, "kernel_size": 9,
                "points_per_unit": 16.0, "grid_points": 72, "init_lengthscale": 0.1,
                "normalise": True, "embed_hidden_layers": 0},
    "head": {"width": 128, "hidden_layers": 3},
    "likelihood": {"name": "normal", "min_scale": 1e-3},
}
