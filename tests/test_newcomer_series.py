"""time_series drops a day whose valid share of the AOI is under min_valid_fraction (default 0.5,
as zonal_stats): a mean of a few pixels of a field is no reading of it. On the pgstac test bed
and the Range server, two synthetic Sentinel-2 days over one AOI, one nearly clear and one
nearly all cloud (about 0.2 % valid); the truth is numpy on the generated COGs (helpers).
"""

from __future__ import annotations

import uuid

import pytest
from fastmcp import Client
from helpers import expected_ndvi, fractions, usable_pixels, utm_aoi, write_days

UID = uuid.uuid4().hex[:8]
S2 = f"thin-s2-{UID}"
ORIGIN = (500000.0, 5000000.0)
AOI = utm_aoi(ORIGIN[0] + 1000, ORIGIN[1] - 3000, ORIGIN[0] + 3000, ORIGIN[1] - 1000)
CLOUD = {"THIN_CLEAR": 0.1, "THIN_CLOUDY": 0.9998}


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    from stac_gdal_mcp.testing import synthetic

    folder = f"thin-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    days = {"THIN_CLEAR": "2024-06-01T10:00:00Z", "THIN_CLOUDY": "2024-06-06T10:00:00Z"}
    items = write_days(
        out_dir, days, seed=40, collection_id=S2, href_base=href_base, size_px=512, blocksize=128,
        **fractions(cloud=lambda n: list(CLOUD.values())[n], shadow=0.0),
    )  # fmt: skip
    pgstac_api.load([synthetic.collection("sentinel-2-l2a", S2)], items)
    return {item_id: {"dir": out_dir / item_id} for item_id in days}


def _valid_share(scene) -> float:
    values, keep, _ = usable_pixels(scene, ["red", "nir"], AOI)
    inside = usable_pixels(scene, ["red", "nir"], AOI, mask_clouds=False)[1]
    return keep.sum() / inside.sum()


async def test_a_day_of_0_2_percent_valid_is_dropped_at_the_default(scenes, make_settings, pgstac_api, build):
    thin = _valid_share(scenes["THIN_CLOUDY"])
    assert 0 < thin < 0.005 and _valid_share(scenes["THIN_CLEAR"]) > 0.5  # the scenes are what we meant
    settings = make_settings(catalogs=[{"id": "bed", "url": pgstac_api.url}], default_catalog="bed")
    search = {"collections": [S2], "datetime": "2024-06-01/2024-06-10"}
    async with Client(build(settings)) as client:
        default = (await client.call_tool("time_series", {"aoi": AOI, "search": search})).structured_content
        kept = (
            await client.call_tool("time_series", {"aoi": AOI, "search": search, "min_valid_fraction": 0})
        ).structured_content
    rows = {r["item_ids"][0]: r for r in default["rows"]}
    assert rows["THIN_CLOUDY"]["value"] is None and rows["THIN_CLOUDY"]["valid_pixels"] > 0
    assert rows["THIN_CLOUDY"]["valid_fraction"] == pytest.approx(thin, abs=0.002)
    assert any("min_valid_fraction=0.5" in n and "1 of 2 days" in n for n in default["notes"]), default[
        "notes"
    ]
    want, _ = expected_ndvi([scenes["THIN_CLEAR"]], AOI)
    assert rows["THIN_CLEAR"]["value"] == pytest.approx(want, abs=1e-5)
    # at 0 the thin day keeps its value, the mean of its few pixels
    rows = {r["item_ids"][0]: r for r in kept["rows"]}
    want, count = expected_ndvi([scenes["THIN_CLOUDY"]], AOI)
    assert count == rows["THIN_CLOUDY"]["valid_pixels"]
    assert rows["THIN_CLOUDY"]["value"] == pytest.approx(want, abs=1e-5)


def test_the_chart_marks_a_thin_day_as_zonal_stats_marks_one():
    from stac_gdal_mcp.operations.series import TimeSeriesRow
    from stac_gdal_mcp.operations.tables import chart_figure

    def row(day, value, pixels, fraction):
        return TimeSeriesRow(
            date=day, datetime=f"{day}T10:00:00Z", value=value, valid_fraction=fraction,
            valid_pixels=pixels, item_ids=[day],
        )  # fmt: skip

    rows = [
        row("2024-06-01", 0.6, 900, 0.9),
        row("2024-06-06", None, 4, 0.004),
        row("2024-06-11", None, 0, 0),
    ]
    figure = chart_figure(rows, title="ndvi", ylabel="ndvi")
    labels = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert "too little valid (1 day, min_valid_fraction)" in labels, labels
    assert "no usable pixel (1 day, cloudy or no data)" in labels, labels
