from stac_gdal_mcp.server.extensions import IncompatiblePluginError


def register(registry):
    major = int(registry.version.split(".")[0])
    if major < 99:
        raise IncompatiblePluginError(f"needs stac-gdal-mcp >= 99.0, this is {registry.version}")
