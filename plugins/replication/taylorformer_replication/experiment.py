"""The records of a published table row (registry kind ``experiment``): :class:`Row` with
its :class:`Training` and :class:`Evaluation` protocols and :class:`SmallBudget`.

Plain frozen dataclasses that check their values where they enter. A :class:`Row` is a
:class:`taylorformer.plugin_api.ExperimentRecord`: the registry checks the kind by that
contract class, without importing this package. A plugin imports these names from
:mod:`taylorformer_replication`.
"""
import dataclasses

from taylorformer.checks import check_choice, check_int, check_number
from taylorformer.errors import SpecError
from taylorformer.plugin_api import ExperimentRecord

#: metric name -> (higher is better, description)
METRICS = {
    "loglik": (True, "log-likelihood per target point"),
    "nll": (False, "negative log-likelihood per target point"),
    "mse": (False, "mean squared error of the predictive mean per target point"),
}
#: metrics the papers print that replicate does not score: name -> (higher is better,
#: description). Only a row that is not implemented (:attr:`Row.not_implemented`) names one.
PRINTED_METRICS = {
    "mae": (False, "mean absolute error of the predictive mean"),
    "rmse": (False, "root mean squared error of the predictive mean"),
    "coverage-95": (True, "coverage of the 95% predictive interval (the fraction of targets inside it)"),
    "train-minutes": (False, "training wall time in minutes on the authors' GPU"),
    "train-hours": (False, "wall time of the first 200 training epochs in hours on the authors' GPU"),
    "infer-batches-per-s": (True, "inference batches per second on the authors' GPU"),
    "infer-seconds": (False, "inference wall time in seconds on the authors' GPU"),
    "train-gflops": (False, "compiled FLOPs of one training step (JAX cost analysis), in GFLOPs"),
    "infer-gflops": (False, "compiled FLOPs of one inference step (JAX cost analysis), in GFLOPs"),
    "memory-mb": (False, "inference memory in MB"),
    "validation-loss": (False, "validation loss (undefined: per point or per task is not said)"),
    "permutation-std": (False, "permutation spread (the mean over test sequences of the standard deviation "
                               "of the log-likelihood over 40 orders of the targets)"),
}
OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("constant", "cosine")
OWNER = "experiment"
#: the baselines a row can name (the keys of taylorformer.workflow.baselines.BASELINES; kept
#: here so that the records import no NumPy)
BASELINE_NAMES = ("persistence", "seasonal-naive", "exact-gp", "context-frequency", "context-mean")
#: baselines that bound the model from above rather than give a level it should beat
CEILINGS = ("exact-gp",)
#: most decimals a row's printed paper value can have (:attr:`Row.paper_decimals`)
MAX_DECIMALS = 10


@dataclasses.dataclass(frozen=True)
class Training:
    """The paper's training protocol. ``optimizer`` ``adam`` is AdamW with weight decay 0;
    ``clip_norm`` is a global-norm clip (what :class:`taylorformer.workflow.training.TrainConfig`
    offers; a paper's value clipping is recorded in the row's notes); ``schedule``
    ``cosine`` decays from ``learning_rate`` to ``min_learning_rate`` at ``steps``;
    ``num_permutations``: random target orders per task and step (autoregressive models);
    the model evaluated is the checkpoint with the best validation log-likelihood."""

    steps: int
    batch_size: int
    optimizer: str
    learning_rate: float
    schedule: str = "constant"
    min_learning_rate: float = None
    weight_decay: float = 0.0
    clip_norm: float = 0.5
    warmup_steps: int = 0
    num_permutations: int = 0
    val_every: int = 1000
    val_batches: int = 8

    def __post_init__(self):
        owner = f"{OWNER} training"
        for name in ("steps", "batch_size", "val_every", "val_batches"):
            check_int(owner, name, getattr(self, name))
        check_int(owner, "warmup_steps", self.warmup_steps, minimum=0, maximum=self.steps - 1)
        check_int(owner, "num_permutations", self.num_permutations, minimum=0)
        check_choice(owner, "optimizer", self.optimizer, OPTIMIZERS)
        check_choice(owner, "schedule", self.schedule, SCHEDULES)
        for name in ("learning_rate", "clip_norm"):
            check_number(owner, name, getattr(self, name), low=0, low_open=True)
        check_number(owner, "weight_decay", self.weight_decay, low=0)
        if self.optimizer == "adam" and self.weight_decay:
            raise SpecError(f"{owner} 'weight_decay' must be 0 with optimizer 'adam' (use 'adamw'), "
                            f"got {self.weight_decay!r}")
        check_number(owner, "min_learning_rate", self.min_learning_rate, low=0,
                     optional=self.schedule == "constant")


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The evaluation protocol: ``num_tasks`` tasks (``None``: every task of the split, for
    tasks with a finite split such as forecasting windows or test images) of ``split``,
    ``batch_size`` at a time, on ``task`` (default: the row's task) with the row's task
    config updated by ``task_config`` (e.g. a test-time shift)."""

    num_tasks: int = None
    split: str = "test"
    batch_size: int = 16
    task: str = None
    task_config: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        owner = f"{OWNER} evaluation"
        check_int(owner, "num_tasks", self.num_tasks, optional=True)
        check_int(owner, "batch_size", self.batch_size)
        check_choice(owner, "split", self.split, ("val", "test"))
        if not isinstance(self.task_config, dict):
            raise SpecError(f"{owner} 'task_config' must be a dict, got {self.task_config!r}")


@dataclasses.dataclass(frozen=True)
class SmallBudget:
    """The ``small`` budget: ``steps`` training steps and ``eval_tasks`` evaluation tasks, a
    documented fraction of the paper's training (``why`` says how it was sized; the wall
    time each recorded run took is in the results file, not promised here)."""

    steps: int
    eval_tasks: int
    why: str = ""

    def __post_init__(self):
        check_int(f"{OWNER} small budget", "steps", self.steps)
        check_int(f"{OWNER} small budget", "eval_tasks", self.eval_tasks)


@dataclasses.dataclass(frozen=True)
class Row(ExperimentRecord):
    """One published number and the protocol that reproduces it (see :mod:`taylorformer_replication.replication`).

    ``paper_error`` is the ``+-`` the paper prints next to ``paper_value`` and
    ``paper_error_kind`` what it is (e.g. "std over 5 runs", "standard error"); ``run``
    names the training run (rows with the same ``run`` share one; default ``id``).

    ``baselines``: names of :data:`taylorformer.workflow.baselines.BASELINES` scored on the row's
    evaluation tasks (``"seasonal-naive:96"`` names the season); with none,
    ``no_baseline`` says why. ``protocol_version`` counts the changes of the row's
    protocol; a result recorded under another version is not comparable, and
    ``earlier_protocols`` (version -> how it differed) says why. ``not_comparable``: why
    the row as defined is not comparable with the paper (empty: it is). ``paper_scale``:
    where the paper's evaluation code scales its per-task mean (e.g. divides a sum over
    windows by more rows than windows), the factor it applied, so that ``paper_value /
    paper_scale`` is comparable with our per-task mean; ``paper_scale_why`` cites the code.
    ``paper_decimals``: the decimals the paper prints its value and ``+-`` with, where a
    float cannot keep them (``-0.50 +- 0.00``: 2; None: as ``:g`` prints the value), which
    set the rounding tolerance of :func:`taylorformer_replication.replication.status`.

    ``not_implemented``: why the row cannot be run here whatever the registry holds (a model
    the library lacks, data that cannot be obtained offline, a protocol the paper does not
    state, a metric replicate does not score); such a row needs no ``task``, ``training``,
    ``evaluation`` or ``small`` and may name a :data:`PRINTED_METRICS` metric. A row whose
    ``model`` is no registered preset is not implemented either, decided at list time
    (:func:`taylorformer_replication.replication.implementation_gap`).
    """

    id: str
    paper: str
    table: str
    dataset: str
    protocol: str
    model: str
    task: str
    metric: str
    paper_value: float
    training: Training = None
    evaluation: Evaluation = None
    small: SmallBudget = None
    paper_error: float = None
    paper_error_kind: str = ""
    model_overrides: dict = dataclasses.field(default_factory=dict)
    task_config: dict = dataclasses.field(default_factory=dict)
    run: str = None
    notes: tuple = ()
    baselines: tuple = ()
    no_baseline: str = ""
    protocol_version: int = 1
    earlier_protocols: dict = dataclasses.field(default_factory=dict)
    not_comparable: str = ""
    paper_scale: float = None
    paper_scale_why: str = ""
    paper_decimals: int = None
    not_implemented: str = ""

    def __post_init__(self):
        if not (isinstance(self.id, str) and self.id and self.id == self.id.strip().lower()
                and " " not in self.id):
            raise SpecError(f"{OWNER} 'id' must be a non-empty lower-case name without spaces, got {self.id!r}")
        owner = f"{OWNER} {self.id!r}"
        if not isinstance(self.not_implemented, str):
            raise SpecError(f"{owner} 'not_implemented' must be a string, got {self.not_implemented!r}")
        check_choice(owner, "metric", self.metric,
                     tuple(METRICS) + (tuple(PRINTED_METRICS) if self.not_implemented else ()))
        check_number(owner, "paper_value", self.paper_value)
        check_number(owner, "paper_error", self.paper_error, low=0, optional=True)
        check_int(owner, "paper_decimals", self.paper_decimals, minimum=0, maximum=MAX_DECIMALS, optional=True)
        for name, kind in (("training", Training), ("evaluation", Evaluation), ("small", SmallBudget)):
            value = getattr(self, name)
            if not isinstance(value, kind) and not (value is None and self.not_implemented):
                raise SpecError(f"{owner} {name!r} must be a {kind.__name__}, got {value!r}")
        for name in ("model_overrides", "task_config"):
            if not isinstance(getattr(self, name), dict):
                raise SpecError(f"{owner} {name!r} must be a dict, got {getattr(self, name)!r}")
        if self.small is not None and self.training is not None and self.small.steps > self.training.steps:
            raise SpecError(f"{owner}: the small budget's {self.small.steps} steps exceed the "
                            f"paper's {self.training.steps}")
        if not isinstance(self.notes, tuple) or not all(isinstance(n, str) for n in self.notes):
            raise SpecError(f"{owner} 'notes' must be a tuple of strings, got {self.notes!r}")
        if not isinstance(self.baselines, tuple) or not all(
                isinstance(b, str) and b.split(":")[0] in BASELINE_NAMES for b in self.baselines):
            raise SpecError(f"{owner} 'baselines' must be a tuple of names of {list(BASELINE_NAMES)} "
                            f"(seasonal-naive:SEASON), got {self.baselines!r}")
        for name in ("no_baseline", "not_comparable", "paper_scale_why"):
            if not isinstance(getattr(self, name), str):
                raise SpecError(f"{owner} {name!r} must be a string, got {getattr(self, name)!r}")
        check_int(owner, "protocol_version", self.protocol_version)
        if not isinstance(self.earlier_protocols, dict) or not all(
                isinstance(k, int) and 1 <= k < self.protocol_version and isinstance(v, str)
                for k, v in self.earlier_protocols.items()):
            raise SpecError(f"{owner} 'earlier_protocols' must map earlier versions (ints below "
                            f"{self.protocol_version}) to descriptions, got {self.earlier_protocols!r}")
        check_number(owner, "paper_scale", self.paper_scale, low=0, low_open=True, optional=True)
        if (self.paper_scale is None) != (not self.paper_scale_why):
            raise SpecError(f"{owner}: 'paper_scale' and 'paper_scale_why' go together")

    @property
    def higher_is_better(self):
        return {**METRICS, **PRINTED_METRICS}[self.metric][0]

    @property
    def run_name(self):
        return self.run or self.id

    @property
    def summary(self):
        """One line: paper, table, dataset, model and the paper's value."""
        return f"{self.paper} {self.table}: {self.dataset}, {self.model}, {self.metric} {format_value(self)}"

    def model_spec(self):
        """The model spec: the preset with the row's overrides. A row reproduces a paper's
        protocol, whose data are standardised globally: ``standardise`` is ``"global"`` unless
        the row says otherwise (a forecasting task would default to per-window)."""
        return {"preset": self.model, "standardise": "global", **self.model_overrides}

    @property
    def paper_comparable(self):
        """``(value, error)`` of the paper comparable with our per-task mean: the printed
        values divided by :attr:`paper_scale` where the paper's code scaled them."""
        scale = self.paper_scale or 1.0
        return self.paper_value / scale, None if self.paper_error is None else self.paper_error / scale

    def eval_task(self):
        """``(task name, task config)`` of the evaluation."""
        return self.evaluation.task or self.task, {**self.task_config, **self.evaluation.task_config}


def register_rows(register, rows):
    """Register ``rows`` through a ``register_experiments`` hook's callback (description:
    :attr:`Row.summary`)."""
    for row in rows:
        register(row.id, row, description=row.summary)


#: why a metric of :data:`PRINTED_METRICS` has no scorer here, by kind
UNSCORED = {
    "time": ("a wall-clock time on the authors' hardware, not a score of the model's predictions; replicate "
             "records each run's own wall time (wall_s) instead"),
    "flops": "a compiled-FLOP estimate of the authors' code (JAX cost analysis), not a score of the model's predictions",
    "memory": ("an inference memory measurement on an unstated device, batch, model size and precision, not a "
               "score of the model's predictions"),
}


def metric_not_scored(metric):
    """The ``not_implemented`` reason of a row whose metric (:data:`PRINTED_METRICS`) replicate does not score."""
    kind = ("time" if metric.startswith(("train-", "infer-")) and not metric.endswith("gflops") else
            "flops" if metric.endswith("gflops") else "memory" if metric == "memory-mb" else None)
    if kind:
        return UNSCORED[kind]
    return f"replicate scores no {PRINTED_METRICS[metric][1]}; it scores {', '.join(METRICS)}"


def format_value(row):
    """The paper's value as printed: ``4.13 +- 0.03`` (``-0.50 +- 0.00`` where the row
    gives :attr:`Row.paper_decimals`)."""
    def printed(value):  # a value with more decimals than the row's (an error of 0.005) keeps them
        decimals = row.paper_decimals
        return f"{value:g}" if decimals is None or round(value, decimals) != value else f"{value:.{decimals}f}"
    return printed(row.paper_value) + ("" if row.paper_error is None else f" +- {printed(row.paper_error)}")


def printed_decimals(row):
    """The decimals of the paper's value as printed: :attr:`Row.paper_decimals`, else those
    of ``f"{paper_value:g}"`` (0 in exponent notation)."""
    if row.paper_decimals is not None:
        return row.paper_decimals
    text = f"{row.paper_value:g}"
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0
