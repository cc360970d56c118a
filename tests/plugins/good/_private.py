raise RuntimeError("a file starting with '_' must not be loaded as a plugin")
