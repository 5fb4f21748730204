"""Built-in plugins (importable as ``taylorformer.plugins``).

Each module is one plugin, declared as an entry point in the ``taylorformer`` group of
``setup.cfg`` exactly like a third-party plugin.
"""
