"""Built-in plugins (importable as ``taylorformer.plugins``): one subpackage per model
family, one paper each (``tnp``, ``taylorformer``, ``te_tnp``, ``bsa_tnp``), and the
likelihood heads.

Each family package is one plugin, declared as an entry point in the ``taylorformer``
group of ``setup.cfg`` exactly like a third-party plugin; its ``__init__`` holds the
hooks, its modules the components.
"""
