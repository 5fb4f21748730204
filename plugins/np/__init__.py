"""NP family (plugin ``builtin-np``): the Neural Process (Garnelo et al. 2018) and the
Attentive Neural Process (Kim et al. 2019), latent-variable models (model kind ``latent``,
:mod:`taylorformer.models.latent`: training objective and predictive).

Modules: :mod:`.encoders` (``np``, ``anp``), :mod:`.latent_path` (the set -> Gaussian over z),
:mod:`.mab` (the attention block), :mod:`.likelihood` (``np-normal``), :mod:`.presets`.
"""
from taylorformer.hookspecs import hookimpl

from .encoders import ANPEncoder, NPEncoder
from .likelihood import NPNormal
from .presets import ANP, NP


@hookimpl
def register_encoders(register):
    register("np", NPEncoder, description="NP: mean-pooled deterministic path and latent path (kind 'latent').")
    register("anp", ANPEncoder,
             description="ANP: cross-attention deterministic path and latent path (kind 'latent').")


@hookimpl
def register_likelihoods(register):
    register("np-normal", NPNormal,
             description="Gaussian, scale = min_scale + (1 - min_scale) softplus(raw) (NP/ANP decoders).")


@hookimpl
def register_models(register):
    register("np", NP)
    register("anp", ANP)
