"""Rows of the thesis "Unifying Transformers and Convolutional Neural Processes"
(Sivaraya 2024), the source of the TE-TNP's relative-attention variants: none yet, because
no table of the thesis states a protocol that can be reproduced.

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

Every other comparison in the thesis (relative attention functions, Sec. 5.2; size
selection, Sec. 5.3; TNP vs ConvNP, Sec. 5.4; pre vs post relative attention, Sec. 6.2;
restricted and full 2-D sawtooth, Secs. 6.3.2-6.3.3) is a figure of validation-loss
curves or of samples, with no number printed. Its variants are available as spec
overrides of the ``te-tnp`` preset (:mod:`taylorformer.plugins.te_tnp.presets`) and its sawtooth data as the
``sawtooth`` tasks, so a row can be added here once a protocol is known (e.g. from the
author's code). Registered with the TE-TNP paper's rows (:mod:`taylorformer_replication.papers`).
"""

PAPER = "Unifying Transformers and ConvNPs (Sivaraya 2024, thesis)"

#: no table states a reproducible protocol (see the module docstring)
ROWS = []
