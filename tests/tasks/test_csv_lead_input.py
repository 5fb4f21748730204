"""The ``csv`` task's lead input (``lead_input``, :func:`tasks.csv_series.window_leads`)
against a NumPy statement of it, in batches and ``window``; the config round trip, the
input's name, and the anchored standardisation (``standardise: last``) it brings as the
task's model default."""
import numpy as np


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
    plain = registry.get("task", "csv")(path=frame, target_columns="y", context_length=c, horizon=h)
    assert plain.dim_x == 1 and plain.model_defaults == {"standardise": "window"}
