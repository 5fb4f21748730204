#!/usr/bin/env bash
# docs/practitioners-guide.md end to end: the commands it shows, from two raw files to the
# tables and figures it quotes. One hourly series (ETTh1.csv, the ETT data set's transformer
# oil temperature) and one spatial survey (Meuse, topsoil zinc at 155 points: the R package
# sp's data, GPL-3; `pip download scikit-gstat==1.0.26 --no-deps` holds it as
# skgstat/data/samples/meuse.txt).
#
#   bash docs/figures/practitioner_guide.sh WORK_DIR ETTh1.csv meuse.txt
#
# WORK_DIR gets the runs, the JSON results and the figures; the figures the guide shows
# are then copied to docs/figures/guide-*.png. TAYLORFORMER and PYTHON name the command
# and the interpreter (default: those on PATH).
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 WORK_DIR ETTh1.csv meuse.txt" >&2; exit 2; }
FIGURES=$(cd "$(dirname "$0")" && pwd)
ETT=$(realpath "$2")
MEUSE=$(realpath "$3")
mkdir -p "$1" && cd "$1"
TFM=${TAYLORFORMER:-taylorformer}
PY=${PYTHON:-python}

# ---- one series: the last 96 hours held back as the truth of one forecast
head -n -96 "$ETT" > history.csv
{ head -n 1 "$ETT"; tail -n 96 "$ETT"; } > truth.csv
[ -f runs/oil-temperature/best.keras ] || $TFM train --task csv --no-eval --steps 2000 --time-budget 3600 \
    --task-config "{\"path\": \"$ETT\", \"date_column\": \"date\", \"target_columns\": [\"OT\"]}" \
    --out runs/oil-temperature > train-series.log
$TFM evaluate runs/oil-temperature --calibration --calibration-plot calibration-series.png \
    > evaluate-series.json 2> evaluate-series.txt
$TFM forecast runs/oil-temperature --history history.csv --truth truth.csv --horizon 96 \
    --output forecast.csv --plot forecast.png > forecast.txt

# ---- one survey: log zinc at 155 points, x and y in metres (RD New)
$PY - "$MEUSE" <<'EOF'
import sys

import numpy as np
import pandas as pd

raw = pd.read_csv(sys.argv[1])
pd.DataFrame({"x": raw["x"], "y": raw["y"], "log_zinc": np.log(raw["zinc"])}).to_csv("meuse.csv", index=False)
EOF
[ -f runs/zinc/best.keras ] || $TFM train --task fitted-gp --no-eval --steps 1500 --time-budget 3600 \
    --task-config '{"path": "meuse.csv", "x_columns": ["x", "y"], "target_columns": ["log_zinc"],
                    "units": {"x": "m", "y": "m"}}' \
    --out runs/zinc > train-survey.log 2>&1
$TFM evaluate runs/zinc --cross-validate 5 > cross-validation.json 2> cross-validation.txt
$PY - <<'EOF'
import numpy as np
import pandas as pd
import xarray as xr

survey = pd.read_csv("meuse.csv")
pad = 500.0  # metres beyond the survey on every side: where kriging's spread grows
x = np.arange(survey.x.min() - pad, survey.x.max() + pad, 40.0)
y = np.arange(survey.y.min() - pad, survey.y.max() + pad, 40.0)
grid = xr.Dataset(coords={"y": ("y", y, {"units": "m"}), "x": ("x", x, {"units": "m"})})
grid.to_netcdf("grid.nc")
EOF
$TFM predict runs/zinc --grid grid.nc --context meuse.csv --x-columns x,y --y-columns log_zinc \
    --output map.nc --plot map.png > predict-map.txt

cp forecast.png "$FIGURES/guide-forecast.png"
cp calibration-series.png "$FIGURES/guide-calibration.png"
cp map.png "$FIGURES/guide-map.png"
echo "done: $(pwd)"
