"""Built-in task plugins (importable as ``taylorformer.tasks``).

Each module is one plugin, declared as an entry point in the ``taylorformer`` group of
``setup.cfg`` exactly like a third-party plugin. Tasks on the user's own data, without a
plugin: :func:`from_dataframe`, :func:`from_xarray`, :func:`from_arrays`
(:mod:`taylorformer.tasks.user_data`), imported on first use.
"""
import importlib

_USER_DATA = ("from_dataframe", "from_xarray", "from_arrays")

__all__ = list(_USER_DATA)


def __getattr__(name):
    if name in _USER_DATA:
        return getattr(importlib.import_module("taylorformer.tasks.user_data"), name)
    raise AttributeError(f"module 'taylorformer.tasks' has no attribute {name!r}")
