def register(registry):
    def shared_tool() -> str:
        return "alpha"

    registry.add_tool(shared_tool)
