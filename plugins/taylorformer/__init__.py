"""Taylorformer family (plugin ``builtin-taylorformer``; Nivron et al. 2023).

Modules: :mod:`.mha_x` (``mha-x`` attention), :mod:`.encoder` (``taylorformer``: MHA-X and
MHA-XY streams over one masked sequence), :mod:`.local_taylor` (``local-taylor``
wrapper), :mod:`.presets`.
"""
from taylorformer.hookspecs import hookimpl

from .encoder import TaylorformerEncoder
from .local_taylor import LocalTaylor
from .mha_x import MHAX
from .presets import TAYLORFORMER, TAYLORFORMER_X, TAYLORFORMER_XY


@hookimpl
def register_attention(register):
    register("mha-x", MHAX,
             description="MHA-X: attention on x-only features, y as values in the last layer (Taylorformer).")


@hookimpl
def register_encoders(register):
    register("taylorformer", TaylorformerEncoder,
             description="Taylorformer: MHA-X + MHA-XY streams over one masked Nc+Nt sequence.")


@hookimpl
def register_wrappers(register):
    register("local-taylor", LocalTaylor,
             description="LocalTaylor: nearest-seen-neighbour Taylor features and mean term (Taylorformer).")


@hookimpl
def register_models(register):
    register("taylorformer", TAYLORFORMER)
    register("taylorformer-xy", TAYLORFORMER_XY)
    register("taylorformer-x", TAYLORFORMER_X)
