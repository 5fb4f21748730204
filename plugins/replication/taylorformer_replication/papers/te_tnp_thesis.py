"""Rows of the thesis "Unifying Transformers and Convolutional Neural Processes"
(Sivaraya 2024), the source of the TE-TNP's relative-attention variants: every number its
two tables print, none of them runnable, because no table states a protocol that can be
reproduced.

What the thesis reports as numbers (``../shared/docs/papers/thesis-unifying-transformers-and-convnps.txt``):

* Table 5.4.1: inference memory (MB) of the ConvNP and the TE-TNP on 1-D data at eight
  (Nc, Nt) pairs. A memory measurement, not a metric of a replication row (rows score
  ``loglik``, ``nll`` or ``mse`` on tasks); the device, batch size, model size and
  precision behind the megabytes are not stated either.
* Table 6.3.1: "validation loss" of the ConvNP (1.168) and the TE-TNP (1.134) on a 2-D
  GP "after training for 3 hours using 1 million parameters models and 64 context
  points". Not reproducible from the text: the training budget is wall time on unstated
  hardware (no steps, batch size, optimiser or learning rate); the loss is not defined
  (an NLL, but per target point or per task is not said); the number of targets, the
  input range and the observation noise are not given (Sec. 5.1.1 writes the kernel
  without noise); the lengthscale prior reads ``l ~ U(log(-0.101), log(0.101))``, which
  is not a distribution (the log of a negative number); and the TE-TNP's sizes are given
  only as "1 million parameters" with a "high token embedding dimension, high number of
  heads and low head embedding dimension" (Sec. 5.3).

The ConvNP column names the ``convcnp`` preset and the TE-TNP column ``te-tnp``; both rows
stay ``not implemented`` for the reasons above whatever the registry holds. Every other
comparison in the thesis (relative attention functions, Sec. 5.2; size selection, Sec. 5.3;
TNP vs ConvNP, Sec. 5.4; pre vs post relative attention, Sec. 6.2; restricted and full 2-D
sawtooth, Secs. 6.3.2-6.3.3) is a figure of validation-loss curves or of samples, with no
number printed. Its variants are available as spec overrides of the ``te-tnp`` preset
(:mod:`taylorformer.plugins.te_tnp.presets`) and its sawtooth data as the ``sawtooth``
tasks, so a runnable row can be added here once a protocol is known (e.g. from the
author's code). Registered with the TE-TNP paper's rows (:mod:`taylorformer_replication.papers`).
"""
from taylorformer_replication.experiment import Row, metric_not_scored

PAPER = "Unifying Transformers and ConvNPs (Sivaraya 2024, thesis)"

MODELS = {"ConvNP": "convcnp", "TETNP": "te-tnp"}
#: Table 5.4.1: (Nc, Nt) -> (ConvNP MB, TETNP MB)
MEMORY = {(10, 10): (18, 13), (100, 10): (16, 18), (1000, 10): (16, 339), (5000, 10): (124, 9357),
          (10, 1000): (36, 399), (100, 1000): (36, 469), (1000, 1000): (36, 1510), (5000, 1000): (124, 13480)}
#: Table 6.3.1: the validation loss after 3 hours of training
VALIDATION_LOSS = {"ConvNP": 1.168, "TETNP": 1.134}
PROTOCOL_GAP = ("the thesis states no reproducible protocol: a 3-hour budget on unstated hardware (no steps, batch, "
                "optimiser or learning rate), an undefined loss, no number of targets, input range or noise, a "
                "lengthscale prior U(log(-0.101), log(0.101)) that is no distribution, and '1 million parameters' "
                "without sizes")


def memory_row(label, nc, nt):
    model = MODELS[label]
    return Row(id=f"thesis-{model}-memory-nc{nc}-nt{nt}", paper=PAPER, table="Table 5.4.1",
               dataset=f"1-D data, Nc = {nc}, Nt = {nt} ({label})",
               protocol="inference memory on 1-D data (Sec. 5.4.1); device, batch, model size and precision not stated",
               model=model, task="gp-te-tnp", metric="memory-mb",
               paper_value=float(MEMORY[nc, nt][list(MODELS).index(label)]), paper_decimals=0,
               paper_error_kind="none printed", not_implemented=metric_not_scored("memory-mb"))


def loss_row(label):
    model = MODELS[label]
    return Row(id=f"thesis-{model}-gp2d-validation-loss", paper=PAPER, table="Table 6.3.1",
               dataset=f"2-D GP, 64 context points ({label})",
               protocol="validation loss after 3 hours of training, models of about 1 million parameters (Sec. 6.3.1)",
               model=model, task="gp", metric="validation-loss", paper_value=VALIDATION_LOSS[label], paper_decimals=3,
               paper_error_kind="none printed", not_implemented=PROTOCOL_GAP)


ROWS = [memory_row(label, nc, nt) for label in MODELS for nc, nt in MEMORY] + [loss_row(label) for label in MODELS]

#: the numbers each table prints: Table 5.4.1, 2 models x 8 (Nc, Nt) pairs; Table 6.3.1, 2 models
TABLES = {"Table 5.4.1": 16, "Table 6.3.1": 2}
