def register(registry):
    def beta_other() -> str:
        return "beta"

    def shared() -> str:
        return "beta"

    registry.add_tool(beta_other)
    registry.add_tool(shared, name="shared_tool")
