"""A large field in bounded memory: ``predict_field`` on an N x N grid from M scattered context
points, time and peak RSS (issue 36: 1M target cells from 100K context points under 3 GB).

Setting: the main job's model (TNP-D with 2 attention layers; untrained: time and memory do
not depend on the weights) with the 2-D GP task (``gp-2d-bsa``: trained on [-2, 2]^2) as its
task, so the library picks the defaults: padding half the training span (2.0) and
tiles of half the span. The grid covers [-L, L]^2 (``--half-width``) with N cells per side and
a NaN disc (a "lake", about 7% of the cells) that is skipped; the context is M uniform points
of a smooth field; both are written to files first (``grid.nc``, ``points.csv``) and read by
``predict_field`` as the command does. The output is streamed to ``out.nc``.

Reported: wall and CPU time of the call, RSS before it (TensorFlow and the model loaded) and
the peak (``ru_maxrss``) of the whole process, the output's size, patches, and ``--check K``:
the largest difference against the unpatched prediction (all the context, one forward pass)
at K random cells, with the same padding, i.e. what the windows leave out.

    python benchmarks/field_memory.py --cells 1000 --context 100000 --check 2000
"""
import argparse
import json
import os
import resource
import sys
import tempfile
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=1000, help="grid cells per side (N)")
    parser.add_argument("--context", type=int, default=100_000, help="context points (M)")
    parser.add_argument("--half-width", type=float, default=20.0, help="the grid spans [-L, L]^2")
    parser.add_argument("--chunk-size", type=int, default=4096)
    parser.add_argument("--check", type=int, default=0, help="cells compared with the unpatched prediction")
    parser.add_argument("--dir", help="where to write the files (default: a temp directory)")
    args = parser.parse_args(argv)

    import numpy as np
    import pandas as pd
    import xarray as xr

    from taylorformer.prediction import fields
    from taylorformer.models import build_model
    from taylorformer.normaliser import Normaliser
    from taylorformer.task import make_task

    folder = args.dir or tempfile.mkdtemp(prefix="field-memory-")
    n, half = args.cells, args.half_width
    axis = np.linspace(-half, half, n)
    lat, lon = axis[:, None], axis[None, :]
    truth = (np.sin(lat / 3.0) * np.cos(lon / 5.0)).astype(np.float32)
    truth = np.where(lat ** 2 + lon ** 2 < (0.3 * half) ** 2, np.nan, truth)  # the lake: undefined
    xr.Dataset({"z": (("y", "x"), truth, {"units": "m", "long_name": "height"})},
               coords={"y": ("y", axis, {"units": "km"}), "x": ("x", axis, {"units": "km"})}
               ).to_netcdf(os.path.join(folder, "grid.nc"), engine="h5netcdf")
    del truth
    rng = np.random.default_rng(0)
    pts = rng.uniform(-half, half, (args.context, 2))
    pd.DataFrame({"y": pts[:, 0], "x": pts[:, 1], "z": np.sin(pts[:, 0] / 3.0) * np.cos(pts[:, 1] / 5.0)}
                 ).to_csv(os.path.join(folder, "points.csv"), index=False)
    model = build_model({"preset": "tnp-d", "encoder": {"layers": 2}, "dim_x": 2, "dim_y": 1})
    task = make_task("gp-2d-bsa")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out_path = os.path.join(folder, "out.nc")
    wall, cpu = time.perf_counter(), time.process_time()
    out = fields.predict_field(model, os.path.join(folder, "points.csv"), os.path.join(folder, "grid.nc"),
                               out_path, normaliser=Normaliser.from_task(task, 2, 1), chunk_size=args.chunk_size,
                               progress=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"cells": n * n, "context": args.context, "defined_cells": int(out.z.count()),
              "padding": out.attrs["taylorformer_padding"], "patch": out.attrs["taylorformer_patch"],
              "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "rss_before_mib": round(rss_before),
              "peak_rss_mib": round(peak), "output_mb": round(os.path.getsize(out_path) / 1e6, 1)}
    if args.check:
        rows, cols = rng.integers(0, n, args.check), rng.integers(0, n, args.check)
        keep = ~np.isnan(out.z.values[rows, cols])
        rows, cols = rows[keep], cols[keep]
        query = {"xc": pts[None].astype(np.float32),
                 "yc": (np.sin(pts[:, :1] / 3.0) * np.cos(pts[:, 1:] / 5.0))[None].astype(np.float32),
                 "xt": np.stack([axis[rows], axis[cols]], -1)[None].astype(np.float32)}
        full = fields.predict_query(model, query, chunk_size=256, verbose=0)
        mean, std = out.z_mean.values[rows, cols], out.z_stddev.values[rows, cols]
        result["check_cells"] = int(keep.sum())
        result["max_abs_mean_diff_vs_unpatched"] = float(np.abs(mean - full["mean"][0, :, 0]).max())
        result["max_abs_stddev_diff_vs_unpatched"] = float(np.abs(std - full["stddev"][0, :, 0]).max())
        result["mean_stddev"] = float(std.mean())
    out.close()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
