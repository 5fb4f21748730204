"""The plugin author kit (:mod:`taylorformer.testing`) run over every registered
attention, encoder, likelihood, wrapper and task: the built-ins pass the checks a
third-party plugin is asked to pass (small sizes keep it fast; an unknown component is
checked with its defaults)."""
import numpy as np
import pandas as pd
import pytest

from taylorformer import registry, testing
from taylorformer.errors import TaskError

SMALL = {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8}
ATTENTION = {"te": {"kernel_width": 8}}
ENCODERS = {
    "deepset": {"width": 16, "layers": 1},
    "transformer": SMALL,
    "tnp-a": {**SMALL, "ffn_width": 16},
    "taylorformer": {"layers": 2, "width": 8, "num_heads": 2, "head_dim": 4, "enc_dim": 4},
    "pseudo-token": {**SMALL, "num_pseudo": 3, "attention": {"name": "te", "kernel_width": 8}},
    "kr-block": {**SMALL, "ffn_width": 16, "embed_widths": [16]},
}
SPATIAL = {"num_context": [8, 16], "num_target": 16}
TASKS = {"gp": {"num_target": 8}, "gp-2d-bsa": SPATIAL, "sphere-gp": SPATIAL,
         "sir": {**SPATIAL, "grid": 16}, "generic-spatial": {"num_context": [4, 8], "num_target": 8},
         "image": {"source": np.random.default_rng(0).integers(0, 256, (12, 8, 8), dtype=np.uint8),
                   "num_context": [2, 8], "num_target": [1, 8]}}


def _names(kind):
    return registry.names(kind)


@pytest.mark.parametrize("name", _names("attention"))
def test_attention(name):
    testing.check_attention(name, **ATTENTION.get(name, {}))


def test_attention_that_moves_positions():
    testing.check_attention("te", kernel_width=8, location_update=True)


@pytest.mark.parametrize("name", _names("encoder"))
def test_encoder(name):
    testing.check_encoder(name, **ENCODERS.get(name, {}))


@pytest.mark.parametrize("name", _names("likelihood"))
def test_likelihood(name):
    testing.check_likelihood(name)


@pytest.mark.parametrize("name", _names("wrapper"))
def test_wrapper(name):
    testing.check_wrapper(name)


@pytest.mark.parametrize("name", _names("task"))
def test_task(name, tmp_path, station_configs, gridded_configs):
    config = dict({**TASKS, **station_configs, **gridded_configs}.get(name, {}))
    if name == "csv":
        path = tmp_path / "series.csv"
        rng = np.random.default_rng(0)
        pd.DataFrame({"y": np.cumsum(rng.normal(size=400))}).to_csv(path, index=False)
        config = {"path": str(path), "target_columns": "y", "context_length": 16, "horizon": 8}
    if name == "fitted-gp":
        path = tmp_path / "survey.csv"
        rng = np.random.default_rng(0)
        pd.DataFrame({"x": rng.uniform(size=20), "y": rng.uniform(size=20), "v": rng.normal(size=20)}).to_csv(
            path, index=False)
        config = {"path": str(path), "x_columns": ["x", "y"], "target_columns": "v", "num_target": 8}
    if registry.entry("task", name).plugin == "builtin-image" and name != "image":
        tfds = pytest.importorskip("tensorflow_datasets")  # the presets read tfds: sources
        with tfds.testing.mock_data(num_examples=12):  # never the network
            testing.check_task(name, **config)
        return
    try:
        testing.check_task(name, **config)
    except TaskError as exc:  # a named dataset the test mirror (tests/conftest.py) does not hold
        if "could not download" not in str(exc):
            raise
        pytest.skip(str(exc))
