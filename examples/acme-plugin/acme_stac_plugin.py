"""An example stac-gdal-mcp plugin: a normalized-difference index written as a COG output.

It adds one tool, `acme_normalized_difference`, which reads two bands of a STAC item (by
asset key or band common name, e.g. nir and red for NDVI), computes (a - b) / (a + b) on the
reflectances (the assets' raster:bands scale and offset applied), and writes the result to the
workspace as a Cloud-Optimized GeoTIFF with an output record, exactly as core tools do.

Use it either way:
  - installed:   pip install ./examples/acme-plugin   (entry point `acme` in `stac_gdal_mcp.plugins`)
  - as a file:   STAC_GDAL_MCP_PLUGIN_DIR=examples/acme-plugin stac-gdal-mcp serve
"""

from typing import Annotated

from pydantic import Field

__version__ = "1.0.0"

FORMULA = "(a - b) / (a + b)"
COG_TYPE = "image/tiff; application=geotiff; profile=cloud-optimized"


def register(registry):
    from stac_gdal_mcp.errors import InvalidArgument, LimitExceeded
    from stac_gdal_mcp.server.extensions import IncompatiblePluginError

    if registry.version.split(".")[0] != "0":
        raise IncompatiblePluginError(f"written for stac-gdal-mcp 0.x, this is {registry.version}")

    def acme_normalized_difference(
        collection_id: Annotated[str, Field(description="collection of the item, e.g. sentinel-2-l2a")],
        item_id: Annotated[str, Field(description="item id from search_items")],
        a: Annotated[str, Field(description="first band: asset key or common name (nir for NDVI)")] = "nir",
        b: Annotated[str, Field(description="second band: asset key or common name (red for NDVI)")] = "red",
        catalog: Annotated[str | None, Field(description="catalog id; default: the default catalog")] = None,
        output_name: Annotated[
            str | None, Field(description="file name for the output; default: generated")
        ] = None,
    ) -> dict:
        """Normalized difference (a - b) / (a + b) of two bands of one item, written as a COG.

        Example: acme_normalized_difference(collection_id="sentinel-2-l2a", item_id="S2B_...",
        a="nir", b="red") gives NDVI. Both bands must share a grid. Pixels where either band is
        nodata, or a + b is 0, are NaN. Returns the output's summary (id, uri, size, record).
        """
        sources = [
            registry.resolve_input(collection_id=collection_id, item_id=item_id, asset=band, catalog=catalog)
            for band in (a, b)
        ]
        arrays, profile = [], None
        for source in sources:
            array, grid = _read_reflectance(source, registry.settings)
            if profile is not None and (grid["crs"], grid["transform"], grid["shape"]) != (
                profile["crs"],
                profile["transform"],
                profile["shape"],
            ):
                raise InvalidArgument(f"bands {a} and {b} are on different grids; reproject one first")
            profile = grid
            arrays.append(array)
        pixels = profile["shape"][0] * profile["shape"][1]
        if pixels > registry.settings.limits.max_output_pixels:
            raise LimitExceeded(f"{pixels} pixels is more than limits.max_output_pixels")
        index = _normalized_difference(*arrays)
        store = registry.outputs
        with store.writing(".tif", output_name, stem=f"{item_id}-nd-{a}-{b}") as out:
            _write_cog(out, index, profile)
            from stac_gdal_mcp.processing.records import describe_raster

            record = store.commit(
                out,
                operation="acme_normalized_difference",
                parameters={
                    "collection_id": collection_id,
                    "item_id": item_id,
                    "a": a,
                    "b": b,
                    "formula": FORMULA,
                },
                sources=[s.source_ref() for s in sources],
                media_type=COG_TYPE,
                raster=describe_raster(out.path),
                title=f"Normalized difference ({a} - {b}) / ({a} + {b}) of {item_id}",
                software={"acme-stac-plugin": __version__},
            )
        return record.summary().model_dump(mode="json")

    registry.add_tool(acme_normalized_difference, annotations=registry.WRITES_OUTPUT)
    registry.add_capability("spectral_index", {"formula": FORMULA, "output": "COG, float32, NaN nodata"})


def _read_reflectance(source, settings):
    """One band as float32 reflectance (raster:bands scale/offset applied), NaN where nodata."""
    import numpy as np

    from stac_gdal_mcp.processing.access import open_raster

    band = (source.asset.get("raster:bands") or [{}])[0]
    with open_raster(source, settings) as src:
        data = src.read(1, masked=True)
        grid = {"crs": src.crs, "transform": src.transform, "shape": (src.height, src.width)}
    values = data.astype("float32") * band.get("scale", 1.0) + band.get("offset", 0.0)
    return values.filled(np.nan), grid


def _normalized_difference(a, b):
    import numpy as np

    total = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total != 0, (a - b) / total, np.nan).astype("float32")


def _write_cog(out, array, grid):
    """Write the array to a working GeoTIFF, then copy it into a COG at the output's temporary path."""
    import rasterio
    from rasterio.shutil import copy

    working = out.scratch(".tif")
    height, width = grid["shape"]
    with rasterio.open(
        working,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=1,
        dtype="float32",
        crs=grid["crs"],
        transform=grid["transform"],
        nodata=float("nan"),
    ) as dst:
        dst.write(array, 1)
    copy(working, out.path, driver="COG", compress="DEFLATE", predictor="3", overview_resampling="average")
