"""Train several models with the same wall-clock budget, evaluate them on task variants.

    python benchmarks/compare_models.py --models tnp-d,te-tnp,te-pt-tnp --task gp-te-tnp \\
        --minutes 8 --variants '[{"shift": 0.0}, {"shift": 0.5}, {"shift": 1.0}]' --out runs/shift

Each model trains (same task, seed, batch size and optimiser) until ``--minutes`` of
training time have passed (this process's CPU time with ``--cpu-clock``, which other
load on a shared machine does not inflate), keeping the best validation checkpoint; then every
variant (task config overrides) is evaluated on its fixed test split. Prints a Markdown
table (log-likelihood mean +- 1.96 standard errors; the exact GP ceiling where the task
has one) and writes ``OUT/results.json``.
"""
import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", required=True, help="comma-separated presets; name@label trains a preset again with --model-specs overrides")
    parser.add_argument("--task", required=True)
    parser.add_argument("--task-config", default="{}", help="JSON task config for training")
    parser.add_argument("--model-overrides", default="{}", help="JSON spec overrides applied to every model")
    parser.add_argument("--variants", default="[{}]", help="JSON list of task-config overrides to evaluate")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--max-steps", type=int, default=10**6)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--eval-batches", type=int, default=16)
    parser.add_argument("--xla", action="store_true")
    parser.add_argument("--cpu-clock", action="store_true", help="budget in process CPU seconds")
    parser.add_argument("--samples", type=int, default=None,
                        help="AR models: forecast paths per window (default 32; 0: teacher-forced metrics only)")
    parser.add_argument("--consistency", type=int, default=0, help="AR models: order consistency K")
    parser.add_argument("--model-specs", default="{}",
                        help="JSON {model: overrides} applied to one model only (e.g. equal sizes)")
    parser.add_argument("--out", default="runs/compare")
    args = parser.parse_args()

    from taylorformer.workflow import runs, training
    from taylorformer.spec import deep_merge

    task_config = json.loads(args.task_config)
    overrides = json.loads(args.model_overrides)
    per_model = json.loads(args.model_specs)
    variants = json.loads(args.variants)
    results = []
    for name in args.models.split(","):
        out_dir = os.path.join(args.out, name.replace("@", "-"))
        preset = name.split("@")[0]  # "name@label" trains the same preset with other overrides
        model = deep_merge(deep_merge({"preset": preset}, overrides), per_model.get(name, {}))
        start = time.time()
        trainer = training.train(model, args.task, task_config, out_dir=out_dir, steps=args.max_steps,
                                 batch_size=args.batch_size, learning_rate=args.lr,
                                 time_budget=args.minutes * 60, jit_compile=args.xla,
                                 budget_clock="cpu" if args.cpu_clock else "wall",
                                 val_every=200, val_batches=4, checkpoint_every=1000, verbose=0,
                                 evaluate=False)
        row = {"model": name, "steps": int(trainer.step.numpy()), "train_s": round(time.time() - start, 1),
               "params": int(trainer.model.count_params()), "variants": []}
        for variant in variants:
            res = runs.evaluate_run(out_dir, task_config={**task_config, **variant},
                                    num_batches=args.eval_batches, num_samples=args.samples,
                                    consistency=args.consistency)
            row["variants"].append({"variant": variant, **{k: res[k] for k in res if k not in ("run_dir",)}})
        results.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"args": vars(args), "results": results}, fh, indent=2)
    print(table(results))


def table(results):
    """Markdown table: one row per model, one column per variant."""
    labels = [json.dumps(v["variant"]) if v["variant"] else "default" for v in results[0]["variants"]]
    lines = ["| model | params | steps | train s | " + " | ".join(labels) + " |",
             "|---|---|---|---|" + "---|" * len(labels)]
    for row in results:
        cells = []
        for v in row["variants"]:
            cell = f"{v['loglik']['mean']:.3f} ± {1.96 * v['loglik']['stderr']:.3f}"
            if "sampled" in v:  # an autoregressive model's headline: its sampled forecasts
                cell += f" (sampled MSE {v['mse']:.3f}, CRPS {v['crps']:.3f})"
            elif "mse" in v:
                cell += f" (MSE {v['mse']:.3f})"
            else:
                cell += f" (teacher-forced MSE {v['teacher_forced']['mse']:.3f})"
            if "consistency" in v:
                cell += f"; consistency {v['consistency']['mean']:.3f}"
            cells.append(cell)
        lines.append(f"| {row['model']} | {row['params']} | {row['steps']} | {row['train_s']} | "
                     + " | ".join(cells) + " |")
    if "gt_loglik" in results[0]["variants"][0]:
        cells = [f"{v['gt_loglik']['mean']:.3f}" for v in results[0]["variants"]]
        lines.append("| exact GP | | | | " + " | ".join(cells) + " |")  # no params, steps, time
    return "\n".join(lines)


if __name__ == "__main__":
    main()
