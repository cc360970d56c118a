"""The workspace as a static STAC catalog: outputs made through the MCP client (a composite and a
reproject on the bundled sample catalog) are found by search_items(catalog="workspace"), and the
catalog on disk is valid STAC.

Validation: the STAC API JSON schemas of the extensions (projection, raster, file, processing)
live on the internet, which the tests cannot reach, so `validate_all()` cannot run here. What is
checked instead: pystac reads the catalog, every collection and every item; every document on
disk validates against the core STAC 1.1.0 JSON schemas that pystac ships (offline, through
`pystac.validation.validate_dict(..., extensions=[])`); every link and asset href resolves to a
file, and each asset's `file:size` and `file:checksum` match the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pystac
import pystac.validation
from fastmcp import Client
from helpers import found_items

AOI = [13.60, 45.92, 13.62, 45.935]  # inside the sample catalog's scenes
JUNE_JULY = "2024-06-01/2024-07-31"


async def call(client, tool: str, **args) -> dict:
    """The structured answer of `tool` called with `args` through `client`."""
    return (await client.call_tool(tool, args)).structured_content


async def reproject(client, asset: str) -> dict:
    """The record of `asset` of the sample's June 4 scene inside AOI, warped to EPSG:4326."""
    scene = {"catalog": "sample", "collection_id": "sentinel-2-l2a", "item_id": "S2B_33TUL_20240604_0_L2A"}
    return await call(client, "reproject_asset", **scene, asset=asset, dst_crs="EPSG:4326", bbox=AOI)


def documents(workspace: Path) -> list[Path]:
    return [workspace / "catalog.json", *sorted((workspace / "stac").glob("*/collection.json"))] + sorted(
        (workspace / "stac").glob("*/items/*.json")
    )


def check_static_catalog(workspace: Path) -> list[str]:
    """Validate as the module docstring says; return the item ids."""
    root = pystac.Catalog.from_file(str(workspace / "catalog.json"))
    collections = list(root.get_all_collections())
    items = list(root.get_items(recursive=True))
    assert {c.id for c in collections} == {
        p.parent.name for p in (workspace / "stac").glob("*/collection.json")
    }
    for path in documents(workspace):
        doc = json.loads(path.read_text())
        pystac.validation.validate_dict(doc, extensions=[], href=str(path))  # core schemas, offline
        for link in doc["links"]:
            if "://" not in link["href"]:
                assert (path.parent / link["href"]).resolve().is_file(), (path, link)
        for asset in doc.get("assets", {}).values():
            file = (path.parent / asset["href"]).resolve()
            data = file.read_bytes()
            assert asset["file:size"] == len(data)
            assert asset["file:checksum"] == "1220" + hashlib.sha256(data).hexdigest()
    for item in items:  # pystac resolves the same files through the links
        assert Path(item.assets["data"].get_absolute_href()).is_file()
        assert item.collection_id == item.get_parent().id
    return [i.id for i in items]


async def test_workspace_catalog_finds_a_composite_and_validates(build, make_settings):
    settings = make_settings(default_catalog="sample")
    workspace = settings.workspace
    async with Client(build(settings)) as client:
        composite = await call(
            client,
            "composite",
            aoi=AOI,
            bands=["red", "nir"],
            search={"catalog": "sample", "collections": ["sentinel-2-l2a"], "datetime": JUNE_JULY},
        )
        made = composite["output"]["id"]
        found = await call(client, "search_items", catalog="workspace")
        assert [i["id"] for i in found_items(found)] == [made]
        assert found_items(found)[0]["collection"] == "composite"

        record = await reproject(client, "red")
        both = await call(client, "search_items", catalog="workspace", bbox=AOI)
        assert {i["id"] for i in found_items(both)} == {made, record["id"]}
        only = await call(
            client, "search_items", catalog="workspace", collections=["reproject_asset"], detail="full"
        )
        assert [i["id"] for i in found_items(only)] == [record["id"]]
        assert Path(found_items(only)[0]["assets"]["data"]["href"]) == Path(record["assets"]["data"]["href"])
        june_4 = await call(client, "search_items", catalog="workspace", datetime="2024-06-04")
        assert record["id"] in {i["id"] for i in found_items(june_4)}  # the source's time

        listed = await call(client, "list_catalogs")
        assert "workspace" in {c["id"] for c in listed["catalogs"]}
        outputs = await call(client, "list_outputs")

    ids = check_static_catalog(workspace)
    assert sorted(ids) == sorted(o["id"] for o in outputs["outputs"]) == sorted([made, record["id"]])
    item = json.loads((workspace / "stac" / "composite" / "items" / f"{made}.json").read_text())
    assert item["properties"]["start_datetime"] and item["properties"]["end_datetime"]  # several dates
    assert any(link["rel"] == "derived_from" for link in item["links"])


async def test_deleting_an_output_removes_it_from_the_catalog(build, make_settings):
    settings = make_settings(default_catalog="sample")
    async with Client(build(settings)) as client:
        ids = []
        for asset in ("red", "nir"):
            record = await reproject(client, asset)
            ids.append(record["id"])
        assert {i["id"] for i in found_items(await call(client, "search_items", catalog="workspace"))} == set(
            ids
        )
        await call(client, "delete_output", output_id=ids[0])
        assert [i["id"] for i in found_items(await call(client, "search_items", catalog="workspace"))] == [
            ids[1]
        ]
    assert check_static_catalog(settings.workspace) == [ids[1]]
    assert not (settings.workspace / "stac" / "reproject_asset" / "items" / f"{ids[0]}.json").exists()


async def test_a_time_series_table_and_chart_are_found_by_place(build, make_settings):
    """A CSV and a PNG chart have no raster footprint: the workspace gives them their AOI."""
    settings = make_settings(default_catalog="sample")
    polygon = {
        "type": "Polygon",
        "coordinates": [[[13.60, 45.92], [13.62, 45.92], [13.62, 45.935], [13.60, 45.935], [13.60, 45.92]]],
    }
    async with Client(build(settings)) as client:
        series = await call(
            client,
            "time_series",
            aoi=polygon,
            search={"catalog": "sample", "collections": ["sentinel-2-l2a"], "datetime": JUNE_JULY},
        )
        made = {series["csv"]["id"], series["chart"]["id"]}
        here = await call(client, "search_items", catalog="workspace", bbox=[13.61, 45.925, 13.615, 45.93])
        elsewhere = await call(client, "search_items", catalog="workspace", bbox=[10.0, 40.0, 10.1, 40.1])
    assert {i["id"] for i in found_items(here)} == made
    assert found_items(elsewhere) == []
    for item in found_items(here):
        assert item["bbox"] == [13.60, 45.92, 13.62, 45.935]
    assert sorted(check_static_catalog(settings.workspace)) == sorted(made)


async def test_an_output_is_an_input_by_reference_in_the_workspace_catalog(build, make_settings):
    """collection_id + item_id + asset with catalog="workspace" resolve an output as an input
    (processing takes the workspace catalog's config from the catalogs, not the settings)."""
    settings = make_settings(default_catalog="sample")
    async with Client(build(settings)) as client:
        record = await reproject(client, "red")
        info = await call(
            client,
            "inspect_asset",
            catalog="workspace",
            collection_id="reproject_asset",
            item_id=record["id"],
            asset="data",
        )
    assert info["item_id"] == record["id"] and info["crs"] == "EPSG:4326"
