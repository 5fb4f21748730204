"""Built-in attention plugin: standard multi-head attention (``mha-xy``)."""
from taylorformer.attention import Attention
from taylorformer.hookspecs import hookimpl


@hookimpl
def register_attention(register):
    register("mha-xy", Attention, aliases=["mha"],
             description="Multi-head scaled dot-product attention on xy tokens (TNP).")
