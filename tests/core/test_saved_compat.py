"""Models saved by taylorformer 0.1.0 (``tests/fixtures/saved_v0_1``, written by the code
before the plugin-layout redesign) load with the current code and give the outputs the
writing code recorded."""
import json
import os

import numpy as np
import pytest

import taylorformer as tfm

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "saved_v0_1")
with open(os.path.join(HERE, "specs.json")) as _fh:
    NAMES = sorted(json.load(_fh))


def _batch(dim_x, seed=0):
    """The batch of ``tests/fixtures/make_saved_models.py``."""
    from taylorformer.batch import pad_tasks

    rng = np.random.default_rng(seed)
    tasks = [{"xc": rng.uniform(-2, 2, (n, dim_x)), "yc": rng.normal(size=(n, 1)),
              "xt": rng.uniform(-2, 2, (5, dim_x)), "yt": rng.normal(size=(5, 1))} for n in (4, 7)]
    return pad_tasks(tasks)


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_loads_with_recorded_outputs(name):
    expected = np.load(os.path.join(HERE, "outputs.npz"))
    model = tfm.load_model(os.path.join(HERE, f"{name}.keras"))
    params = model(_batch(model.dim_x))
    keys = sorted(k.split("/", 1)[1] for k in expected.files if k.startswith(name + "/"))
    assert keys and sorted(params) == keys
    for key in keys:
        np.testing.assert_allclose(params[key].numpy(), expected[f"{name}/{key}"], rtol=1e-5, atol=1e-5,
                                   err_msg=f"{name}: {key} differs from what 0.1.0 computed")
