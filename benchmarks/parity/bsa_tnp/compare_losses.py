"""Per-step training losses of two runs from the same initial weights (``--losses`` files
of train_ours.py / train_ref.py): relative difference at chosen steps, and its maximum.

    python3 compare_losses.py results/paired/losses-ours-s0-100.json \\
        results/paired/losses-ref-likeours-kerasadam-init-s0-100.json
"""
import json
import sys

import numpy as np


def main(a_path, b_path, steps=(1, 2, 3, 5, 10, 20, 50, 100)):
    a, b = (np.asarray(json.load(open(p)), np.float64) for p in (a_path, b_path))
    n = min(len(a), len(b))
    rel = np.abs(a[:n] - b[:n]) / np.abs(b[:n])
    print("| step | " + " | ".join(str(s) for s in steps if s <= n) + " |")
    print("|---|" + "---|" * sum(s <= n for s in steps))
    print("| loss, first | " + " | ".join(f"{a[s - 1]:.6f}" for s in steps if s <= n) + " |")
    print("| loss, second | " + " | ".join(f"{b[s - 1]:.6f}" for s in steps if s <= n) + " |")
    print("| rel. difference | " + " | ".join(f"{rel[s - 1]:.1e}" for s in steps if s <= n) + " |")
    print(f"max rel. difference over {n} steps: {rel.max():.1e}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
