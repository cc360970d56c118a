"""A helper module in the plugin directory: it defines no register(), so it is not a plugin."""

CONSTANT = 42
