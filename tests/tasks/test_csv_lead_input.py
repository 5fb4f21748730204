"""The ``csv`` task's lead input (``lead_input``, :func:`tasks.csv_series.window_leads`)
against a NumPy statement of it, in batches and ``window``; the config round trip, the
input's name, and the anchored standardisation (``standardise: last``) it brings as the
task's model default; its default, the record a run keeps of it, and mirrored training
windows (``mirror``)."""
import numpy as np
import pytest


def test_the_lead_input_is_the_log_scaled_distance_to_the_last_context_row():
    import pandas as pd

    from taylorformer import registry

    c, h = 6, 3
    frame = pd.DataFrame({"y": np.sin(np.arange(120.0)), "u": np.cos(np.arange(120.0))})
    task = registry.get("task", "csv")(path=frame, target_columns="y", covariate_columns="u",
                                       context_length=c, horizon=h, lead_input=True)
    want = [np.sign(j - c + 1) * np.log(1 + abs(j - c + 1)) / np.log(1 + max(c - 1, h)) for j in range(c + h)]
    batch = task.batch([0, 7])
    assert task.dim_x == 3 and batch["xc"].shape[-1] == 3
    for key, rows in (("xc", slice(0, c)), ("xt", slice(c, c + h))):
        np.testing.assert_allclose(batch[key].numpy()[:, :, -1], np.broadcast_to(want[rows], (2, len(want[rows]))),
                                   rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(task.window(7)["inputs"][:, -1], want, rtol=1e-6, atol=1e-7)
    assert want[c - 1] == 0.0 and want[0] == -1.0 and task.get_config()["lead_input"] is True
    assert task.data_description()["x_names"][-1] == "lead"
    # the lead input comes with anchored standardisation; without it the window's mean
    assert task.model_defaults == {"standardise": "last"}
    plain = registry.get("task", "csv")(path=frame, target_columns="y", context_length=c, horizon=h,
                                        lead_input=False)
    assert plain.dim_x == 1 and plain.model_defaults == {"standardise": "window"}


def test_the_csv_task_has_the_lead_input_by_default_and_the_paper_presets_do_not(tmp_path):
    """``csv`` (a user's own series) anchors by default; the named presets keep the papers'
    inputs (the replication rows' protocol)."""
    import pandas as pd

    from taylorformer import registry

    frame = pd.DataFrame({"y": np.sin(np.arange(120.0))})
    task = registry.get("task", "csv")(path=frame, target_columns="y", context_length=6, horizon=3)
    assert task.lead_input and task.dim_x == 2 and task.model_defaults == {"standardise": "last"}
    path = tmp_path / "ett.csv"
    pd.DataFrame({"date": pd.date_range("2020-01-01", periods=400, freq="h").astype(str),
                  "OT": np.arange(400.0)}).to_csv(path, index=False)
    preset = registry.get("task", "ett")(path=str(path), context_length=6, horizon=3)
    assert not preset.lead_input and preset.dim_x == 1


def test_a_run_records_the_lead_input_and_one_saved_without_it_loads_as_before(tmp_path):
    """A run records ``lead_input`` where it differs from the earlier default; a stored
    config without it (a run saved when the default was off) rebuilds the task without
    the lead input, so its model's inputs still match."""
    import json

    import pandas as pd

    from taylorformer import registry
    from taylorformer.workflow import runs

    path = tmp_path / "series.csv"
    pd.DataFrame({"y": np.sin(np.arange(200.0) / 5)}).to_csv(path, index=False)
    config = {"path": str(path), "target_columns": ["y"], "context_length": 8, "horizon": 4}
    new = registry.get("task", "csv")(**config)
    assert runs.recorded_task_config("csv", config, new) == {**config, "lead_input": True}
    old = registry.get("task", "csv")(**runs.stored_task_config("csv", config))
    assert not old.lead_input and old.dim_x == 1
    # an explicit value in a stored config wins; a preset's off value is not recorded
    assert runs.stored_task_config("csv", {**config, "lead_input": True})["lead_input"] is True
    off = registry.get("task", "csv")(**config, lead_input=False)
    assert runs.recorded_task_config("csv", config, off) == config
    assert runs.changed_defaults("gp") == {}
    json.dumps(runs.recorded_task_config("csv", config, new))


def test_mirrored_training_windows_are_the_same_windows_negated_half_the_time():
    """``mirror``: training batch ``i`` holds the windows of the plain task's batch ``i``,
    each either as it is or with ``yc`` and ``yt`` negated (the z-scores mirrored about the
    training mean), the signs fixed by ``(seed, i)``; inputs and evaluation splits unchanged."""
    import pandas as pd

    from taylorformer import registry
    from taylorformer.errors import TaskError

    frame = pd.DataFrame({"y": np.cumsum(np.random.default_rng(0).normal(size=300))})
    make = registry.get("task", "csv")
    plain = make(path=frame, target_columns="y", context_length=8, horizon=4)
    mirrored = make(path=frame, target_columns="y", context_length=8, horizon=4, mirror=True)
    assert mirrored.get_config()["mirror"] is True and make(**{**mirrored.get_config(), "path": frame}).mirror
    signs = []
    for a, b, again in zip(plain.dataset("train", 32, seed=3, num_batches=2),
                           mirrored.dataset("train", 32, seed=3, num_batches=2),
                           mirrored.dataset("train", 32, seed=3, num_batches=2)):
        np.testing.assert_array_equal(a["xc"], b["xc"])
        np.testing.assert_array_equal(b["yt"], again["yt"])
        ratio = (b["yc"].numpy() / a["yc"].numpy())[:, 0, 0]
        sign = np.sign(ratio)
        assert set(np.round(ratio, 6)) <= {-1.0, 1.0}
        np.testing.assert_allclose(b["yt"], a["yt"] * sign[:, None, None])
        signs.extend(sign)
    assert 0.25 < np.mean(np.array(signs) < 0) < 0.75
    later = next(iter(mirrored.dataset("train", 32, seed=3, num_batches=1, start=1)))
    np.testing.assert_array_equal(later["yc"], b["yc"])                  # a resumed stream: the same signs
    for split in ("val", "test"):
        np.testing.assert_array_equal(next(iter(plain.dataset(split, 8)))["yc"],
                                      next(iter(mirrored.dataset(split, 8)))["yc"])
    with pytest.raises(TaskError, match="mirror must be true or false"):
        make(path=frame, target_columns="y", mirror="yes")
