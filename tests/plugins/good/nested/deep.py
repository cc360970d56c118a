raise RuntimeError("plugin directories are not searched recursively")
