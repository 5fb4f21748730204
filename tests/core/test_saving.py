"""Every preset round-trips through .keras in a fresh process; missing plugins are named."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from taylorformer import registry

SAVE = textwrap.dedent('''
    import json, sys
    import numpy as np
    import taylorformer as tfm
    from taylorformer import registry
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    names = registry.names("model")
    for name in names:  # one layer: every preset's classes and options, a quarter of the build time
        model = tfm.build_model({"preset": name, "encoder": {"layers": 1}})
        dx, dy = model.dim_x, model.dim_y
        batch = {k: rng.normal(size=(2, n, d)).astype("float32")
                 for k, n, d in (("xc", 5, dx), ("yc", 5, dy), ("xt", 4, dx), ("yt", 4, dy))}
        model.save(f"{out}/{name}.keras")
        np.savez(f"{out}/{name}.npz", **batch, **{"out_" + k: v.numpy() for k, v in model(batch).items()})
    print(json.dumps(names))
''')

LOAD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import taylorformer as tfm
    out, names = sys.argv[1], json.loads(sys.argv[2])
    worst = {}
    for name in names:
        saved = np.load(f"{out}/{name}.npz")
        batch = {k: saved[k] for k in ("xc", "yc", "xt", "yt")}
        model = tfm.load_model(f"{out}/{name}.keras")
        got = model(batch)
        worst[name] = max(float(np.abs(got[k[4:]].numpy() - saved[k]).max()) for k in saved if k.startswith("out_"))
    print(json.dumps(worst))
''')


@pytest.mark.slow
def test_every_preset_round_trips_in_a_fresh_process(tmp_path):
    saved = subprocess.run([sys.executable, "-c", SAVE, str(tmp_path)], capture_output=True, text=True,
                           timeout=600)
    assert saved.returncode == 0, saved.stderr[-3000:]
    names = json.loads(saved.stdout.strip().splitlines()[-1])
    assert set(names) == set(registry.names("model")) and {"cnp", "tnp-d"} <= set(names)
    loaded = subprocess.run([sys.executable, "-c", LOAD, str(tmp_path), json.dumps(names)],
                            capture_output=True, text=True, timeout=600)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    worst = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert worst == {name: 0.0 for name in names}, worst


PLUGIN = '''
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl

class Doubled(Attention):
    """Attention with doubled logits."""
    def score(self, q, k, q_pos, k_pos, q_valid, k_valid):
        return 2.0 * super().score(q, k, q_pos, k_pos, q_valid, k_valid)

@hookimpl
def register_attention(register):
    register("doubled", Doubled)
'''

ALIASED = PLUGIN + '''
    register("doubled-attn", Doubled, aliases=["dbl"])

@hookimpl
def register_models(register):
    register("dbl-tnp", {"kind": "conditional", "encoder": {
        "name": "transformer", "attention": "dbl", "layers": 1, "width": 16, "num_heads": 2,
        "head_dim": 8}, "head": {"width": 16}})
'''.replace('register("doubled", Doubled)', "pass")


@pytest.mark.parametrize("spec", [
    "dbl-tnp",  # the package's preset, whose encoder names the package's attention by an alias
    {"preset": "taylorformer", "encoder": {"attention_xy": "dbl", "layers": 1, "width": 8,
                                           "num_heads": 2, "head_dim": 4, "enc_dim": 4}},
])
def test_missing_nested_aliased_component_names_its_distribution(tmp_path, fake_dist, spec):
    import taylorformer as tfm
    from taylorformer.errors import UnknownComponentError

    fake_dist("aliased-attention", "2.4", {"aliased_mod": ALIASED}, {"aliased": "aliased_mod"})
    registry.reload()
    try:
        path = tmp_path / "m.keras"
        tfm.build_model(spec).save(path)
        registry.reload(blocked=["aliased"])
        with pytest.raises(UnknownComponentError, match="unknown attention 'dbl'") as err:
            tfm.load_model(path)
        assert "'aliased-attention' (version 2.4)" in str(err.value)
        assert "encoder.attention" in str(err.value)  # the spec field that names it
    finally:
        registry.reload()


LOAD_ONE = "import sys, taylorformer as tfm; tfm.load_model(sys.argv[1])"


@pytest.mark.slow
def test_loading_without_the_plugin_names_the_missing_distribution(tmp_path, fake_dist):
    import taylorformer as tfm

    fake_dist("doubled-attention", "3.1", {"doubled_mod": PLUGIN}, {"doubled": "doubled_mod"})
    registry.reload()
    try:
        model = tfm.build_model({"preset": "tnp-d", "encoder": {"attention": "doubled", "layers": 1}})
        path = tmp_path / "m.keras"
        model.save(path)
        env_with = {"PYTHONPATH": str(tmp_path)}
        ok = subprocess.run([sys.executable, "-c", LOAD_ONE, str(path)], capture_output=True, text=True,
                            env={**_env(), **env_with}, timeout=300)
        assert ok.returncode == 0, ok.stderr[-2000:]
        missing = subprocess.run([sys.executable, "-c", LOAD_ONE, str(path)], capture_output=True,
                                 text=True, env=_env(), timeout=300)
        assert missing.returncode != 0
        assert "unknown attention 'doubled'" in missing.stderr
        assert "'doubled-attention' (version 3.1)" in missing.stderr
    finally:
        registry.reload()


def _env():
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_provenance_is_recorded_per_component():
    import taylorformer as tfm

    spec = tfm.resolve_spec("tnp-d")
    kinds = {(p["field"], p["kind"], p["name"]): p["distribution"] for p in spec["provenance"]}
    assert kinds == {("encoder", "encoder", "transformer"): "taylorformer",
                     ("encoder.attention", "attention", "mha-xy"): "taylorformer",
                     ("likelihood", "likelihood", "normal"): "taylorformer"}
    aliased = tfm.resolve_spec({"preset": "tnp-d", "encoder": {"attention": "mha"}})
    assert {(p["name"], p["canonical"]) for p in aliased["provenance"]} >= {("mha", "mha-xy")}
    assert np.all([isinstance(p["version"], str) for p in spec["provenance"]])
