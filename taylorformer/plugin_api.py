"""The version of the plugin contract this taylorformer offers (no TensorFlow import)."""

#: the plugin API this taylorformer implements (docs/plugins.md, "Changes by version")
PLUGIN_API_VERSION = 2
