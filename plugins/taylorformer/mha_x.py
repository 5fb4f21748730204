"""MHA-X (``mha-x``, kind ``attention``): the Taylorformer's attention on x-only features.

Its queries and keys are functions of x only; in the encoder's last MHA-X layer the
values are y (``layer(queries, keys, values=y)``), so the stream's output is a learned
linear smoothing of the observed y (softmax weights from x only), as a GP mean is. The
score is the contract's default q.k/sqrt(d) and the value projection has no bias, so
the output is affine in the values: nothing to override.
"""
from taylorformer.attention import Attention


class MHAX(Attention):
    """MHA-X: scaled dot-product attention whose values may differ from its keys."""
