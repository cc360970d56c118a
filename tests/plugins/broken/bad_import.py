import stac_gdal_mcp_dependency_that_does_not_exist  # noqa: F401


def register(registry):
    registry.add_tool(lambda: "never", name="bad_import_tool")
