"""What the sampled headline adds to an autoregressive run's final evaluation.

Trains ``--model`` briefly on ETTh1's oil temperature (hourly, 168 h context, 24 h ahead:
the cost of sampling does not depend on the weights), then times ``evaluate_run`` on the
test split twice: teacher-forced only (``num_samples=0``) and with the default sampled
forecasts (32 paths per window on at most 64 windows). Prints one JSON line per call:
wall and process CPU seconds, peak RSS and the headline it reported.

    .venv/bin/python benchmarks/evaluation_headline_cost.py --out /tmp/headline-cost
"""
import argparse
import json
import resource
import time

from taylorformer.workflow import runs, training

TASK = {"target_columns": ["OT"], "context_length": 168, "horizon": 24}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="taylorformer", help="an autoregressive preset")
    parser.add_argument("--data", default="/work/shared/data/ett/ETTh1.csv", help="ETTh1.csv")
    parser.add_argument("--out", required=True, help="a new run directory")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    config = {"path": args.data, **TASK}
    training.train(args.model, "csv", config, out_dir=args.out, steps=args.steps, batch_size=16,
                   val_every=args.steps, val_batches=1, verbose=0, evaluate=False, tensorboard=False)
    for options in ({"num_samples": 0}, {}):
        wall, cpu = time.perf_counter(), time.process_time()
        result = runs.evaluate_run(args.out, **options)
        units = result["data_units"]
        print(json.dumps({
            "options": options, "wall_s": round(time.perf_counter() - wall, 1),
            "cpu_s": round(time.process_time() - cpu, 1), "num_tasks": result["num_tasks"],
            "sampled": {k: v for k, v in result.get("sampled", {}).items() if k != "note"},
            "rmse": units.get("rmse"), "crps": (units.get("crps") or {}).get("mean"),
            "teacher_forced_rmse": result["teacher_forced"]["rmse"],
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)}), flush=True)


if __name__ == "__main__":
    main()
