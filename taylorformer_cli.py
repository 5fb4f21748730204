"""The ``taylorformer`` console script: :func:`taylorformer.cli.main` without loading
TensorFlow for ``--help``, ``--version`` and argument errors.

It imports the package with ``TAYLORFORMER_LAZY_IMPORT=1`` (restored at once, so that
nothing the command starts inherits it): the package then defers its model classes, and
each command imports what it needs. A module of its own because whatever imports
``taylorformer.cli`` first runs ``taylorformer/__init__.py``.
"""
import os
import sys


def main(argv=None):
    """Run the command line; returns its exit code."""
    from_user = os.environ.get("TAYLORFORMER_LAZY_IMPORT")
    os.environ["TAYLORFORMER_LAZY_IMPORT"] = "1"
    try:
        from taylorformer import cli
    finally:
        if from_user is None:
            del os.environ["TAYLORFORMER_LAZY_IMPORT"]
        else:
            os.environ["TAYLORFORMER_LAZY_IMPORT"] = from_user
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
