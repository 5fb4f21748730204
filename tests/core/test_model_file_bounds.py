"""A model file cannot hang or exhaust the loader (issue 37, item 3): every size option of a
spec is bounded where it enters (``taylorformer.checks.SIZE_BOUNDS``, the bound in the
error), and all weights together by ``MAX_PARAMETERS``. A ``.keras`` file whose spec asks
for ``encoder.layers = 2147483647`` is refused at once with a SpecError naming the option."""
import copy
import json
import time
import zipfile

import pytest

import taylorformer as tfm
from taylorformer import registry
from taylorformer.checks import MAX_LAYERS, MAX_PARAMETERS, MAX_WIDTH, SIZE_BOUNDS
from taylorformer.errors import SpecError
from taylorformer.spec import resolve_spec

HUGE = 2**31 - 1
TINY = {"preset": "tnp-d", "encoder": {"layers": 1, "width": 16, "num_heads": 2, "head_dim": 8},
        "head": {"width": 16}}


def _encoder(config):
    """The (first) model spec's ``encoder`` dict inside a Keras ``config.json`` tree."""
    if isinstance(config, dict):
        if isinstance(config.get("encoder"), dict) and "dim_x" in config:
            return config["encoder"]
        for value in config.values():
            found = _encoder(value)
            if found is not None:
                return found
    return None


def crafted(tmp_path, edit):
    """A ``.keras`` file of a tiny model whose ``config.json`` spec ``edit`` changed."""
    good, bad = tmp_path / "good.keras", tmp_path / "bad.keras"
    tfm.build_model(TINY).save(good)
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                edit(_encoder(config))
                data = json.dumps(config).encode()
            dst.writestr(item, data)
    return bad


@pytest.mark.parametrize("option, value, bound", [("layers", HUGE, MAX_LAYERS), ("width", HUGE, MAX_WIDTH),
                                                  ("num_heads", 10**6, SIZE_BOUNDS["num_heads"])])
def test_a_model_file_asking_for_a_huge_size_is_refused_fast(tmp_path, option, value, bound):
    path = crafted(tmp_path, lambda encoder: encoder.update({option: value}))
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        tfm.load_model(str(path))
    assert time.perf_counter() - start < 5
    message = str(info.value)
    assert f"'{option}'" in message and str(value) in message and f"{bound}]" in message


def _int_options(spec, path=()):
    """Paths of the int options of a resolved spec (not the provenance)."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key != "provenance":
                yield from _int_options(value, path + (key,))
    elif isinstance(spec, list):
        for i, value in enumerate(spec):
            yield from _int_options(value, path + (i,))
    elif isinstance(spec, int) and not isinstance(spec, bool):
        yield path


@pytest.mark.parametrize("preset", registry.names("model"))
def test_every_int_option_of_every_preset_is_bounded(preset):
    spec = resolve_spec({"preset": preset})
    paths = list(_int_options(spec))
    assert paths
    for path in paths:
        bad = copy.deepcopy(spec)
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = HUGE
        start = time.perf_counter()
        with pytest.raises(SpecError, match=str(HUGE)):
            tfm.build_model(bad)
        assert time.perf_counter() - start < 5, path


def test_weights_beyond_the_budget_are_refused_as_they_are_created(monkeypatch):
    # each option within its bound, all weights together over the budget (lowered here, so
    # that the test allocates little): refused at the variable that crosses it
    from taylorformer.models import base

    built = tfm.build_model(TINY)
    size = built.count_params()
    monkeypatch.setattr(base, "MAX_PARAMETERS", size - 1)
    with pytest.raises(SpecError, match=f"more than {size - 1:,} weights"):
        tfm.build_model(TINY)
    # the budget counts every variable created: the weights, the metric trackers' 9 scalars and
    # the training range's low and high bounds of each input ([dim_x + dim_y] each)
    monkeypatch.setattr(base, "MAX_PARAMETERS", size + 9 + 2 * (built.dim_x + built.dim_y))
    assert tfm.build_model(TINY).count_params() == size
    # a refused build leaves no half-built state behind: a model after it builds and trains
    model = tfm.build_model(TINY)
    model.compile(optimizer="adam")
    model.optimizer.build(model.trainable_variables)
    assert MAX_PARAMETERS >= 2**28  # 1 GiB of float32: far above any published NP
