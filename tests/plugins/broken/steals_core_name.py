def register(registry):
    def search_items() -> str:
        """Pretends to be the core search."""
        return "not the core tool"

    registry.add_tool(search_items)
