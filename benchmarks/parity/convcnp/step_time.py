"""CPU seconds per training step of the ``convcnp`` preset, with and without XLA.

    python step_time.py --task gp-2d-bsa --batch-size 8 --xla        # one JSON line
    python step_time.py --task gp --batch-size 16 --no-xla

Builds the preset through ``taylorformer.Trainer`` on the task (its defaults), runs one
step of ``Trainer.compiled_step`` (compilation), then ``--steps`` timed steps on further
batches, and prints the process CPU seconds and wall seconds per step.
"""
import argparse
import json
import os
import tempfile
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="gp")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--xla", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from taylorformer import Trainer, TrainConfig
    from taylorformer.task import make_task

    task = make_task(args.task, {})
    cfg = TrainConfig(steps=args.steps + 1, batch_size=args.batch_size, tensorboard=False, jit_compile=args.xla)
    trainer = Trainer("convcnp", task, cfg, tempfile.mkdtemp(prefix="convcnp-steps-"), task_name=args.task)
    step = trainer.compiled_step()
    batches = list(task.dataset("train", batch_size=args.batch_size, seed=0, num_batches=args.steps + 1))
    start = time.time()
    step(batches[0])
    first = time.time() - start
    cpu, wall = time.process_time(), time.time()
    for batch in batches[1:]:
        step(batch)
    print(json.dumps({"task": args.task, "batch_size": args.batch_size, "xla": args.xla,
                      "params": int(trainer.model.count_params()), "first_step_wall_s": round(first, 2),
                      "cpu_s_per_step": round((time.process_time() - cpu) / args.steps, 3),
                      "wall_s_per_step": round((time.time() - wall) / args.steps, 3)}))


if __name__ == "__main__":
    main()
