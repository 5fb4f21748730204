"""TE-TNP family (plugin ``builtin-te-tnp``): translation-equivariant transformer NPs
(Ashman et al. 2024; relative-attention functions from the TE-TNP/ConvNP thesis).

Modules: :mod:`.attention` (``te``: logits from q.k and x_q - x_k, the location update),
:mod:`.pseudo_tokens` (``pseudo-token`` encoder of TE-PT-TNP) and :mod:`.presets` (the
paper's and the thesis' rows are in the taylorformer-replication package). TE-TNP itself
uses the TNP family's ``transformer`` encoder with ``embed_x=False``. A family folder is
what a third-party NP family looks like: copy its shape.
"""
from taylorformer.hookspecs import hookimpl

from .attention import TEAttention
from .presets import TE_PT_TNP, TE_TNP
from .pseudo_tokens import PseudoTokenEncoder


@hookimpl
def register_attention(register):
    register("te", TEAttention, aliases=["te-attention"],
             description="Translation-equivariant attention (TE-TNP): logits from q.k and x_q - x_k.")


@hookimpl
def register_encoders(register):
    register("pseudo-token", PseudoTokenEncoder, aliases=["te-pt"],
             description="TE-PT-TNP: M pseudo-tokens with translation-equivariant locations.")


@hookimpl
def register_models(register):
    register("te-tnp", TE_TNP)
    register("te-pt-tnp", TE_PT_TNP)
