"""taylorformer-replication: the published table rows of the Taylorformer, TE-TNP and
BSA-TNP papers (and the TE-TNP thesis), the runner that trains and scores them, the
project's recorded results, and the ``taylorformer replicate`` command.

A plugin of its own, installed beside taylorformer (``pip install -e plugins/replication``)
and loaded as a third party's would be, through two entry points:

* group ``taylorformer``, plugin ``replication`` (:mod:`.papers`): registers every row as
  kind ``experiment`` (hook ``register_experiments``);
* group ``taylorformer.commands``, plugin ``replication`` (:mod:`.command`): adds the
  ``replicate`` command to the command line (hook ``register_commands``).

Modules: :mod:`.experiment` (the records: :class:`Row`, :class:`Training`,
:class:`Evaluation`, :class:`SmallBudget`), :mod:`.papers` (the rows, one module per
paper), :mod:`.replication` (train, evaluate, record, list; ``replicate``), :mod:`.command`.
Importing the package loads no TensorFlow: the command line imports it to build its parser.
"""
from taylorformer_replication.experiment import (  # noqa: F401 - what a plugin that adds rows imports
    Evaluation, Row, SmallBudget, Training, format_value, register_rows)

__all__ = ["Evaluation", "Row", "SmallBudget", "Training", "format_value", "register_rows"]
