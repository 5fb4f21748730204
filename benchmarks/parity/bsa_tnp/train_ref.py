"""Train the authors' BSA-TNP (dl4bi, JAX/Flax) on the dumped ``gp-2d-bsa`` batches
(reference venv).

    $DL4BI_VENV/bin/python train_ref.py --seed 0 --steps 2000 --eval-every 500
    $DL4BI_VENV/bin/python train_ref.py --seed 0 --like-ours     # every flag of ref_model.py

The model is ``ref_model.build(flags)``: the authors' 2-D GP YAML as published unless
flags are given (``--flag NAME`` repeatable, ``--like-ours`` = all of ``ref_model.FLAGS``).
Initial weights: ``model.init(jax.random.key(seed))``. Chunks: the class defaults (1024;
the default batches have at most 63 context and 64 test points, so one chunk each).

Step: ``jax.jit`` of the loss and its gradient, then ``optax`` (the optimizer library
dl4bi itself uses): ``clip_by_global_norm(0.5)`` then ``adamw`` (beta 0.9, 0.999,
epsilon 1e-7 as Keras', weight decay 1e-4) with ``cosine_decay_schedule(1e-4, steps,
alpha=0.2)`` (1e-4 -> 2e-5, the paper's App. B; the same formula as Keras' CosineDecay).
Loss: the reference's own ``DiagonalMVNOutput.nll`` (minus the mean log density over the
real target points; every task has the same Nt, so it equals ours, the mean over tasks of
the per-task mean). Test: per task, the mean log density over its target points; mean
and standard error over the 256 dumped test tasks. Output as train_ours.py.

``--keras-adam``: Adam with Keras' epsilon placement (:func:`keras_scale_by_adam`), the one
optimizer difference to ours. ``--init-from NPZ`` (with ``--like-ours``): start from our
initial weights (``train_ours.py --export-init``), so that both sides train the same
function from the same point; ``--losses JSON``: every step's loss (``compare_losses.py``).
``--test-domains train shifted scaled``: also score the final model on those domains'
dumped test tasks and write ``results/domains-authors-seed<S>.json`` (as train_ours.py).
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import domains  # noqa: E402

DATA = os.path.join(HERE, "data", "gp2d-nc63-nt64-seed0-2000.npz")


def mean_stderr(values):
    values = np.asarray(values, np.float64)
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(len(values)))


def keras_scale_by_adam(b1, b2, eps):
    """``optax.scale_by_adam`` with Keras' epsilon placement: Keras' Adam/AdamW step is
    ``lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)``, i.e. optax's
    ``m_hat / (sqrt(v_hat) + eps')`` with ``eps' = eps / sqrt(1 - b2^t)`` (3.2e-6 at t = 1
    for eps = 1e-7, 1.1e-7 at t = 2000)."""
    import jax
    import jax.numpy as jnp
    import optax

    def init(params):
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return {"mu": zeros, "nu": jax.tree_util.tree_map(jnp.zeros_like, params),
                "count": jnp.zeros([], jnp.int32)}

    def update(grads, state, params=None):
        mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
        nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
        t = state["count"] + 1
        factor = jnp.sqrt(1 - b2 ** t.astype(jnp.float32)) / (1 - b1 ** t.astype(jnp.float32))
        out = jax.tree_util.tree_map(lambda m, v: factor * m / (jnp.sqrt(v) + eps), mu, nu)
        return out, {"mu": mu, "nu": nu, "count": t}

    return optax.GradientTransformation(init, update)


def main(argv=None):
    import ref_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--flag", action="append", default=[], choices=ref_model.FLAGS)
    ap.add_argument("--like-ours", action="store_true", help="all flags of ref_model.FLAGS")
    ap.add_argument("--init-from", default=None, metavar="NPZ",
                    help="start from our initial weights (a check_function.py export file: "
                         "train_ours.py --export-init writes the ones its --seed gives), copied "
                         "into the reference tree as check_function.py compare does; needs the "
                         "function flags (--like-ours)")
    ap.add_argument("--losses", default=None, metavar="JSON",
                    help="write every step's training loss (a JSON list) to this file")
    ap.add_argument("--keras-adam", action="store_true",
                    help="Adam with Keras' epsilon placement (eps added to sqrt(v) before the bias "
                         "correction: optax's eps / sqrt(1 - beta2^t)); default optax.adamw's")
    ap.add_argument("--test-domains", nargs="*", default=[], choices=domains.DOMAINS, metavar="DOMAIN",
                    help="score the final model on these domains' test tasks (train shifted scaled)")
    ap.add_argument("--result", default=None, metavar="JSON",
                    help="where --test-domains writes its record (default results/domains-authors-seed<S>.json)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--min-lr", type=float, default=2e-5)
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import optax
    from jax.scipy.stats import norm

    flags = tuple(ref_model.FLAGS) if args.like_ours else tuple(args.flag)
    model, _ = ref_model.build(flags)
    params = ref_model.init(model, args.seed)
    init_name = os.path.basename(args.init_from) if args.init_from else None
    if args.init_from:
        import check_function

        missing = set(check_function.COPY_FLAGS) - set(flags)
        if missing:
            raise SystemExit(f"--init-from copies our weights into the reference built like ours; "
                             f"add the flags {sorted(missing)} (or --like-ours)")
        src = np.load(args.init_from)
        ours = {k[2:]: src[k] for k in src.files if k.startswith("w:")}
        flat = check_function.ref_params(ours, ref_model.flatten(params), flags)
        params = jax.tree_util.tree_map(jnp.asarray, check_function.unflatten(flat))
    data = np.load(args.data)
    if args.steps > data["train_xc"].shape[0]:
        raise SystemExit(f"{args.data} holds {data['train_xc'].shape[0]} batches; asked for {args.steps}")
    sched = optax.cosine_decay_schedule(args.lr, args.steps, alpha=args.min_lr / args.lr)
    if args.keras_adam:
        adam = optax.chain(keras_scale_by_adam(0.9, 0.999, 1e-7), optax.add_decayed_weights(1e-4),
                           optax.scale_by_learning_rate(sched))
    else:
        adam = optax.adamw(sched, b1=0.9, b2=0.999, eps=1e-7, weight_decay=1e-4)
    opt = optax.chain(optax.clip_by_global_norm(0.5), adam)
    opt_state = opt.init(params)

    def inputs(b):
        return {"s_ctx": b["xc"], "f_ctx": b["yc"], "mask_ctx": b["mask_c"] > 0, "s_test": b["xt"]}

    def loss_fn(p, b):
        out = model.apply(p, training=True, **inputs(b))
        return out.nll(b["yt"], mask=(b["mask_t"] > 0)[..., None])

    @jax.jit
    def step(p, s, b):
        loss, grads = jax.value_and_grad(loss_fn)(p, b)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    @jax.jit
    def task_loglik(p, b):
        out = model.apply(p, training=False, **inputs(b))
        lp = norm.logpdf(b["yt"], out.mu, out.std)[..., 0]
        m = b["mask_t"]
        return (lp * m).sum(1) / m.sum(1)

    keys = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")
    n_test = data["test_xc"].shape[0]
    test = [{k: jnp.asarray(data[f"test_{k}"][i]) for k in keys} for i in range(n_test)]
    train = {k: data[f"train_{k}"] for k in keys}

    def evaluate():
        return mean_stderr(np.concatenate([np.asarray(task_loglik(params, b)) for b in test]))

    wall = cpu = first = 0.0
    losses = []
    for i in range(args.steps):
        b = {k: jnp.asarray(v[i]) for k, v in train.items()}
        t0, c0 = time.perf_counter(), time.process_time()
        params, opt_state, loss = step(params, opt_state, b)
        loss = float(loss)  # waits for the step
        dt = time.perf_counter() - t0
        wall, cpu = wall + dt, cpu + time.process_time() - c0
        first = first or dt
        if not math.isfinite(loss):
            raise SystemExit(f"non-finite loss {loss} at step {i + 1}")
        losses.append(loss)
        s = i + 1
        if args.eval_every and s % args.eval_every == 0 and s != args.steps:
            m, e = evaluate()
            print(json.dumps({"impl": "dl4bi", "flags": list(flags), "init_from": init_name, "seed": args.seed, "step": s, "test_loglik_mean": m,
                              "test_loglik_stderr": e, "train_loss_mean": float(np.mean(losses[-args.eval_every:])),
                              "train_seconds": round(wall, 2)}), flush=True)
    if args.losses:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    m, e = evaluate()
    # do the F basis functions of a head stay distinct? (equal initial a, b give equal gradients)
    flat = ref_model.flatten(params)
    spread = {name: float(max(np.ptp(np.asarray(v), axis=-1).max() for k, v in flat.items() if k.endswith(name)))
              for name in ("s_bias_a", "s_bias_b", "s_bias_log_b") if any(k.endswith(name) for k in flat)}
    print(json.dumps({
        "impl": "dl4bi", "basis_spread_within_head": spread, "seed": args.seed, "step": args.steps, "final": True, "flags": list(flags), "keras_adam": args.keras_adam,
        "init_from": init_name,
        "test_loglik_mean": m, "test_loglik_stderr": e,
        "gt_loglik_mean": float(data["test_gt_loglik"].mean()),
        "train_loss_mean": float(np.mean(losses[-args.eval_every:] if args.eval_every else losses[-50:])),
        "train_seconds": round(wall, 2), "steady_steps_per_s": round((args.steps - 1) / (wall - first), 3),
        "first_step_seconds": round(first, 2), "cpu_seconds": round(cpu, 1),
        "num_params": int(sum(x.size for x in jax.tree_util.tree_leaves(params))),
        "jax": jax.__version__, "optax": optax.__version__, "load_avg_1m": round(os.getloadavg()[0], 2),
    }), flush=True)
    if args.test_domains:
        scores = domains.score_domains(lambda b: np.asarray(task_loglik(params, b)), data, args.test_domains, m)
        extra = {"flags": list(flags), "keras_adam": args.keras_adam, "init_from": init_name,
                 "jax": jax.__version__, "optax": optax.__version__}
        path = domains.write_result(args.result, "authors", args.seed, args.steps,
                                    sum(x.size for x in jax.tree_util.tree_leaves(params)), wall, cpu, scores, extra)
        print(json.dumps({"wrote": path, "domains": scores}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
