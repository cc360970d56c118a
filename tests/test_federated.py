"""Federated search through the MCP client, against two real pgstac APIs holding overlapping
copies of the same scenes under each catalog's own ids, collection ids and property spellings.

The fixtures follow the catalogs' real conventions:

- Earth Search v1 (`earth-search`): Sentinel-2 L2A items `S2B_33TUL_20240604_0_L2A`
  (`<mission>_<MGRS tile>_<date>_<sequence>_L2A`) in `sentinel-2-l2a`; Landsat C2 L2 items
  `LC09_L2SP_190028_20240627_02_T1` (the USGS product id without its processing date) in
  `landsat-c2-l2`, platform `landsat-9`.
- Planetary Computer (`planetary-computer`): Sentinel-2 L2A items
  `S2B_MSIL2A_20240604T100559_R022_T33TUL_20240604T121345` (the ESA product name:
  `<mission>_MSIL2A_<datatake start>_R<relative orbit>_T<tile>_<product discriminator>`) in
  `sentinel-2-l2a`; its datetimes differ from Earth Search's by a fraction of a second, its
  `eo:cloud_cover` by a few percent.
- USGS LandsatLook (`usgs-landsat`): `LC09_L2SP_190028_20240627_20240628_02_T1_SR` (the full
  product id with processing date, `_SR`) in `landsat-c2l2-sr`, platform `LANDSAT_9`.

Planetary Computer and USGS live in the second pgstac (as two catalog entries on one URL).
Expected results are computed here from the scene list (which scene is in which catalog, and
which copies pass the filters), never with the code under test.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from discovery_data import matches
from fastmcp import Client
from helpers import found_items

from stac_gdal_mcp.testing import synthetic
from testbed import pgstac_for_pytest
from testbed.faults import Stall, serve_faults
from testbed.pgstac import free_port

pytestmark = pytest.mark.testbed

START = datetime(2024, 6, 1, 10, 5, 59, 24000, tzinfo=UTC)
TILES = {  # MGRS tile -> UTM 33N upper-left corner; neighbours overlap by ~20 km, like real tiles
    "33TUL": (300000.0, 5100000.0),
    "33TVL": (390000.0, 5100000.0),
}
PATH_ROWS = {"190028": (330000.0, 5090000.0), "190029": (300000.0, 4930000.0)}
BBOX = [11.0, 44.0, 15.0, 47.0]  # everything
WINDOW = "2024-06-05T00:00:00Z/2024-07-20T00:00:00Z"
MAX_CLOUD = 60.0


def _scenes():
    """Every acquisition: kind, key, datetime, platform, tile, and which catalogs hold a copy
    (with that copy's cloud cover)."""
    scenes = []
    for day in range(0, 50, 5):
        mission = "AB"[(day // 5) % 2]
        when = START + timedelta(days=day)
        for n, tile in enumerate(TILES):
            k = day // 5 * 2 + n
            copies = {}
            if k % 5 != 1:  # Earth Search misses some
                copies["earth-search"] = (k * 37) % 100
            if k % 4 != 2:  # Planetary Computer misses others
                copies["planetary-computer"] = ((k * 37) % 100 + (9 if k % 3 == 0 else -3)) % 100
            scenes.append(
                {
                    "kind": "sentinel-2-l2a",
                    "key": ("S2", mission, tile, when.date().isoformat()),
                    "when": when,
                    "mission": mission,
                    "tile": tile,
                    "copies": copies,
                }
            )
    for day in range(0, 48, 8):
        when = START.replace(hour=9, minute=48, second=12, microsecond=0) + timedelta(days=day + 2)
        for path_row in PATH_ROWS:
            k = day // 8 * 2 + int(path_row[-1])
            copies = {}
            if k % 3 != 0:
                copies["earth-search"] = (k * 23) % 100
            if k % 4 != 3:
                copies["usgs-landsat"] = ((k * 23) % 100 + 2) % 100
            scenes.append(
                {
                    "kind": "landsat-c2-l2",
                    "key": ("LS", "9" if day % 16 else "8", path_row, when.date().isoformat()),
                    "when": when,
                    "mission": "9" if day % 16 else "8",
                    "tile": path_row,
                    "copies": copies,
                }
            )
    return scenes


SCENES = _scenes()


def _copy(scene: dict, catalog: str) -> dict:
    """The item of `scene` as `catalog` spells it."""
    when, cloud = scene["when"], scene["copies"][catalog]
    if scene["kind"] == "sentinel-2-l2a":
        x, y = TILES[scene["tile"]]
        grid = {"transform": (10.0, 0.0, x, 0.0, -10.0, y), "shape": (1098, 1098)}
        platform = f"sentinel-2{scene['mission'].lower()}"
        if catalog == "earth-search":
            item_id = f"S2{scene['mission']}_{scene['tile']}_{when:%Y%m%d}_0_L2A"
        else:
            item_id = (
                f"S2{scene['mission']}_MSIL2A_{when:%Y%m%dT%H%M%S}_R022_T{scene['tile']}_{when:%Y%m%d}T121345"
            )
            when = when + timedelta(milliseconds=400)
        item = synthetic.item(
            "sentinel-2-l2a",
            item_id,
            when.isoformat(),
            collection_id="sentinel-2-l2a",
            cloud_cover=cloud,
            platform=platform,
            tile=scene["tile"],
            **grid,
        )
        if catalog == "planetary-computer" and scene["tile"] == "33TUL" and when.day % 2:
            for key in (
                "s2:mgrs_tile",
                "grid:code",
                "mgrs:utm_zone",
                "mgrs:latitude_band",
                "mgrs:grid_square",
            ):
                item["properties"].pop(key)  # no tile: matched on the footprint instead
        return item
    x, y = PATH_ROWS[scene["tile"]]
    grid = {"transform": (30.0, 0.0, x, 0.0, -30.0, y), "shape": (1000, 1000)}
    sat = scene["mission"]
    if catalog == "earth-search":
        item_id, platform, collection = (
            f"LC0{sat}_L2SP_{scene['tile']}_{when:%Y%m%d}_02_T1",
            f"landsat-{sat}",
            "landsat-c2-l2",
        )
    else:
        processed = when + timedelta(days=1)
        item_id = f"LC0{sat}_L2SP_{scene['tile']}_{when:%Y%m%d}_{processed:%Y%m%d}_02_T1_SR"
        platform, collection = f"LANDSAT_{sat}", "landsat-c2l2-sr"
    return synthetic.item(
        "landsat-c2-l2",
        item_id,
        when.isoformat(),
        collection_id=collection,
        cloud_cover=cloud,
        platform=platform,
        tile=scene["tile"],
        **grid,
    )


COPIES = {  # (catalog, item id) -> (scene key, item)
    (catalog, (item := _copy(scene, catalog))["id"]): (scene["key"], item)
    for scene in SCENES
    for catalog in scene["copies"]
}


def expected(bbox=None, start=None, end=None, max_cloud=None):
    """Scene key -> the (catalog, id) of every copy passing the filters, computed from the scene
    list with shapely and plain comparisons."""
    out: dict[tuple, set] = {}
    for (catalog, item_id), (key, item) in COPIES.items():
        if matches(item, bbox=bbox, start=start, end=end, max_cloud=max_cloud):
            out.setdefault(key, set()).add((catalog, item_id))
    return out


@pytest.fixture(scope="module")
def apis():
    es_items = [item for (cat, _), (_, item) in COPIES.items() if cat == "earth-search"]
    other = [item for (cat, _), (_, item) in COPIES.items() if cat != "earth-search"]
    with pgstac_for_pytest() as es, pgstac_for_pytest() as pc:
        es.load(
            [
                synthetic.collection("sentinel-2-l2a", "sentinel-2-l2a"),
                synthetic.collection("landsat-c2-l2", "landsat-c2-l2"),
            ],
            es_items,
        )
        pc.load(
            [
                synthetic.collection("sentinel-2-l2a", "sentinel-2-l2a"),
                synthetic.collection("landsat-c2-l2", "landsat-c2l2-sr"),
            ],
            other,
        )
        yield es, pc


def three_catalogs(apis) -> list[dict]:
    """earth-search on its API; planetary-computer and usgs-landsat on the other one."""
    es, pc = apis
    return [
        {"id": "earth-search", "url": es.url},
        {"id": "planetary-computer", "url": pc.url},
        {"id": "usgs-landsat", "url": pc.url},
    ]


@pytest.fixture
def settings(make_settings, apis):
    return make_settings(
        builtin_catalogs=False, catalogs=three_catalogs(apis), default_catalog="earth-search"
    )


CATALOGS = ["earth-search", "planetary-computer", "usgs-landsat"]
ARGS = {
    "collections": ["sentinel-2-l2a", "landsat-c2-l2"],
    "bbox": BBOX,
    "datetime": WINDOW,
    "max_cloud_cover": MAX_CLOUD,
}


async def search_all(client, limit, **args):
    """Every page of one search: (items in order, the pages)."""
    pages, cursor = [], None
    for _ in range(200):
        call = (
            {**args, "limit": limit}
            if cursor is None
            else {
                "catalog": args["catalog"],
                "cursor": cursor,
                "limit": limit,
                "detail": args.get("detail", "summary"),
            }
        )
        page = (await client.call_tool("search_items", call)).structured_content
        pages.append(page)
        cursor = page.get("next_cursor")
        if cursor is None:
            break
    return [i for p in pages for i in found_items(p)], pages


def check_against(items, want):
    got_keys = [COPIES[(i["catalog"], i["id"])][0] for i in items]
    assert len(got_keys) == len(set(got_keys)), "an acquisition came back twice"
    assert set(got_keys) == set(want)
    for item, key in zip(items, got_keys, strict=True):
        copies = {(item["catalog"], item["id"])} | {(a["catalog"], a["id"]) for a in item["also_in"]}
        assert copies == want[key], key
    for group in by_collection(items).values():  # (the answer's rows: in page order per collection)
        times = [datetime.fromisoformat(i["datetime"].replace("Z", "+00:00")) for i in group]
        assert times == sorted(times, reverse=True)


def by_collection(items) -> dict[str, list]:
    """`items` by collection, each in the order it came in (a search answer's table keeps the page
    order of the rows under each collection)."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(item["collection"], []).append(item)
    return groups


async def test_merged_deduplicated_result_equals_the_scene_list(build, settings):
    start, end = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in WINDOW.split("/"))
    want = expected(BBOX, start, end, MAX_CLOUD)
    assert (
        len(want) > 12 and any(len(c) == 2 for c in want.values()) and any(len(c) == 1 for c in want.values())
    )
    async with Client(build(settings)) as client:
        result = (
            await client.call_tool("search_items", {"catalog": CATALOGS, **ARGS, "limit": 100})
        ).structured_content
    check_against(found_items(result), want)
    assert result.get("next_cursor") is None
    by_catalog = {c["id"]: c for c in result["catalogs"]}
    for cid in CATALOGS:  # numberMatched of each API: its copies passing the filters
        n = sum(1 for copies in want.values() for cat, _ in copies if cat == cid)
        assert by_catalog[cid].get("matched") == n and by_catalog[cid].get("error") is None
    assert sum(c["returned"] for c in result["catalogs"]) == len(want)
    assert any("'landsat-c2l2-sr' in catalog 'usgs-landsat'" in n for n in result.get("notes", []))
    assert any("catalog 'usgs-landsat' has no 'sentinel-2-l2a'" in n for n in result.get("notes", []))
    # an Earth Search / Planetary Computer pair, as the issue asks
    pair = next(i for i in found_items(result) if i["id"].startswith("S2") and i["also_in"])
    assert {pair["catalog"], pair["also_in"][0]["catalog"]} == {"earth-search", "planetary-computer"}
    landsat = [i for i in found_items(result) if i["id"].startswith("LC") and i["also_in"]]
    assert landsat and all(a["id"].endswith("_SR") for i in landsat for a in i["also_in"])


@pytest.mark.parametrize("limit", [1, 3, 7])
async def test_paging_has_no_gaps_and_no_duplicates(build, settings, limit):
    start, end = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in WINDOW.split("/"))
    want = expected(BBOX, start, end, MAX_CLOUD)
    async with Client(build(settings)) as client:
        items, pages = await search_all(client, limit, catalog=CATALOGS, **ARGS)
        whole = (
            await client.call_tool("search_items", {"catalog": CATALOGS, **ARGS, "limit": 200})
        ).structured_content
    assert all(p["returned"] == limit for p in pages[:-1])
    check_against(items, want)
    pairs = {c: [(i["catalog"], i["id"]) for i in g] for c, g in by_collection(items).items()}
    assert pairs == {
        c: [(i["catalog"], i["id"]) for i in g] for c, g in by_collection(found_items(whole)).items()
    }


async def test_full_items_are_capped_by_max_result_bytes_and_page_on(build, make_settings, apis):
    settings = make_settings(
        builtin_catalogs=False,
        catalogs=three_catalogs(apis),
        default_catalog="earth-search",
        limits={"max_result_bytes": 20000},
    )
    start, end = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in WINDOW.split("/"))
    want = expected(BBOX, start, end, MAX_CLOUD)
    async with Client(build(settings)) as client:
        items, pages = await search_all(client, 10, catalog=CATALOGS, detail="full", **ARGS)
    assert all(0 < p["returned"] < 10 for p in pages[:-1])
    assert any("max_result_bytes" in n for n in pages[0].get("notes", []))
    summaries = [{**i, "datetime": i["properties"]["datetime"]} for i in items]
    check_against(summaries, want)
    assert all(i["type"] == "Feature" and i["assets"] for i in items)


async def test_other_sort_and_star(build, settings):
    """sortby eo:cloud_cover: still one copy per acquisition and sorted; "*" is every catalog."""
    want = expected(BBOX)
    async with Client(build(settings)) as client:
        items, _ = await search_all(
            client,
            4,
            catalog="*",
            collections=["sentinel-2-l2a", "landsat-c2-l2"],
            bbox=BBOX,
            sortby="eo:cloud_cover",
        )
    keys = [COPIES[(i["catalog"], i["id"])][0] for i in items]
    assert len(keys) == len(set(keys)) and set(keys) == set(want)
    for group in by_collection(items).values():
        clouds = [i["cloud_cover"] for i in group]
        assert clouds == sorted(clouds)


async def test_a_catalog_that_is_down_gives_a_partial_result(build, make_settings, apis, tmp_path):
    es, pc = apis
    closed = free_port()
    with serve_faults(tmp_path) as stalling:
        stalling.set_fault(None, Stall(seconds=30))
        settings = make_settings(
            builtin_catalogs=False,
            catalogs=[
                {"id": "earth-search", "url": es.url},
                {"id": "planetary-computer", "url": pc.url},
                {"id": "closed", "url": f"http://127.0.0.1:{closed}"},
                {"id": "stalling", "url": stalling.url},
            ],
            default_catalog="earth-search",
            network={"timeout_s": 1.5, "max_retries": 1},
        )
        want = {
            key: {c for c in copies if c[0] in ("earth-search", "planetary-computer")}
            for key, copies in expected(BBOX).items()
            if key[0] == "S2"
        }
        async with Client(build(settings)) as client:
            args = {"catalog": ["earth-search", "planetary-computer", "closed", "stalling"]}
            args |= {"collections": ["sentinel-2-l2a"], "bbox": BBOX}
            items, pages = await search_all(client, 6, **args)
    check_against(items, want)
    first = pages[0]
    by_catalog = {c["id"]: c for c in first["catalogs"]}
    assert by_catalog["closed"]["error"] and "unavailable" in by_catalog["closed"]["error"]
    assert by_catalog["stalling"]["error"]
    assert by_catalog["earth-search"].get("error") is None
    assert any("catalog 'closed' left out" in n for n in first.get("notes", []))
    assert any("catalog 'stalling' left out" in n for n in first.get("notes", []))
    assert all(any("'closed' was left out" in n for n in p.get("notes", [])) for p in pages[1:])


async def test_every_catalog_down_is_an_error(build, make_settings):
    settings = make_settings(
        builtin_catalogs=False,
        catalogs=[{"id": f"down{n}", "url": f"http://127.0.0.1:{free_port()}"} for n in range(2)],
        default_catalog="down0",
        network={"max_retries": 0},
    )
    async with Client(build(settings)) as client:
        result = await client.call_tool("search_items", {"catalog": "down0,down1"}, raise_on_error=False)
    assert result.is_error
    assert "every catalog failed" in result.content[0].text and "Traceback" not in result.content[0].text


async def test_a_cursor_is_bound_to_its_catalogs(build, settings):
    async with Client(build(settings)) as client:
        page = (
            await client.call_tool("search_items", {"catalog": CATALOGS, **ARGS, "limit": 2})
        ).structured_content
        other = await client.call_tool(
            "search_items", {"catalog": CATALOGS[:2], "cursor": page.get("next_cursor")}, raise_on_error=False
        )
        tampered = page.get("next_cursor")[:-3] + (
            "AAA" if not page.get("next_cursor").endswith("AAA") else "BBB"
        )
        bad = await client.call_tool(
            "search_items", {"catalog": CATALOGS, "cursor": tampered}, raise_on_error=False
        )
    assert other.is_error and "cursor belongs to catalog" in other.content[0].text
    assert bad.is_error and "cursor" in bad.content[0].text


def test_pairs_in_the_fixture_are_what_the_rule_must_find():
    """Sanity of the fixture itself: the copies differ in id, time (<1 s), cloud cover, collection."""
    for scene in SCENES:
        items = [_copy(scene, c) for c in scene["copies"]]
        for a, b in itertools.combinations(items, 2):
            assert a["id"] != b["id"]
            ta, tb = (
                datetime.fromisoformat(i["properties"]["datetime"].replace("Z", "+00:00")) for i in (a, b)
            )
            assert abs((ta - tb).total_seconds()) < 1


# --- the alias table and the rule, without services ---------------------------------------------


def test_aliases_are_data_extended_by_the_settings(make_settings):
    from stac_gdal_mcp.discovery import aliases

    settings = make_settings(
        catalogs=[{"id": "mine", "url": "https://stac.example.com"}],
        collection_aliases={
            "landsat-c2-l2": {"mine": ["ls-a", "ls-b"]},
            "sentinel-2-l2a": {"usgs-landsat": "s2"},
        },
    )
    assert aliases.resolve(settings, "usgs-landsat", ["landsat-c2-l2"]).collections == ["landsat-c2l2-sr"]
    assert aliases.resolve(settings, "mine", ["landsat-c2-l2", "other"]).collections == [
        "ls-a",
        "ls-b",
        "other",
    ]
    assert aliases.resolve(settings, "usgs-landsat", ["sentinel-2-l2a"]).collections == ["s2"]  # overridden
    plain = make_settings()
    left = aliases.resolve(plain, "usgs-landsat", ["sentinel-2-l2a"])
    assert left.nothing_to_ask and left.left_out == ["sentinel-2-l2a"]
    assert aliases.resolve(plain, "unknown-catalog", ["sentinel-2-l2a"]).collections == ["sentinel-2-l2a"]


def test_same_acquisition_rule():
    from stac_gdal_mcp.discovery.acquisitions import Facts, bbox_overlap, same_acquisition

    def facts(
        platform="LANDSAT_9", when="2024-06-27T09:48:12Z", bbox=(12.0, 45.0, 13.0, 46.0), stream=0, **props
    ):
        item = {"bbox": list(bbox), "properties": {"platform": platform, "datetime": when, **props}}
        return Facts.of(item, stream)

    es = facts("landsat-9", **{"landsat:wrs_path": "190", "landsat:wrs_row": "028"})
    usgs = facts(when="2024-06-27T09:48:14.9Z", stream=1, **{"grid:code": "WRS2-190028"})
    assert same_acquisition(es, usgs)  # platform spelling, 2.9 s, path/row in two spellings
    assert not same_acquisition(
        es, facts(when="2024-06-27T09:48:18Z", stream=1, **{"grid:code": "WRS2-190028"})
    )
    assert not same_acquisition(es, facts(stream=1, **{"grid:code": "WRS2-190029"}))  # another row
    assert not same_acquisition(es, facts("landsat-8", stream=1))
    assert not same_acquisition(es, facts(platform=None, stream=1))
    # no tile on one side: the footprints decide (half of the smaller bbox)
    assert same_acquisition(es, facts(bbox=(12.2, 45.0, 13.2, 46.0), stream=1))
    assert not same_acquisition(es, facts(bbox=(12.8, 45.0, 13.8, 46.0), stream=1))
    s2 = facts("Sentinel-2B", "2024-06-04T10:05:59Z", **{"s2:mgrs_tile": "33TUL"})
    twin = facts(
        "sentinel-2b",
        "2024-06-04T10:05:59.4Z",
        stream=1,
        **{"mgrs:utm_zone": 33, "mgrs:latitude_band": "T", "mgrs:grid_square": "UL"},
    )
    assert same_acquisition(s2, twin)
    assert bbox_overlap([179.0, 0.0, -179.0, 1.0], [179.5, 0.0, 180.0, 1.0]) == 1.0  # across the antimeridian
