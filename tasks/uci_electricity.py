"""Hourly electricity use of one client of the UCI ElectricityLoadDiagrams20112014 file
(plugin ``builtin-uci-electricity``): the Taylorformer paper's electricity task (Sec. 4.2).

The file ``LD2011_2014.txt`` (UCI dataset 321, the named dataset ``uci-electricity`` of
:mod:`taylorformer.tasks.datasets`, fetched from its zip archive on first use) holds the
load of 370 Portuguese clients ``MT_001`` .. ``MT_370`` in kW, one row every 15 minutes
from ``2011-01-01 00:15:00`` to ``2015-01-01 00:00:00`` (140,256 rows), ``;``-separated
with ``,`` as the decimal mark; a time stamp ends its quarter-hour (every day has 96
rows). It is not the 321-client hourly file of Lai et al. (the ``electricity`` dataset).

:class:`UCIElectricityTask` reads the date column and one ``client`` column and
aggregates them to hours: the hour starting at ``h`` is the mean of the four quarter-hours
stamped ``h:15``, ``h:30``, ``h:45`` and ``(h+1):00`` (kW averaged over the hour = kWh used
in it). It keeps the hours starting in ``[start, end)`` (default 2013-01-01 to
2015-01-01: "hourly electricity consumption data from 2013 to 2014", 17,520 hours), each
of which must have its four quarter-hours; the file's daylight-saving artefacts (the
March change day's 01:00-02:00 is zero, the October one's holds two hours) are kept as
they are. The hourly series then follows the forecasting protocol of
:class:`taylorformer.tasks.csv_series.CSVSeriesTask` (chronological split, z-scores of the
training rows, x in [-1, 1] per window, every window of val/test), with the target
column named after the client and the hour's start as its date.
"""
import numpy as np

from taylorformer.errors import TaskError, close_matches
from taylorformer.hookspecs import hookimpl
from taylorformer.tasks.csv_series import CSVSeriesTask, DataFileNotFoundError

#: the file inside the UCI archive (the named dataset's member)
UCI_FILE = "LD2011_2014.txt"
QUARTERS_PER_HOUR = 4
#: the Taylorformer paper's client: "client number 322 out of the 370", which the authors'
#: code takes as row 322 (0-based) of its client-by-time array (data[322:323]): MT_323
PAPER_CLIENT = "MT_323"
PAPER_PERIOD = ("2013-01-01", "2015-01-01")


def _timestamp(field, value):
    """``value`` (a date string or datetime) as a ``pandas.Timestamp`` (TaskError otherwise)."""
    import pandas as pd

    if not isinstance(value, (str, pd.Timestamp)) or (isinstance(value, str) and not value.strip()):
        raise TaskError(f"uci-electricity task: {field} must be a date such as '2013-01-01', got {value!r}")
    try:
        stamp = pd.Timestamp(value)
    except (ValueError, TypeError) as exc:
        raise TaskError(f"uci-electricity task: {field} {value!r} is not a date ({exc})") from None
    if stamp is pd.NaT or stamp.tz is not None:
        raise TaskError(f"uci-electricity task: {field} must be a date without a time zone (the file's "
                        f"Portuguese local time), got {value!r}")
    return stamp


def read_hourly(path, client, start, end):
    """``pandas.DataFrame`` with columns ``date`` (the hour's start) and ``client`` (kW
    averaged over the hour) of the UCI file ``path`` for the hours starting in
    ``[start, end)``; a :class:`TaskError` naming the file where it lacks the client,
    its dates or values do not parse, its dates do not increase, an hour of the range lacks
    a quarter-hour, or the file does not cover the range. An empty field is a missing
    value: its hour is NaN (masked by the task's ``missing="mask"``)."""
    import pandas as pd

    where = f"data file {str(path)!r}"
    try:
        header = pd.read_csv(path, sep=";", nrows=0).columns
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"cannot read {where} as the UCI electricity file ({type(exc).__name__}: {exc})") from None
    if client not in header[1:]:
        hint = close_matches(client, header[1:])
        raise TaskError(f"{where} has no client column {client!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
                        + f" It has {len(header) - 1} client columns ({', '.join(map(str, header[1:4]))}, ...).")
    try:  # only an empty field is missing ("n/a" and the like are errors, below)
        df = pd.read_csv(path, sep=";", usecols=[0, header.get_loc(client)], dtype=str, keep_default_na=False,
                         na_values=[""])
    except (ValueError, OSError) as exc:
        raise TaskError(f"cannot read {where} as the UCI electricity file: {exc}") from None
    stamps = pd.to_datetime(df.iloc[:, 0], format="%Y-%m-%d %H:%M:%S", errors="coerce")
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        raise TaskError(f"{where}: {bad.size} time stamp(s) do not read as 'YYYY-MM-DD HH:MM:SS', the first "
                        f"{df.iloc[bad[0], 0]!r} in data row {bad[0]} (0-based, header excluded)")
    back = np.flatnonzero(np.diff(stamps.to_numpy()) <= np.timedelta64(0))
    if back.size:
        raise TaskError(f"{where}: the time stamps do not increase after data row {back[0]} ({stamps.iloc[back[0]]} "
                        f"then {stamps.iloc[back[0] + 1]}; 0-based, header excluded)")
    values = pd.to_numeric(df[client].str.replace(",", ".", regex=False), errors="coerce")
    bad = np.flatnonzero(values.isna().to_numpy() & df[client].notna().to_numpy())
    if bad.size:
        raise TaskError(f"{where}: client column {client!r} holds {bad.size} non-numeric value(s), the first "
                        f"{df[client].iloc[bad[0]]!r} in data row {bad[0]} (0-based, header excluded)")
    hour = (stamps - pd.Timedelta(minutes=15)).dt.floor("h")  # a stamp ends its quarter-hour
    keep = ((hour >= start) & (hour < end)).to_numpy()
    hours = pd.date_range(start, end, freq="h", inclusive="left")
    counts = hour[keep].value_counts().reindex(hours, fill_value=0)
    short = np.flatnonzero(counts.to_numpy() != QUARTERS_PER_HOUR)
    if short.size:
        covered = f"{stamps.iloc[0]} .. {stamps.iloc[-1]}" if len(stamps) else "no rows"
        first = hours[short[0]]
        raise TaskError(f"{where} (time stamps {covered}) does not hold the four quarter-hours of every hour "
                        f"in [{start}, {end}): {short.size} of {len(hours)} hours have another count, the first "
                        f"{first} with {int(counts.iloc[short[0]])}; pass start/end inside the file's range")
    # increasing stamps, four per hour: the kept rows are the hours' quarters in order; an hour with
    # an empty field is NaN (a missing value, which missing="mask" masks)
    kw = values[keep].to_numpy(np.float64).reshape(len(hours), QUARTERS_PER_HOUR).mean(1)
    return pd.DataFrame({"date": hours, client: kw})


class UCIElectricityTask(CSVSeriesTask):
    """Forecast the hourly load of one client of the UCI file (module docstring).

    Args:
        path: a local ``LD2011_2014.txt`` (wins over the named dataset ``uci-electricity``).
        client: the client's column, ``"MT_001"`` .. ``"MT_370"`` (default
            :data:`PAPER_CLIENT`).
        start, end: the hours kept start in ``[start, end)`` (dates, the file's local time).
        split, context_length, horizon, eval_stride, missing: as in
            :class:`~taylorformer.tasks.csv_series.CSVSeriesTask`.
    """

    name = "uci-electricity"
    changed_defaults = {}  # the paper's inputs: no lead input, whatever the csv task's default

    def __init__(self, path=None, client=PAPER_CLIENT, start=PAPER_PERIOD[0], end=PAPER_PERIOD[1],
                 split=(0.69, 0.11, 0.20), context_length=96, horizon=96, eval_stride=1, missing="mask"):
        if not (isinstance(client, str) and client.strip() == client and client):
            raise TaskError(f"uci-electricity task: client must be a column name such as 'MT_323', got {client!r}")
        if path is not None and not (isinstance(path, str) and path):
            raise TaskError(f"uci-electricity task: path must be the name of a local {UCI_FILE}, got {path!r}")
        self.client = client
        self.start, self.end = _timestamp("start", start), _timestamp("end", end)
        if self.end <= self.start:
            raise TaskError(f"uci-electricity task: end {end!r} must be after start {start!r}")
        super().__init__(path=path, dataset=None if path is not None else "uci-electricity",
                         target_columns=[client], date_column="date", split=split,
                         context_length=context_length, horizon=horizon, eval_stride=eval_stride,
                         missing=missing, lead_input=False)

    def _read_table(self, frame):
        """``(hourly DataFrame, where)`` of the UCI file (:func:`read_hourly`)."""
        path = self.resolved_path
        if path.is_dir():  # the named dataset: the folder of the archive's checked member
            path = path / UCI_FILE
            if not path.is_file():
                raise DataFileNotFoundError(f"dataset 'uci-electricity': {path} is missing")
        return read_hourly(path, self.client, self.start, self.end), f"data file {str(path)!r}"

    def get_config(self):
        """The options (JSON)."""
        return {"path": self.path, "client": self.client, "start": str(self.start), "end": str(self.end),
                "split": list(self.split), "context_length": self.context_length, "horizon": self.horizon,
                "eval_stride": self.eval_stride, "missing": self.missing}


@hookimpl
def register_tasks(register):
    register("uci-electricity", UCIElectricityTask,
             description=("UCI ElectricityLoadDiagrams20112014 (370 clients, 15-minute kW): one client "
                          f"({PAPER_CLIENT}) aggregated to hours, 2013-2014, split 69/11/20, context 96, horizon 96"))
