"""Train taylorformer's ``np`` / ``anp`` (the reference's GP configuration, as in
check_function.py) on the dumped batches; print one JSON line per evaluation.

    python train_ours.py --data data/gp-np-2000.npz --model anp --seed 0 [--objective iwae --train-samples 4]

Adam, learning rate 5e-4 with cosine decay to 0 over the run (the reference's ``gp.py``),
initial weights ``fan-in-uniform`` (torch's ``nn.Linear`` default, the reference's;
``--export-init`` also saves them for ``train_ref.py --init``), batch
``i`` at step ``i + 1``. Test log-likelihood: ``taylorformer.loglik`` (the mixture over
``eval_samples`` = 50 prior draws, mean over targets) averaged over every test task.
"""
import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from check_function import REFERENCE_CONFIG, torch_names  # noqa: E402

KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", choices=sorted(REFERENCE_CONFIG), required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--objective", default="elbo")
    parser.add_argument("--train-samples", type=int, default=1)
    parser.add_argument("--export-init", help="save the initial weights under the reference's names (.npz)")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    import taylorformer as tfm

    keras.utils.set_random_seed(args.seed)
    data = np.load(args.data)
    spec = {"preset": args.model, **REFERENCE_CONFIG[args.model], "head": {"width": 128, "hidden_layers": 2},
            "init": "fan-in-uniform"}
    spec["encoder"] = {**spec["encoder"], "objective": args.objective, "train_samples": args.train_samples}
    model = tfm.build_model(spec)
    if args.export_init:
        np.savez(args.export_init, **torch_names(model, args.model))
    schedule = keras.optimizers.schedules.CosineDecay(5e-4, decay_steps=args.steps)
    model.compile(optimizer=keras.optimizers.Adam(schedule))
    train = tf.data.Dataset.from_tensor_slices({k: data[f"train_{k}"] for k in KEYS})
    test = [{k: data[f"test_{k}"][j] for k in KEYS} for j in range(len(data["test_nc"]))]

    def test_loglik():
        return float(np.mean(np.concatenate([tfm.loglik(model, b).numpy() for b in test])))

    done, start = 0, time.process_time()
    while done < args.steps:
        n = min(args.eval_every, args.steps - done)
        history = model.fit(train.skip(done).take(n), epochs=1, verbose=0)
        done += n
        print(json.dumps({"side": "ours", "model": args.model, "seed": args.seed, "objective": args.objective,
                          "init": "exported" if args.export_init else "own",
                          "train_samples": args.train_samples, "step": done, "test_loglik": test_loglik(),
                          "train_loss": float(history.history["loss"][-1]),
                          "cpu_s": round(time.process_time() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()
