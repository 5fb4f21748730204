"""Step time of main-job recipes (model size x batch size), interleaved so that a shared
machine's load hits every recipe alike.

    python benchmarks/main_job_recipes.py                 # the default candidates
    python benchmarks/main_job_recipes.py --rounds 5 --steps 50

Each recipe gets the library's own compiled train step (``Trainer.compiled_step``, XLA as
``taylorformer train``) on pre-sampled batches of the ``gp`` task; after a warm-up, the
recipes take turns for ``--rounds`` rounds of ``--steps`` steps. Prints, per recipe, the
median ms/step and its ratio to the first recipe, and the time 2000 steps would take.
What a recipe learns in a number of steps is measured separately (benchmarks/experiments/main_job.py).
"""
import argparse
import json
import statistics
import tempfile
import time

RECIPES = {
    "tnp-d b16 (5 layers)": ({"preset": "tnp-d"}, 16),
    "tnp-d b32 (5 layers)": ({"preset": "tnp-d"}, 32),
    "tnp-d b32 3 layers": ({"preset": "tnp-d", "encoder": {"layers": 3}}, 32),
    "tnp-d b32 2 layers": ({"preset": "tnp-d", "encoder": {"layers": 2}}, 32),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    from taylorformer.workflow import training
    from taylorformer.task import make_task

    task = make_task("gp")
    steps, batches = {}, {}
    for name, (spec, batch_size) in RECIPES.items():
        cfg = training.TrainConfig(batch_size=batch_size, seed=0, tensorboard=False)
        trainer = training.Trainer(spec, task, cfg, out_dir=tempfile.mkdtemp())
        steps[name] = trainer.compiled_step()
        batches[name] = list(task.dataset("train", batch_size=batch_size).take(args.warmup + args.steps))
        for b in batches[name][: args.warmup]:
            steps[name](b)
    times = {name: [] for name in RECIPES}
    for _ in range(args.rounds):
        for name, step in steps.items():
            start = time.perf_counter()
            for b in batches[name][args.warmup:]:
                loss = step(b)["loss"]
            float(loss)
            times[name].append((time.perf_counter() - start) / args.steps)
    base = statistics.median(times[next(iter(RECIPES))])
    for name, values in times.items():
        ms = 1000 * statistics.median(values)
        print(json.dumps({"recipe": name, "ms_per_step": round(ms, 1), "ratio": round(ms / 1000 / base, 2),
                          "s_per_2000_steps": round(2 * ms, 1), "rounds_ms": [round(1000 * v, 1) for v in values]}))


if __name__ == "__main__":
    main()
