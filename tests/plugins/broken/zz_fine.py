def register(registry):
    def zz_ping() -> str:
        """Answer pong."""
        return "pong"

    registry.add_tool(zz_ping)
