"""An installed plugin package (see ../acme_installed-1.2.3.dist-info/entry_points.txt)."""

from fastmcp.tools import Tool


def _area(bbox: list[float]) -> float:
    """Area of a [west, south, east, north] box in square degrees."""
    west, south, east, north = bbox
    return (east - west) * (north - south)


def register(registry):
    def ping() -> str:
        return "pong from acme_installed"

    registry.add_tool(ping, name="acme_installed_ping", description="Answer with a pong.")
    definition = Tool.from_function(_area, name="acme_bbox_area")
    registry.add_tool(definition, annotations={"readOnlyHint": True, "openWorldHint": False})
