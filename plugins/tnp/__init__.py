"""TNP family (plugin ``builtin-tnp``): CNP, TNP-D and TNP-A (Garnelo et al. 2018;
Nguyen & Grover 2022).

Modules: :mod:`.encoders` (``deepset``, ``transformer``), :mod:`.tnp_a` (``tnp-a``),
:mod:`.presets`. The ``mha-xy`` attention is the contract's default score,
:class:`taylorformer.attention.Attention`.
"""
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl

from .encoders import DeepSetEncoder, TransformerEncoder
from .presets import CNP, TNP_A, TNP_D
from .tnp_a import TNPAEncoder


@hookimpl
def register_attention(register):
    register("mha-xy", Attention, aliases=["mha"],
             description="Multi-head scaled dot-product attention on xy tokens (TNP).")


@hookimpl
def register_encoders(register):
    register("deepset", DeepSetEncoder)
    register("transformer", TransformerEncoder)
    register("tnp-a", TNPAEncoder,
             description="TNP-A: autoregressive transformer over the doubled Nc+2Nt sequence.")


@hookimpl
def register_models(register):
    register("cnp", CNP)
    register("tnp-d", TNP_D, aliases=["tnp"])
    register("tnp-a", TNP_A)
