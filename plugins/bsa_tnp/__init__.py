"""BSA-TNP family (plugin ``builtin-bsa-tnp``; Jenson et al. 2025): biased scan attention.

Modules: :mod:`.attention` (``biased``: q.k/sqrt(d) + per-head RBF networks of group
distances), :mod:`.geometry` (Euclidean and great-circle distances), :mod:`.kr_block`
(``kr-block`` encoder), :mod:`.presets`.
"""
from taylorformer.hookspecs import hookimpl

from .attention import BiasedAttention
from .kr_block import KRBlockEncoder
from .presets import BSA_TNP


@hookimpl
def register_attention(register):
    register("biased", BiasedAttention, aliases=["biased-attention"],
             description="Biased attention (BSA-TNP): q.k/sqrt(d) + per-head RBF networks of "
                         "group distances (euclidean or geodesic).")


@hookimpl
def register_encoders(register):
    register("kr-block", KRBlockEncoder, aliases=["bsa", "krblock"],
             description="BSA-TNP KRBlock encoder: shared-weight pre-norm blocks, biased "
                         "attention, targets attend to the context only.")


@hookimpl
def register_models(register):
    register("bsa-tnp", BSA_TNP)
