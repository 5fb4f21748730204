"""The domain-transfer scores both trainers write: a trained model's NLL per target point on
the dumped test tasks of each ``gp-2d-bsa`` domain (train [-2, 2]^2, shifted [8, 12]^2,
scaled [-4, 4]^2 with 4x the points), one JSON file per run in the schema
``../record_authors_code.py`` reads. NumPy only, so that the taylorformer venv
(``train_ours.py``) and the reference venv (``train_ref.py``) both import it.
"""
import datetime
import importlib.util
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
DOMAINS = ("train", "shifted", "scaled")
REFERENCE = "MLGlobalHealth/dl4bi@fb31d9e"
KEYS = ("xc", "yc", "xt", "yt", "mask_c", "mask_t")


def setting(steps, num_tasks):
    return (f"Nc ~ U{{16..63}}, Nt = 64, scaled domain 4x: U{{64..252}}, 256 (rows: U{{128..511}}, 1024; "
            f"scaled 4x); batch 8, AdamW, cosine 1e-4 -> 2e-5 over {steps} steps (rows: the paper's run); "
            f"{num_tasks} test tasks per domain (rows: 40,000); one thread")


def prefix(domain):
    """The key prefix of ``domain``'s test arrays in a ``dump_data.py`` file."""
    return "test_" if domain == "train" else f"test_{domain}_"


def test_batches(data, domain):
    """The test batches ``[{key: [B, ...]}]`` of ``domain`` in the loaded .npz ``data``."""
    name = f"{prefix(domain)}xc"
    if name not in data.files:
        raise SystemExit(f"the data file holds no test tasks of the {domain} domain ({name}): "
                         f"dump it with dump_data.py --test-domains {domain}")
    arrays = {k: data[f"{prefix(domain)}{k}"] for k in KEYS}
    return [{k: v[j] for k, v in arrays.items()} for j in range(len(arrays["xc"]))]


def nll_record(per_task_loglik):
    """``{"nll", "stderr", "num_tasks"}``: minus the mean over tasks of the per-task mean
    log-likelihood per target point ``[n]``, and its standard error over tasks."""
    values = np.asarray(per_task_loglik, np.float64)
    return {"nll": float(-values.mean()), "stderr": float(values.std(ddof=1) / np.sqrt(len(values))),
            "num_tasks": int(len(values))}


def score_domains(task_loglik, data, domains, train_loglik):
    """``{domain: nll_record}`` of a trained model on each domain's dumped test tasks.

    ``task_loglik(batch)``: per-task log-likelihoods ``[B]`` (NumPy) of one batch ``{key:
    [B, ...]}``; ``train_loglik``: the training loop's own test score (mean log-likelihood)
    of the train domain, which the train record must repeat (same model, tasks, scoring)."""
    scores = {}
    for domain in domains:
        scores[domain] = nll_record(np.concatenate([task_loglik(b) for b in test_batches(data, domain)]))
    if "train" in scores and abs(scores["train"]["nll"] + train_loglik) > 1e-9:
        raise SystemExit("the train domain's score differs from the training loop's own evaluation")
    return scores


def provenance():
    """``{"commit", "device", "date"}``: ../taylorformer/common.py's ``provenance`` (NumPy only), by path."""
    spec = importlib.util.spec_from_file_location(
        "taylorformer_parity_common", os.path.join(HERE, os.pardir, "taylorformer", "common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.provenance()


def write_result(path, side, seed, steps, parameters, wall_s, cpu_seconds, scores, extra=None):
    """``path`` (default ``results/domains-<side>-seed<S>.json``): one run's record."""
    num_tasks = max(s["num_tasks"] for s in scores.values())
    where = provenance()
    record = {
        "model": "bsa-tnp", "side": side, "seed": seed, "steps": steps, "reference": REFERENCE,
        "setting": setting(steps, num_tasks), "parameters": int(parameters), "wall_s": round(float(wall_s), 1),
        "cpu_s_per_step": round(float(cpu_seconds) / steps, 5), "commit": where["commit"],
        "command": " ".join(["python", os.path.relpath(sys.argv[0], HERE)] + sys.argv[1:]),
        "device": where["device"], "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_avg_1m": round(os.getloadavg()[0], 2), "domains": scores,
    }
    record.update(extra or {})
    path = path or os.path.join(RESULTS, f"domains-{side}-seed{seed}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    return path
