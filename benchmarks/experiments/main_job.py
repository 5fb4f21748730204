"""Main-job recipes (issue 13): what each learns, as gap to the exact GP ceiling.

    .venv/bin/python benchmarks/experiments/main_job.py                     # every recipe, seed 0
    .venv/bin/python benchmarks/experiments/main_job.py --recipes l2-6500,l3-5000 --seeds 0,1,2

Each (recipe, seed) trains on the ``gp`` task into ``--out/RECIPE-sSEED`` with
``taylorformer.train`` (XLA, cosine schedule with 5% warm-up; TensorBoard off, which
changes no number), then evaluates the best checkpoint on the fixed test split (32
batches of 16 tasks) as ``taylorformer evaluate RUN --batch-size 16`` does. Prints a
JSON line per run: training wall seconds (compilation, validation and checkpoints
included), test log-likelihood and gap. Time ratios between recipes mean something only
within one run of this script on a quiet machine.
"""
import argparse
import json
import os
import time

TNP_D = {"preset": "tnp-d"}
L3, L2 = ({**TNP_D, "encoder": {"layers": n}} for n in (3, 2))
#: name -> (model spec, train config options)
RECIPES = {
    "l5-2000": (TNP_D, {}),  # the main job before issue 13's third session
    "l5-2000-clip5": (TNP_D, {"clip_norm": 5.0}),
    "l5-2000-wd0": (TNP_D, {"weight_decay": 0.0}),
    "l5-2000-lr1.5e-3": (TNP_D, {"learning_rate": 1.5e-3}),
    "l5-b32-1800": (TNP_D, {"batch_size": 32, "learning_rate": 2e-3, "steps": 1800}),
    "l5-3500": (TNP_D, {"steps": 3500}),
    "l5-4000": (TNP_D, {"steps": 4000}),
    "l3-b32-2000": (L3, {"batch_size": 32, "learning_rate": 2e-3}),
    "l3-b32-2400": (L3, {"batch_size": 32, "learning_rate": 2e-3, "steps": 2400}),
    "l3-4000": (L3, {"steps": 4000}),
    "l3-5000": (L3, {"steps": 5000}),
    "l2-6500": (L2, {"steps": 6500}),  # the main job now
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", default=",".join(RECIPES), help=f"comma-separated, from {list(RECIPES)}")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", default="runs/exp/main-job")
    args = parser.parse_args()
    names = args.recipes.split(",")
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown recipe(s) {unknown}; choose from {list(RECIPES)}")

    from taylorformer.workflow import runs, training

    for name in names:
        for seed in (int(s) for s in args.seeds.split(",")):
            model, options = RECIPES[name]
            out = os.path.join(args.out, f"{name}-s{seed}")
            start = time.perf_counter()
            training.train(model, "gp", out_dir=out, verbose=0, evaluate=False, tensorboard=False, seed=seed,
                           **options)
            train_s = time.perf_counter() - start
            result = runs.evaluate_run(out, batch_size=16)
            print(json.dumps({"recipe": name, "seed": seed, "train_s": round(train_s, 1),
                              "loglik": round(result["loglik"]["mean"], 3),
                              "gap": round(result["gap_to_gt"]["mean"], 3)}), flush=True)


if __name__ == "__main__":
    main()
