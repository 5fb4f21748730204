"""GFLOP/s of the matrix products inside the tiled executor's blocks, against a large one.

The tiled attention runs seven ``[B, H, tq, tk]``-sized products per block (two in the
forward pass, five in the backward), each with one side of width ``head_dim`` (32 for
BSA-TNP). This times each layout under XLA, in a ``tf.while_loop`` over blocks as in the
executor, and a 2048^3 product for the machine's reference rate:

- ``q.k^T``: logits, and ``dO.V^T`` in the backward (``transpose_b``);
- ``p.v``: output, and ``dS.K`` in the backward;
- ``p^T.x``: ``dV = P^T.dO`` and ``dK = dS^T.Q`` in the backward (``transpose_a`` on the
  large operand).

    .venv/bin/python benchmarks/block_matmul_rates.py [--tiles 64 128 256] [--batch 8]
"""
import argparse
import os
import time


def rate(fn, args, flop, repeats):
    fn(*args).numpy()  # compile
    start = time.perf_counter()
    for _ in range(repeats):
        out = fn(*args)
    out.numpy()
    return flop / ((time.perf_counter() - start) / repeats) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiles", nargs="+", type=int, default=[64, 128, 256])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    a, b = tf.random.normal([2048, 2048]), tf.random.normal([2048, 2048])
    big = tf.function(lambda a, b: tf.matmul(a, b), jit_compile=True)
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; 2048^3 product: "
          f"{rate(big, (a, b), 2 * 2048 ** 3, args.repeats):.0f} GFLOP/s")
    print(f"| tile | blocks | q.k^T GFLOP/s | p.v GFLOP/s | p^T.x GFLOP/s |  (batch {args.batch}, "
          f"{args.heads} heads x {args.head_dim})")
    print("|---:|---:|---:|---:|---:|")
    bh, d = [args.batch, args.heads], args.head_dim
    for t in args.tiles:
        n = max(1, 48 * 128 * 128 // (t * t))  # about the same work at every tile
        x = tf.random.normal([n] + bh + [t, d])
        y = tf.random.normal([n] + bh + [t, d])
        p = tf.random.normal([n] + bh + [t, t])

        def blocks(product, out_shape):
            @tf.function(jit_compile=True)
            def run(u, w):
                body = lambda i, acc: (i + 1, acc + product(u[i], w[i]))  # noqa: E731
                return tf.while_loop(lambda i, _: i < n, body, (0, tf.zeros(bh + out_shape)))[1]
            return run

        flop = n * 2 * args.batch * args.heads * t * t * d
        qk = rate(blocks(lambda u, w: tf.matmul(u, w, transpose_b=True), [t, t]), (x, y), flop, args.repeats)
        pv = rate(blocks(tf.matmul, [t, d]), (p, y), flop, args.repeats)
        ptx = rate(blocks(lambda u, w: tf.matmul(u, w, transpose_a=True), [t, d]), (p, y), flop, args.repeats)
        print(f"| {t} | {n} | {qk:.0f} | {pv:.0f} | {ptx:.0f} |", flush=True)


if __name__ == "__main__":
    main()
