"""The example plugin, installed as a real package, is listed and usable by name."""
import json
import subprocess
import sys

import numpy as np

import taylorformer as tfm
from taylorformer import registry


def test_listed_by_the_cli_with_its_distribution():
    out = subprocess.run([sys.executable, "-m", "taylorformer.cli", "plugins", "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = {(r["kind"], r["name"]): r for r in json.loads(out)["components"]}
    for key in (("attention", "cosine"), ("task", "sine")):
        assert rows[key]["distribution"] == "taylorformer-example-plugin"
        assert rows[key]["version"] == "0.1.0"


def test_attention_and_task_usable_by_name(tmp_path):
    task = registry.get("task", "sine")(num_target=12)
    batch = next(iter(task.dataset("val", batch_size=4)))
    model = tfm.build_model("tnp-d", encoder={"attention": "cosine", "layers": 2, "width": 32,
                                              "num_heads": 2, "head_dim": 8})
    before = tfm.loglik(model, batch).numpy()
    assert before.shape == (4,) and np.isfinite(before).all()
    model.save(tmp_path / "m.keras")
    loaded = tfm.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(tfm.loglik(loaded, batch).numpy(), before, rtol=1e-6)
    assert any(p["distribution"] == "taylorformer-example-plugin" for p in loaded.spec["provenance"])


def test_author_kit_checks_pass(tmp_path):
    from taylorformer import testing

    testing.check_attention("cosine")
    testing.check_task("sine", num_target=10)
    testing.check_model({"preset": "tnp-d", "encoder": {"attention": "cosine", "layers": 1, "width": 16,
                                                        "num_heads": 2, "head_dim": 8}}, tmp_path)
