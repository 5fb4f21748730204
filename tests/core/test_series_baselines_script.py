"""benchmarks/series_baselines.py's own computations: the demand series it writes from
pmdarima's ``taylor.py`` and its volatility check, against a NumPy statement of both."""
import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("series_baselines", ROOT / "benchmarks" / "series_baselines.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _taylor_py(path, values):
    """A file laid out as pmdarima's ``datasets/taylor.py``: the values in one list literal."""
    body = ",\n        ".join(str(int(v)) for v in values)
    path.write_text(f'"""Half-hourly demand."""\nimport numpy as np\n\n\ndef load_taylor():\n'
                    f"    rslt = np.array([\n        {body}])\n    return rslt\n")
    return path


def test_demand_csv_dates_every_value_from_the_first_half_hour(script, tmp_path):
    values = np.arange(2000) + 20_000
    frame = pd.read_csv(script.demand_csv(_taylor_py(tmp_path / "taylor.py", values), tmp_path))
    assert list(frame.columns) == ["date", "demand_mw"] and frame["demand_mw"].tolist() == values.tolist()
    dates = pd.to_datetime(frame["date"])
    assert dates[0] == pd.Timestamp("2000-06-05 00:00") and (dates.diff()[1:] == pd.Timedelta("30min")).all()
    (tmp_path / "other.py").write_text("x = [1, 2, 3]\n")
    with pytest.raises(ValueError, match="other.py: expected one list of demand values"):
        script.demand_csv(tmp_path / "other.py", tmp_path)


def _crps(y, mean, sd):
    z = (y - mean) / sd
    return sd * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / math.sqrt(math.pi))


def test_volatility_check_scores_both_spreads_as_numpy_does(script, tmp_path):
    """Persistence with the training rows' rms h-step change and with each window's own
    rms one-step change times sqrt(h), over the csv task's test windows, in the data's units."""
    from taylorformer.task import make_task

    rng = np.random.default_rng(0)
    volatility = np.where(np.arange(2000) < 1500, 20.0, 60.0)  # calmer in training than in the test rows
    values = np.round(30_000 + np.cumsum(rng.normal(0, volatility)))
    sources = {"demand": _taylor_py(tmp_path / "taylor.py", values)}
    found = script.volatility_check("demand", None, tmp_path, sources)

    task = make_task(*script.task_of("demand", None, tmp_path, sources))
    c, h = task.context_length, task.horizon
    lo, hi = task.split_bounds["train"]
    train = values[lo:hi]
    leads = np.arange(1, h + 1)
    sd = np.array([np.sqrt(np.mean((train[k:] - train[:-k]) ** 2)) for k in leads])
    fixed, own = [], []
    for s in task.window_starts("test"):
        context, target = values[s:s + c], values[s + c:s + c + h]
        fixed.append(_crps(target, context[-1], sd).mean())
        own.append(_crps(target, context[-1], np.sqrt(np.mean(np.diff(context) ** 2)) * np.sqrt(leads)).mean())
    assert found["windows"] == len(fixed)
    np.testing.assert_allclose(found["persistence"][0], np.mean(fixed), rtol=1e-4)
    np.testing.assert_allclose(found["window_volatility"][0], np.mean(own), rtol=1e-4)
    np.testing.assert_allclose(found["gap"][0], np.mean(own) - np.mean(fixed), rtol=1e-3)
    assert found["gap"][0] < 0  # the test rows are more volatile than training: the window's spread wins
