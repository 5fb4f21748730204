"""ConvCNP family (plugin ``builtin-convcnp``): convolutional conditional NPs (Gordon et
al. 2020), as the cambridge-mlg/tnp code builds them and the BSA-TNP paper sizes them.

Modules: :mod:`.setconv` (the grids and the EQ SetConv), :mod:`.cnn` (the CNNs on the
grid: ``conv``, ``resconv``, ``unet``), :mod:`.encoder` (the ``convcnp`` encoder) and
:mod:`.presets` (``convcnp``).
"""
from taylorformer.hookspecs import hookimpl

from .encoder import ConvCNPEncoder
from .presets import CONVCNP


@hookimpl
def register_encoders(register):
    register("convcnp", ConvCNPEncoder, aliases=["setconv-cnn"],
             description="ConvCNP: EQ SetConv to a grid with a density channel, CNN, SetConv to the targets.")


@hookimpl
def register_models(register):
    register("convcnp", CONVCNP)
