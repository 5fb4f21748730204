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
    for key in (("attention", "cosine"), ("attention", "distance-decay"), ("task", "sine")):
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


def test_location_aware_attention_against_the_contract(tmp_path):
    """The author kit passes, and a model whose tokens never embed x is translation
    equivariant with it: shifting every location changes no prediction."""
    from taylorformer import testing

    testing.check_attention("distance-decay")
    spec = {"preset": "tnp-d", "encoder": {"attention": "decay", "embed_x": False, "layers": 2,
                                           "width": 16, "num_heads": 2, "head_dim": 8}}
    model = testing.check_model(spec, tmp_path)
    batch = {k: v.numpy() for k, v in next(iter(registry.get("task", "sine")(num_target=9)
                                                  .dataset("val", batch_size=3))).items()}
    shifted = {**batch, "xc": batch["xc"] + 3.0, "xt": batch["xt"] + 3.0}
    np.testing.assert_allclose(model(shifted)["loc"], model(batch)["loc"], atol=1e-4)
    assert any(p["canonical"] == "distance-decay" and p["name"] == "decay"
               for p in model.spec["provenance"])
