"""Typed results save, answer and draw themselves (operations/result.py): a composite's `Raster`,
a `CloudCover` ranking, a `Preview`, a page of `SearchResults` and an output record, each as the
registry does for it (the tools' path), on the bundled sample catalog; what a kind does not do
is refused in one line."""

import json

import numpy as np
import pytest
import rasterio

import stac_gdal_mcp
from stac_gdal_mcp.errors import InvalidArgument
from stac_gdal_mcp.models import MAP_LAYER_META
from stac_gdal_mcp.operations import registry
from stac_gdal_mcp.operations.result import Result

AOI = [13.60, 45.92, 13.62, 45.935]
JUNE_JULY = "2024-06-01/2024-07-31"
S2 = ["sentinel-2-l2a"]


@pytest.fixture
def session(tmp_path):
    with stac_gdal_mcp.Session(default_catalog="sample", workspace=tmp_path / "workspace") as session:
        yield session


def drawn(session, result) -> dict:
    """The layer the map draws of `result` in a notebook (Session.map's call)."""
    (call,) = session.map(result).calls
    return call["result"]["_meta"][MAP_LAYER_META]


def test_a_composite_saves_and_answers_itself(session):
    rgb = session.composite(AOI, ["red", "green"], collections=S2, datetime=JUNE_JULY)
    assert isinstance(rgb, Result) and rgb.request["bands"] == ["red", "green"]
    assert rgb.provenance.kind == registry.kind_of(rgb) == "composite"
    record = rgb.save()
    with rasterio.open(session.outputs.path(record.id)) as src:
        saved = src.read()
    computed = np.asarray(rgb)  # numpy straight from the lazy array, not the tile-by-tile writer
    assert saved.shape == computed.shape == (2, *rgb.array.shape[1:])
    assert np.array_equal(saved, computed, equal_nan=True) and np.isfinite(saved).any()
    with pytest.raises(InvalidArgument, match="^save takes .*, not DataArray$"):
        session.save(rgb.array)  # the DataArray alone: of no kind (its attrs are no class)
    with pytest.raises(InvalidArgument, match="^arrays are saved as COG$"):
        rgb.save("csv")

    answer = rgb.answer(session.settings.limits, quicklook=True)
    (kept,) = answer.records
    assert answer.value.bands == ["red", "green"] and answer.value.output.id == kept.id != record.id
    assert answer.images[0][:4] == b"\x89PNG" and answer.layer.rasters[0]["id"] == kept.id
    with pytest.raises(InvalidArgument, match="^map takes .*, not Raster$"):
        rgb.map_layer()


def test_a_composite_cut_with_xarray_is_one_still_and_saves_as_it_shows(session):
    """What `sel`, `isel` and `[...]` make of a composite is a `Raster` with its provenance, saved
    on its own part of the grid: pixels and georeferencing as xarray and odc-geo say."""
    import odc.geo.xr  # noqa: F401  (the .odc accessor: the grid read from the cut's coordinates)

    from stac_gdal_mcp.operations.composite import Raster

    rgb = session.composite(AOI, ["red", "green"], collections=S2, datetime=JUNE_JULY)
    red, cut = rgb.sel(band="red"), rgb.isel(y=slice(5, 30), x=slice(3, 20))
    for part in (red, cut, rgb[:, 5:30, 3:20], rgb.loc[["green"]]):
        assert isinstance(part, Raster) and part.provenance == rgb.provenance and part.plan is None
    assert np.array_equal(np.asarray(rgb[:, 5:30, 3:20]), np.asarray(cut), equal_nan=True)
    assert not isinstance(rgb.sizes, Raster) and not isinstance(rgb.values, Raster)
    for part, bands in ((red, 1), (cut, 2)):
        with rasterio.open(session.outputs.path(part.save().id)) as src:
            assert src.count == bands and src.shape == part.shape[-2:]
            assert np.array_equal(src.read().squeeze(), np.asarray(part), equal_nan=True)
            assert src.transform.almost_equals(part.array.odc.geobox.affine)
            assert src.crs == rasterio.crs.CRS.from_user_input(part.array.odc.geobox.crs.to_wkt())
    full = rgb.array.odc.geobox.affine
    assert cut.array.odc.geobox.affine.almost_equals(full @ full.translation(3, 5))


def test_a_ranking_answers_and_draws_itself_and_is_not_saved(session):
    ranking = session.cloud_cover(AOI, collections=S2, datetime=JUNE_JULY)
    assert ranking.request["aoi"] == AOI and ranking.request["collections"] == S2
    assert list(ranking) == list(ranking.to_dataframe().columns)  # it iterates as its table
    answer = ranking.answer(session.settings.limits)
    assert answer.value is ranking.result and answer.records == () and answer.images == ()
    layer = ranking.map_layer()
    assert [row["id"] for row in layer.ranking] == list(ranking["item_id"])
    assert layer.model_dump(mode="json", exclude_defaults=True) == drawn(session, ranking)
    for attempt in (ranking.save, lambda: session.save(ranking)):
        with pytest.raises(InvalidArgument, match="^save takes .*, not CloudCover$"):
            attempt()


def test_a_preview_answers_and_draws_itself(session):
    image = session.preview(("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A"), bbox=AOI, max_size=64)
    assert image.request == {"assets": ["visual"], "bbox": AOI, "max_size": 64}
    answer = image.answer(session.settings.limits)
    assert answer.value == image.record and answer.records == (image.record,) and not answer.as_text
    assert answer.images == (image.png,) and f"output {image.record.id}" in answer.note
    layer = image.map_layer()
    assert layer.rasters[0]["id"] == image.record.id and layer.rasters[0]["bbox"] == image.record.bbox
    assert layer.model_dump(mode="json", exclude_defaults=True) == drawn(session, image)
    with pytest.raises(InvalidArgument, match="^save takes .*, not Preview$"):
        session.save(image)


def test_a_search_page_holds_its_search_and_saves_answers_and_draws_itself(session):
    from stac_gdal_mcp.discovery.query import ItemSearch

    page = session.search(collections=S2, bbox=AOI, limit=2)
    assert isinstance(page.search, ItemSearch) and page.search.limit == 2
    assert page.request == {"collections": S2, "bbox": AOI, "limit": 2, "detail": "summary"}
    assert page.search_arguments == {"collections": S2, "bbox": AOI}
    assert page.next().ids == session.search(collections=S2, bbox=AOI, limit=2, cursor=page.next_cursor).ids

    layer = page.map_layer()
    assert [f["id"] for f in layer.footprints] == page.ids
    assert layer.model_dump(mode="json", exclude_defaults=True) == drawn(session, page)
    answer = page.answer(session.settings.limits)
    assert answer.value is page.page and answer.layer == layer

    record = session.save(page, format="ndjson")  # every page of the search, full items
    lines = session.outputs.path(record.id).read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [i.id for p in page.pages() for i in p.summaries]
    assert len(lines) == page.matched > len(page)


def test_an_output_record_answers_as_itself(session):
    record = session.reproject(
        collection_id="sentinel-2-l2a", item_id="S2A_33TUL_20240808_0_L2A", asset="red", dst_crs="EPSG:4326"
    )
    answer = registry.answer(session.core, record, session.settings.limits)
    assert answer.value is record and answer.records == (record,) and answer.images == ()
    assert answer.layer.rasters[0]["id"] == record.id
    assert registry.map_layer(record) == answer.layer


def test_a_result_without_a_session_says_so_in_one_line(session):
    from stac_gdal_mcp.operations.composite import Raster
    from stac_gdal_mcp.results import CloudCover

    rgb = session.composite(AOI, ["red"], collections=S2, datetime=JUNE_JULY)
    ranking = session.cloud_cover(AOI, collections=S2, datetime=JUNE_JULY)
    for alone in (Raster(rgb.array, rgb.plan), CloudCover(ranking.result)):
        with pytest.raises(InvalidArgument, match="has no session to save into; use session.save"):
            alone.answer(session.settings.limits)
    assert session.save(Raster(rgb.array)).id  # the session names the core to save into


def test_a_composite_cut_off_its_pixels_is_refused_before_anything_is_written(session):
    """A selection that steps over pixels, lists columns or reverses an axis has no transform of
    the grid: saving it is a one-line refusal and leaves no output."""
    from stac_gdal_mcp.errors import InvalidArgument

    rgb = session.composite(AOI, ["red"], collections=S2, datetime=JUNE_JULY)
    before = session.outputs.list()
    cuts = (rgb.isel(x=slice(None, None, 2)), rgb.isel(y=[0, 3, 4]), rgb.isel(x=slice(None, None, -1)))
    for part in cuts:
        with pytest.raises(InvalidArgument, match="slice of the grid's own pixels") as caught:
            part.save()
        assert "\n" not in str(caught.value)
    assert session.outputs.list() == before
    saved = rgb.isel(x=slice(2, 9)).save()  # a contiguous cut still saves
    with rasterio.open(session.outputs.path(saved.id)) as src:
        assert src.width == 7
