def register(registry):
    def bad_register_tool() -> str:
        return "never"

    registry.add_tool(bad_register_tool)  # added, then register fails: must not be installed
    raise RuntimeError("ACME_HOME is not set")
