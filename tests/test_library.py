"""The library face, as a notebook uses it: only `import stac_gdal_mcp` and its public names, on
the bundled sample catalog (no services).

The notebook: search -> cloud cover ranking (a DataFrame, checked against the sample's known
truth) -> lazy load (an xarray Dataset on dask) -> NDVI time series, equal to the values of the
`time_series` tool called through a fastmcp Client and to NDVI computed from the lazy load ->
composite (equal to the median of the load) -> save -> the record (and the file it describes).
Then the parts: SearchResults, the preview image, the public names and their documentation.
"""

from __future__ import annotations

import doctest
import inspect
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import rasterio

import stac_gdal_mcp

FIELDS = [13.60, 45.92, 13.62, 45.935]  # a few fields west of Nova Gorica
WHOLE = [13.55, 45.85, 13.75, 45.98]  # covers the sample items whole
SEARCH = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-09-30"}
TRUTH = json.loads((Path(stac_gdal_mcp.__file__).parent / "data" / "sample" / "truth.json").read_text())


@pytest.fixture
def session(tmp_path):
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path / "workspace") as session:
        yield session


async def test_notebook_search_rank_load_series_composite_save(session):
    from fastmcp import Client

    from stac_gdal_mcp.server import build_server

    # search: a page that iterates and becomes a table
    results = session.search(bbox=FIELDS, limit=50, **SEARCH)
    assert isinstance(results, stac_gdal_mcp.SearchResults) and len(results) == results.matched == 5
    table = results.to_dataframe()
    assert list(table["id"]) == results.ids == [item.id for item in results]
    assert str(table["datetime"].dt.tz) == "UTC" and table["datetime"].is_monotonic_decreasing

    # cloud cover inside the area, per scene: a ranking DataFrame, clearest first
    ranking = session.cloud_cover(WHOLE, items=results)
    assert sorted(ranking["item_id"]) == sorted(results.ids)
    assert list(ranking["clear_fraction"]) == sorted(ranking["clear_fraction"], reverse=True)
    for row in ranking.to_dict("records"):
        assert row["cloud_fraction"] == pytest.approx(TRUTH[row["item_id"]]["cloud_fraction"], abs=0.005)
    assert ranking.attrs["failed"] == 0 and ranking.attrs["sort"] == "clear"

    # a lazy load: nothing read yet, dask arrays on (time, y, x)
    import dask.array

    ds = session.load(FIELDS, ["red", "nir"], **SEARCH)
    assert isinstance(ds["red"].data, dask.array.Array) and ds["red"].dims == ("time", "y", "x")
    assert ds.sizes["time"] == 5 and list(ds["collection"].values) == ["sentinel-2-l2a"] * 5
    ndvi_of_load = ((ds["nir"] - ds["red"]) / (ds["nir"] + ds["red"])).mean(("y", "x")).compute()

    # the NDVI time series, from the library and from the MCP tool: the same values
    # (min_valid_fraction=0: every day's mean, as the load's, however little of the fields is valid)
    series = session.time_series(FIELDS, "ndvi", min_valid_fraction=0, **SEARCH)
    async with Client(build_server(session=session)) as client:
        arguments = {"aoi": FIELDS, "search": SEARCH, "min_valid_fraction": 0}
        tool = (await client.call_tool("time_series", arguments)).structured_content
    assert [r["date"] for r in tool["rows"]] == list(series["date"])
    assert [r["item_ids"] for r in tool["rows"]] == list(series["item_ids"])
    for row, value in zip(tool["rows"], series["value"]):
        assert (row["value"] is None and np.isnan(value)) or row["value"] == value
    values = series["value"].to_numpy(dtype="float64")
    np.testing.assert_allclose(values, ndvi_of_load.to_numpy(), atol=2e-6, equal_nan=True)

    # a composite: the per-pixel median over time of the load
    rgb = session.composite(FIELDS, ["red", "green", "blue"], **SEARCH)
    assert rgb.dims == ("band", "y", "x") and rgb.band.values.tolist() == ["red", "green", "blue"]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # pixels never clear: NaN
        median_red = session.load(FIELDS, ["red"], **SEARCH)["red"].median("time").compute()
    np.testing.assert_allclose(rgb.sel(band="red").to_numpy(), median_red.to_numpy(), equal_nan=True)

    # nothing was written so far - except what the tool call wrote
    assert {
        r.properties.processing_expression["expression"]["operation"] for r in session.outputs.list()
    } == {"time_series"}

    # save -> the record -> the file it describes
    record = session.save(rgb)
    assert isinstance(record, stac_gdal_mcp.OutputRecord)
    assert session.outputs.get(record.id) == record
    with rasterio.open(session.outputs.path(record.id)) as cog:
        assert (cog.count, cog.crs.to_epsg(), cog.descriptions) == (3, 32633, ("red", "green", "blue"))
        np.testing.assert_array_equal(cog.read(), rgb.to_numpy())
    derived = {link.href for link in record.links if link.rel == "derived_from"}
    for item_id in results.ids:
        item = session.get_item("sentinel-2-l2a", item_id)
        assert {item["assets"][band]["href"] for band in ("red", "green", "blue", "scl")} <= derived
    assert record.properties.processing_expression["expression"]["parameters"]["bands"] == [
        "red",
        "green",
        "blue",
    ]


def test_time_series_saves_as_csv_and_chart(session):
    series = session.time_series(FIELDS, "ndvi", reducer="median", **SEARCH)
    csv_record = session.save(series)
    chart_record = session.save(series, format="png")
    lines = session.outputs.path(csv_record.id).read_text().splitlines()
    assert lines[0].split(",")[:3] == ["date", "datetime", "value"] and len(lines) == len(series) + 1
    assert session.outputs.path(chart_record.id).read_bytes()[:4] == b"\x89PNG"
    assert chart_record.properties.title == f"chart: {csv_record.properties.title}"
    first_days = series[series["date"] < "2024-07-01"]  # a filtered table saves what it shows
    assert (
        len(session.outputs.path(session.save(first_days).id).read_text().splitlines()) == len(first_days) + 1
    )
    # a table no operation made has no kind: refused, not taken for a time series
    with pytest.raises(stac_gdal_mcp.StacGdalMcpError, match="save takes a table .* not DataFrame"):
        session.save(pd.DataFrame({"value": [0.5]}))
    with pytest.raises(stac_gdal_mcp.StacGdalMcpError, match="no column item_ids"):
        session.save(series.drop(columns=["item_ids"]))


# --- SearchResults ---------------------------------------------------------------------------------


def test_search_results_iterate_page_and_tabulate(session):
    page = session.search(collections=["sentinel-2-l2a", "landsat-c2-l2"], limit=3)
    assert len(page) == 3 and page[0] is page.items[0] and page.next_cursor
    everything = [i.id for p in page.pages() for i in p]
    assert len(everything) == len(set(everything)) == page.matched == 8
    table = page.to_dataframe()
    columns = "id collection datetime cloud_cover platform gsd proj_code bbox assets thumbnail"
    assert list(table.columns) == columns.split()
    assert table.attrs["matched"] == 8 and "red" in table["assets"][0]
    full = session.search(collections=["sentinel-2-l2a"], limit=2, detail="full")
    assert isinstance(full[0], dict) and full.ids == [s.id for s in full.summaries]
    assert list(full.to_dataframe()["id"]) == full.ids


def test_search_results_show_as_html_with_thumbnails(session):
    page = session.search(collections=["sentinel-2-l2a"], limit=2)
    html = page._repr_html_()
    assert html.count("<tr>") == 3 and "<table>" in html  # header + 2 items
    assert html.count('<img src="data:image/png;base64,') == 2  # local thumbnails, inlined
    for item in page:
        assert item.id in html
    assert "more with next()" in html


def test_html_thumbnails_remote_outside_and_escaped(session, tmp_path):
    from stac_gdal_mcp.models import ItemSummary, SearchResult

    outside = tmp_path / "outside.png"  # a readable image, but not in a catalog folder or the workspace
    outside.write_bytes(b"\x89PNG\r\n\x1a\n")
    items = [
        ItemSummary(id="remote", thumbnail="https://example.com/a.png?x=1&y=2"),
        ItemSummary(id="outside", thumbnail=str(outside)),
        ItemSummary(id="<script>", thumbnail="s3://bucket/t.png"),
    ]
    page = stac_gdal_mcp.SearchResults(SearchResult(items=items, returned=3), session)
    html = page._repr_html_()
    assert '<img src="https://example.com/a.png?x=1&amp;y=2"' in html
    assert html.count("<img") == 1  # not the file outside, not s3://
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_geodataframe_needs_geopandas(session):
    page = session.search(collections=["sentinel-2-l2a"], limit=2, detail="full")
    try:
        import geopandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install geopandas"):
            page.to_geodataframe()
    else:
        frame = page.to_geodataframe()
        assert frame.crs.to_epsg() == 4326 and len(frame) == 2 and frame.geometry.is_valid.all()


# --- processing by item reference -------------------------------------------------------------


def test_preview_is_an_image_that_shows_in_jupyter(session):
    item = session.get_item("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A")
    image = session.preview(item, bbox=FIELDS, max_size=64)
    png = image._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png == session.outputs.path(image.record.id).read_bytes()
    with warnings.catch_warnings():  # a PNG keeps no georeferencing
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        memory = rasterio.MemoryFile(png)
        src = memory.open()
    with memory, src:
        assert (src.count, src.width, src.height) == (4, image.width, image.height)  # RGBA
    assert max(image.width, image.height) <= 64
    single = session.preview(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), "nir", max_size=32)
    assert single.record.properties.title == "preview of S2A_33TUL_20240808_0_L2A/nir"


def test_inputs_by_item_summary_dict_pair_or_href(session):
    summary = session.search(ids=["S2A_33TUL_20240808_0_L2A"]).items[0]
    item = session.get_item("sentinel-2-l2a", summary.id)
    by_pair = session.asset(("sentinel-2-l2a", summary.id), "red")
    assert session.asset(summary, "red") == by_pair == session.asset(item, "RED")
    assert session.asset(item["assets"]["red"]["href"]).href_unsigned == by_pair.href_unsigned
    info = session.inspect(summary, "red")
    assert info.crs == "EPSG:32633" and info.item_id == summary.id
    record = session.reproject(summary, "red", dst_crs="EPSG:4326", bbox=FIELDS)
    assert record.properties.proj_code == "EPSG:4326"
    converted = session.convert(item, "nir", output_format="GTiff", bbox=FIELDS)
    assert converted.file.href.endswith(".tif")
    with pytest.raises(stac_gdal_mcp.StacGdalMcpError, match="not both"):
        session.asset(item, "red", href="x.tif")
    with pytest.raises(stac_gdal_mcp.StacGdalMcpError, match="name the asset"):
        session.asset(item)
    by_names = session.asset(collection_id="sentinel-2-l2a", item_id=summary.id, asset="red")
    assert by_names == by_pair
    with pytest.raises(
        stac_gdal_mcp.StacGdalMcpError,
        match=r"^unknown argument 'colection_id' \(did you mean 'collection_id'\?\)$",
    ):
        session.asset(colection_id="sentinel-2-l2a", item_id=summary.id, asset="red")
    with pytest.raises(stac_gdal_mcp.StacGdalMcpError, match="^asset takes 2 positional arguments$"):
        session.asset(item, "red", "nir")


def test_asset_signature_is_its_fields():
    """Session.asset's signature lists AssetRef's fields, `source` and `asset` first and
    positional, the others keyword-only, all defaulting to None (help, tab completion)."""
    from stac_gdal_mcp.processing.requests import AssetRef

    parameters = inspect.signature(stac_gdal_mcp.Session.asset).parameters
    assert list(parameters) == ["self", "source", "asset", "href", "collection_id", "item_id", "catalog"]
    assert set(parameters) - {"self"} == set(AssetRef.model_fields)
    kinds = {name: p.kind.name for name, p in parameters.items() if name != "self"}
    assert kinds == {
        "source": "POSITIONAL_OR_KEYWORD",
        "asset": "POSITIONAL_OR_KEYWORD",
        **dict.fromkeys(["href", "collection_id", "item_id", "catalog"], "KEYWORD_ONLY"),
    }
    assert all(p.default is None for name, p in parameters.items() if name != "self")
    assert parameters["href"].annotation == "str | None" and parameters["source"].annotation == "Source"


def test_analysis_refuses_unknown_search_arguments(session):
    with pytest.raises(stac_gdal_mcp.StacGdalMcpError, match="unknown search argument 'collection';"):
        session.time_series(FIELDS, collection=["sentinel-2-l2a"])


# --- the public names and their documentation -------------------------------------------------------


def test_public_names_are_few_and_documented():
    assert dir(stac_gdal_mcp) == sorted(stac_gdal_mcp.__all__) or set(dir(stac_gdal_mcp)) == set(
        stac_gdal_mcp.__all__
    )
    for name in stac_gdal_mcp.__all__:
        assert hasattr(stac_gdal_mcp, name)
    text = _help(stac_gdal_mcp)
    assert "class Session" in text and "Session(default_catalog=" in text
    session_methods = [
        (name, member)
        for name, member in inspect.getmembers(stac_gdal_mcp.Session)
        if not name.startswith("_") and inspect.isfunction(member)
    ]
    assert len(session_methods) >= 18
    for name, member in [*session_methods, *_methods(stac_gdal_mcp.SearchResults)]:
        assert member.__doc__, f"{name} has no docstring"
        hints = inspect.signature(member)
        assert hints.return_annotation is not inspect.Signature.empty, f"{name} has no return type"
        for parameter in hints.parameters.values():
            if parameter.name != "self":
                assert parameter.annotation is not inspect.Parameter.empty, (
                    f"{name}({parameter.name}) untyped"
                )
    for name, member in session_methods:
        if name not in ("close", "on_close"):
            assert ">>> " in member.__doc__, f"Session.{name} has no example"


def test_docstring_examples_run(tmp_path, monkeypatch):
    """Every `>>>` example of the package docstring and of Session's methods, on the sample catalog."""
    import stac_gdal_mcp.session
    import stac_gdal_mcp.session_discovery

    monkeypatch.setenv("STAC_GDAL_MCP_WORKSPACE", str(tmp_path / "workspace"))
    with stac_gdal_mcp.Session(default_catalog="sample") as session:
        globs = {"session": session, "aoi": FIELDS}
        flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
        for module, extra in (
            (stac_gdal_mcp, None),
            (stac_gdal_mcp.session, globs),
            (stac_gdal_mcp.session_discovery, globs),  # Session's discovery methods
        ):
            result = doctest.testmod(module, optionflags=flags, extraglobs=extra, report=False)
            assert result.failed == 0 and result.attempted > 5, module.__name__


def _methods(cls):
    return [(n, m) for n, m in inspect.getmembers(cls) if not n.startswith("_") and inspect.isfunction(m)]


def _help(obj) -> str:
    import pydoc

    return pydoc.plain(pydoc.render_doc(obj))


def test_search_of_one_catalog_translates_collection_aliases(tmp_path):
    """A canonical collection name is translated for one catalog too (not only in a federated
    search): by Session.search, and so by the search_items tool and the analyses."""
    aliases = {"s2-canonical": {"sample": ["sentinel-2-l2a"]}, "only-elsewhere": {"other": ["x"]}}
    with stac_gdal_mcp.Session(
        default_catalog="sample", workspace=tmp_path / "workspace", collection_aliases=aliases
    ) as session:
        results = session.search(collections=["s2-canonical"], bbox=FIELDS, datetime=SEARCH["datetime"])
        assert results.matched == 5
        assert any("'s2-canonical' is 'sentinel-2-l2a' in catalog 'sample'" in n for n in results.notes)
        with pytest.raises(
            stac_gdal_mcp.errors.CollectionNotFound, match="collection_aliases has it in: other"
        ):
            session.search(catalog="sample", collections=["only-elsewhere"])


def test_local_search_skips_items_without_geometry_or_bbox():
    """An item of a local catalog with neither geometry nor bbox is nowhere: a bbox or
    intersects search leaves it out instead of failing (a 3D bbox is read as 2D)."""
    from stac_gdal_mcp.discovery.local import local_search
    from stac_gdal_mcp.discovery.query import check_search

    items = [
        {"id": "nowhere", "properties": {}},
        {"id": "null", "geometry": None, "properties": {}},
        {"id": "flat", "geometry": None, "bbox": [13, 45, 14, 46], "properties": {}},
        {"id": "3d", "geometry": None, "bbox": [13, 45, 0, 14, 46, 100], "properties": {}},
        {"id": "far", "geometry": None, "bbox": [0, 0, 1, 1], "properties": {}},
    ]
    by_bbox = check_search(bbox=[13.5, 45.5, 13.6, 45.6])
    assert sorted(i["id"] for i in local_search(items, by_bbox)) == ["3d", "flat"]
    polygon = {"type": "Polygon", "coordinates": [[[13.5, 45.5], [13.6, 45.5], [13.6, 45.6], [13.5, 45.5]]]}
    by_shape = check_search(intersects=polygon)
    assert sorted(i["id"] for i in local_search(items, by_shape)) == ["3d", "flat"]
    assert len(local_search(items, check_search())) == 5


def test_dry_runs_plan_what_the_calls_then_do_and_write_nothing(session):
    from stac_gdal_mcp import Estimate

    scene = ("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A")
    rgb = ["red", "green", "blue"]
    plans = {
        "reproject": session.reproject(scene, "red", dst_crs="EPSG:4326", bbox=FIELDS, dry_run=True),
        "convert": session.convert(scene, "nir", output_format="GTiff", bbox=FIELDS, dry_run=True),
        "preview": session.preview(scene, bbox=FIELDS, max_size=64, dry_run=True),
        "cloud_cover": session.cloud_cover(WHOLE, dry_run=True, **SEARCH),
        "time_series": session.time_series(FIELDS, "ndvi", dry_run=True, **SEARCH),
        "composite": session.composite(FIELDS, rgb, dry_run=True, **SEARCH),
    }
    assert session.outputs.list() == []  # a dry run writes nothing
    shown = plans["composite"]._repr_markdown_()  # in Jupyter: the summary line, limits and notes
    assert shown.startswith("dry run of composite: nothing was read but headers, nothing written")
    assert "`limits.max_output_pixels`: needs" in shown and "(ok)" in shown
    for plan in plans.values():
        assert isinstance(plan, Estimate) and plan.read_bytes > 0 and not plan.would_refuse

    # each plan names the output and the items of the call it stands for
    def size(record):
        with rasterio.open(session.outputs.path(record.id)) as out:
            return out.width, out.height

    for name, record in (
        ("reproject", session.reproject(scene, "red", dst_crs="EPSG:4326", bbox=FIELDS)),
        ("convert", session.convert(scene, "nir", output_format="GTiff", bbox=FIELDS)),
    ):
        assert (plans[name].output.width, plans[name].output.height) == size(record), name
    image = session.preview(scene, bbox=FIELDS, max_size=64)
    assert (plans["preview"].output.width, plans["preview"].output.height) == (image.width, image.height)
    ranking = session.cloud_cover(WHOLE, **SEARCH)
    assert sorted(plans["cloud_cover"].item_ids) == sorted(ranking["item_id"])
    series = session.time_series(FIELDS, "ndvi", **SEARCH)
    assert plans["time_series"].output.rows == len(series)
    array = session.composite(FIELDS, rgb, **SEARCH)
    out = plans["composite"].output
    assert (out.bands, out.height, out.width) == array.shape
    assert len(plans["composite"].item_ids) == array.attrs["items"] == 5
