"""The published rows (plugin ``replication``, entry-point group ``taylorformer``): one
module per paper, each a list ``ROWS`` of :class:`taylorformer_replication.Row`, registered
as kind ``experiment`` through the ``register_experiments`` hook, as a third-party plugin
registers its own.

Modules: :mod:`.taylorformer` (Nivron et al. 2023), :mod:`.te_tnp` (Ashman et al. 2024),
:mod:`.te_tnp_thesis` (Sivaraya 2024), :mod:`.bsa_tnp` (Jenson et al. 2025). Each module's
``TABLES`` counts the numbers each of its tables prints: every one of them is a row, runnable
or ``not implemented`` with its reason.
The model presets the rows name stay with their families' plugins (``taylorformer.plugins``).
"""
from taylorformer.hookspecs import hookimpl
from taylorformer_replication.experiment import register_rows

from .bsa_tnp import ROWS as BSA_TNP_ROWS
from .taylorformer import ROWS as TAYLORFORMER_ROWS
from .te_tnp import ROWS as TE_TNP_ROWS
from .te_tnp_thesis import ROWS as THESIS_ROWS

#: every row of the four sources
ROWS = TAYLORFORMER_ROWS + TE_TNP_ROWS + THESIS_ROWS + BSA_TNP_ROWS


@hookimpl
def register_experiments(register):
    register_rows(register, ROWS)
