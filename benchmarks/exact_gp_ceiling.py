"""CPU time of one exact-GP task of the scaled 2-D BSA-TNP domain, by stage: the joint
covariance, its Cholesky factor and the predictive log-likelihoods (the ceiling every
``gp-2d-bsa`` batch carries, which the ``exact-gp`` baseline reads).

    OPENBLAS_NUM_THREADS=1 python benchmarks/exact_gp_ceiling.py [--nc 2044] [--nt 4096] \
        [--module OLD.py] [--repeats 2]

``--module`` times another copy of ``taylorformer/tasks/gaussian_process.py`` beside the
installed one, in the same process (e.g. an earlier commit's: ``git show
COMMIT:tasks/gaussian_process.py > /tmp/old.py``), and checks that both give the same
kernel matrices bit for bit and the same log-likelihoods to 1e-9. CPU time
(``time.process_time``), the best of ``--repeats``: on a shared machine compare ratios.
"""
import argparse
import importlib.util
import time

import numpy as np

from taylorformer.tasks import gaussian_process


def load(path):
    spec = importlib.util.spec_from_file_location("gaussian_process_other", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stages(module, xc, xt, lengthscale=0.3):
    """CPU seconds of (covariance, Cholesky, log-likelihoods, total) and the log-likelihoods."""
    t0 = time.process_time()
    cov = module.joint_covariance("eq", xc, xt, lengthscale, 1.0, 1.0, 0.1, "context")
    t1 = time.process_time()
    chol = np.linalg.cholesky(cov)
    t2 = time.process_time()
    y = (chol @ np.random.default_rng(1).standard_normal(len(cov))).astype(np.float32)
    t3 = time.process_time()
    loglik = module.loglik_from_cholesky(chol, len(xc), y[:len(xc)], y[len(xc):])
    t4 = time.process_time()
    return np.array([t1 - t0, t2 - t1, t4 - t3, t4 - t0 - (t3 - t2)]), loglik


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nc", type=int, default=2044, help="context points (the scaled domain's most)")
    parser.add_argument("--nt", type=int, default=4096, help="target points (the scaled domain's)")
    parser.add_argument("--module", help="another gaussian_process.py to time beside the installed one")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    xc = rng.uniform(-4, 4, (args.nc, 2)).astype(np.float32)
    xt = rng.uniform(-4, 4, (args.nt, 2)).astype(np.float32)
    modules = {"installed": gaussian_process}
    if args.module:
        modules["other"] = load(args.module)
        a, b = rng.normal(size=(50, 2)), rng.normal(size=(70, 2))
        for kind in gaussian_process.KERNELS:
            np.testing.assert_array_equal(modules["other"].kernel_matrix(kind, a, b, 0.7, 1.3, 0.9),
                                          gaussian_process.kernel_matrix(kind, a, b, 0.7, 1.3, 0.9))
    best, logliks = {}, {}
    for _ in range(args.repeats):
        for name, module in modules.items():
            times, logliks[name] = stages(module, xc, xt)
            best[name] = np.minimum(best.get(name, times), times)
    if args.module:
        np.testing.assert_allclose(logliks["other"], logliks["installed"], rtol=1e-9)
    print(f"one task, Nc = {args.nc}, Nt = {args.nt}: CPU s (best of {args.repeats})")
    print(f"{'':10} {'covariance':>10} {'cholesky':>10} {'loglik':>10} {'total':>10}")
    for name, times in best.items():
        print(f"{name:10} " + " ".join(f"{t:10.2f}" for t in times))
    if args.module:
        print(f"other / installed total: {best['other'][3] / best['installed'][3]:.2f}")


if __name__ == "__main__":
    main()
