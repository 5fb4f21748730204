"""How far a trained model's patchwise field is from its unpatched one (the seams), by padding.

A run trained on the 2-D GP task (``gp-2d-bsa``, inputs in [-2, 2]^2): one GP draw of its
task family with ``--context`` noisy observations, a ``--cells`` x ``--cells`` grid over the
training box, predicted by ``predict_field`` with the tiles of the default (half the training
span) and each ``--paddings`` value, against ``padding=inf`` (every window holds all the
context: the unpatched prediction). Reported per padding: the largest and mean absolute
difference of the mean and of the stddev, relative to the mean predictive stddev, and the
seam jump: the mean absolute step of the mean between neighbouring cells across a tile
boundary against the same between neighbouring cells inside tiles.

    python benchmarks/field_seams.py RUN --paddings 0.25 0.5 1.0
"""
import argparse
import json
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--cells", type=int, default=120)
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--paddings", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import numpy as np
    import pandas as pd
    import xarray as xr

    from taylorformer.prediction import fields
    from taylorformer.workflow.runs import load_run
    from taylorformer.task import make_task

    model, _, _ = load_run(args.run_dir, "best")  # its normaliser: units, training span
    draw = make_task("gp-2d-bsa", {"num_context": [args.context, args.context], "num_target": 1})
    batch = draw.sample(np.random.default_rng(args.seed), 1, "test")
    context = pd.DataFrame({"x0": batch["xc"][0, :, 0], "x1": batch["xc"][0, :, 1], "y": batch["yc"][0, :, 0]})
    axis = np.linspace(-2, 2, args.cells)
    grid = xr.Dataset(coords={"x0": axis, "x1": axis})
    full = fields.predict_field(model, context, grid, padding=np.inf, progress=False)
    rows = []
    for padding in args.paddings:
        out = fields.predict_field(model, context, grid, padding=padding, progress=False)
        tile = [int(t) for t in out.attrs["taylorformer_patch"].split(",")]
        d_mean = np.abs(out.y_mean.values - full.y_mean.values)
        d_std = np.abs(out.y_stddev.values - full.y_stddev.values)
        scale = float(full.y_stddev.values.mean())
        step = np.abs(np.diff(out.y_mean.values, axis=0))  # between rows i and i + 1
        across = (np.arange(1, args.cells) % tile[0]) == 0
        rows.append({"padding": padding, "tile": tile, "mean_stddev": round(scale, 4),
                     "max_abs_mean_diff / stddev": round(float(d_mean.max()) / scale, 4),
                     "mean_abs_mean_diff / stddev": round(float(d_mean.mean()) / scale, 4),
                     "max_abs_stddev_diff / stddev": round(float(d_std.max()) / scale, 4),
                     "step across tiles": round(float(step[across].mean()), 4) if across.any() else None,
                     "step inside tiles": round(float(step[~across].mean()), 4)})
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
