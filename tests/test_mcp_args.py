"""Array and object arguments given as JSON text, as MCP Inspector CLI 0.15 and several LLM hosts
send them, through an MCP client on the bundled `sample` catalog: each call must give what the
same call with real arrays and objects gives. Then what clients read in `tools/list`: every
parameter described, every array/object parameter with one JSON type (the JSON text is the
server's coercion, not a second type); and the shapes of list_catalogs and list_extensions."""

import json

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import found_items

AOI = [13.60, 45.92, 13.62, 45.935]  # a few fields inside the sample catalog's area
POLYGON = {
    "type": "Polygon",
    "coordinates": [[[13.60, 45.92], [13.62, 45.92], [13.62, 45.935], [13.60, 45.935], [13.60, 45.92]]],
}
S2 = "sentinel-2-l2a"
JUNE_JULY = "2024-06-01/2024-07-31"


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One session and server for the module (building one per test cost half a second each)."""
    from stac_gdal_mcp import Session
    from stac_gdal_mcp.settings import load_settings

    workspace = tmp_path_factory.mktemp("mcp-args") / "workspace"
    with Session(load_settings(workspace=workspace, network={"allow_private_hosts": True})) as session:
        yield session


@pytest.fixture(scope="module")
def mcp(session):
    from stac_gdal_mcp.server import build_server

    return build_server(session=session)


def as_text(arguments: dict) -> dict:
    """The arguments as such a client sends them: every array and object as JSON text."""
    return {k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in arguments.items()}


async def both(client, tool: str, arguments: dict) -> tuple[dict, dict]:
    real = await client.call_tool(tool, arguments)
    text = await client.call_tool(tool, as_text(arguments))
    return real.structured_content, text.structured_content


# --- the same results from JSON text -----------------------------------------------------------


async def test_search_items_bbox_collections_sortby_as_text(mcp):
    arguments = {
        "catalog": "sample",
        "collections": [S2, "landsat-c2-l2"],
        "bbox": AOI,
        "datetime": JUNE_JULY,
        "sortby": ["-datetime"],
        "limit": 50,
    }
    async with Client(mcp) as client:
        real, text = await both(client, "search_items", arguments)
    assert len(found_items(real)) >= 4 and real.get("matched") == len(found_items(real))
    assert text == real
    for collection in {i["collection"] for i in found_items(real)}:  # (rows in page order per collection)
        dates = [i["datetime"] for i in found_items(real) if i["collection"] == collection]
        assert dates == sorted(dates, reverse=True)


async def test_search_items_intersects_ids_query_filter_as_text(mcp):
    async with Client(mcp) as client:
        everything = (
            await client.call_tool("search_items", {"catalog": "sample", "limit": 50})
        ).structured_content
        s2 = [i for i in found_items(everything) if i["collection"] == S2]
        ids = [i["id"] for i in s2]
        arguments = {
            "catalog": "sample",
            "intersects": POLYGON,
            "ids": ids,
            "query": {"eo:cloud_cover": {"lte": 20}},
            "filter": {"op": "<=", "args": [{"property": "eo:cloud_cover"}, 20]},
            "filter_lang": "cql2-json",
        }
        real, text = await both(client, "search_items", arguments)
    want = sorted(i["id"] for i in s2 if i["cloud_cover"] <= 20)
    assert want and sorted(i["id"] for i in found_items(real)) == want
    assert text == real


async def test_cloud_cover_stats_aoi_search_and_items_as_text(mcp):
    items = [
        {"collection_id": S2, "item_id": "S2B_33TUL_20240604_0_L2A"},
        {"collection_id": "landsat-c2-l2", "item_id": "LC08_L2SP_190028_20240806_02_T1"},
    ]
    async with Client(mcp) as client:
        for arguments in (
            {"aoi": AOI, "search": {"catalog": "sample", "collections": [S2], "datetime": JUNE_JULY}},
            {"aoi": POLYGON, "search": {"catalog": "sample", "collections": [S2], "datetime": JUNE_JULY}},
            {"aoi": AOI, "search": {"catalog": "sample", "items": items}},
        ):
            real, text = await both(client, "cloud_cover_stats", arguments)
            assert real["items"] and all("error" not in row for row in real["items"])
            assert text == real
        # the JSON text may also be inside the search object
        nested = await client.call_tool(
            "cloud_cover_stats", {"aoi": AOI, "search": {"catalog": "sample", "items": json.dumps(items)}}
        )
    assert sorted(r["item_id"] for r in nested.structured_content["items"]) == sorted(
        i["item_id"] for i in items
    )


async def test_time_series_aoi_as_text(mcp):
    arguments = {"aoi": AOI, "search": {"catalog": "sample", "collections": [S2], "datetime": JUNE_JULY}}
    async with Client(mcp) as client:
        real, text = await both(client, "time_series", arguments)
        polygon = (
            await client.call_tool("time_series", as_text({**arguments, "aoi": POLYGON}))
        ).structured_content
    assert len(real["rows"]) >= 2
    for result in (text, polygon):
        assert result["rows"] == real["rows"] and result["grid"] == real["grid"]
        assert result["csv"]["id"] != real["csv"]["id"]  # a new output each call


async def test_composite_aoi_and_bands_as_text(mcp, session):
    arguments = {
        "aoi": AOI,
        "bands": ["red", "nir"],
        "search": {"catalog": "sample", "collections": [S2], "datetime": JUNE_JULY},
    }
    async with Client(mcp) as client:
        real, text = await both(client, "composite", arguments)
    same = ("bands", "items", "valid_fraction", "grid")
    assert {k: text[k] for k in same} == {k: real[k] for k in same}
    assert real["bands"] == ["red", "nir"] and real["items"] >= 2
    store = session.outputs
    with (
        rasterio.open(store.path(real["output"]["id"])) as a,
        rasterio.open(store.path(text["output"]["id"])) as b,
    ):
        assert a.count == b.count == 2 and a.transform == b.transform
        np.testing.assert_array_equal(a.read(), b.read())


async def test_comma_separated_text_keeps_its_meaning(mcp):
    """Parameters with a text form of their own (collections, sortby) still take it."""
    async with Client(mcp) as client:
        listed = await client.call_tool(
            "search_items",
            {"catalog": "sample", "collections": f"{S2},landsat-c2-l2", "sortby": "-datetime", "limit": 50},
        )
        as_json = await client.call_tool(
            "search_items",
            {"catalog": "sample", "collections": json.dumps([S2, "landsat-c2-l2"]), "limit": 50},
        )
    assert {i["id"] for i in found_items(listed.structured_content)} == {
        i["id"] for i in found_items(as_json.structured_content)
    }
    assert len(found_items(listed.structured_content)) == 8


@pytest.mark.parametrize(
    ("tool", "arguments", "name"),
    [
        ("search_items", {"catalog": "sample", "bbox": "[13.6, 45.92, 13.62"}, "bbox"),
        ("search_items", {"catalog": "sample", "intersects": '{"type": "Polygon",'}, "intersects"),
        ("search_items", {"catalog": "sample", "ids": "S2A_33TUL_20240619_0_L2A"}, "ids"),
        ("search_items", {"catalog": "sample", "collections": '["sentinel-2-l2a"'}, "collections"),
        ("cloud_cover_stats", {"search": {"catalog": "sample"}, "aoi": "{'type': 'Point'}"}, "aoi"),
        ("cloud_cover_stats", {"aoi": AOI, "search": {"catalog": "sample", "items": "[{]"}}, "search.items"),
        ("time_series", {"search": {"catalog": "sample"}, "aoi": "13.6 45.92 13.62 45.935"}, "aoi"),
        ("time_series", {"aoi": AOI, "search": '{"catalog": "sample"'}, "search"),
        ("composite", {"search": {"catalog": "sample"}, "aoi": AOI, "bands": "red, nir"}, "bands"),
    ],
)
async def test_bad_json_text_is_one_line_naming_the_parameter(mcp, tool, arguments, name):
    async with Client(mcp) as client:
        result = await client.call_tool(tool, arguments, raise_on_error=False)
    text = result.content[0].text
    assert result.is_error
    assert "\n" not in text and "errors.pydantic.dev" not in text
    assert f"{name} is not valid JSON text (" in text, text
    assert text.startswith(f"invalid arguments for {tool}: ") or name == "collections", text


# --- what clients see in tools/list ------------------------------------------------------------


def _types(schema: dict) -> set[str]:
    found = set()
    if isinstance(schema.get("type"), str):
        found.add(schema["type"])
    if isinstance(schema.get("type"), list):
        found |= set(schema["type"])
    if "$ref" in schema:
        found.add("object")
    for option in schema.get("anyOf", []) + schema.get("oneOf", []):
        found |= _types(option)
    return found


async def test_every_parameter_of_every_tool_has_a_description(mcp):
    async with Client(mcp) as client:
        tools = await client.list_tools()
    assert len(tools) >= 15
    missing = [
        f"{tool.name}.{name}"
        for tool in tools
        for name, schema in tool.input_schema.get("properties", {}).items()
        if not (schema.get("description") or "").strip()
    ]
    assert missing == []


async def test_array_and_object_parameters_list_one_type_and_take_json_text(mcp):
    """Every array or object parameter lists its one JSON type (no "string" beside it: portable,
    see test_tool_schemas.py); the tests above send each as JSON text, which the server parses;
    the server's instructions say it does."""
    async with Client(mcp) as client:
        tools = await client.list_tools()
        instructions = client.instructions
    checked = []
    for tool in tools:
        for name, schema in tool.input_schema.get("properties", {}).items():
            if _types(schema) & {"array", "object"}:
                checked.append(f"{tool.name}.{name}")
                assert "string" not in _types(schema), f"{tool.name}.{name}"
    assert {
        "search_items.bbox",
        "cloud_cover_stats.search",
        "time_series.search",
        "composite.bands",
        "convert_asset.creation_options",
    } <= set(checked)
    props = {t.name: t.input_schema["properties"] for t in tools}
    assert props["preview"]["bbox"]["minItems"] == props["preview"]["bbox"]["maxItems"] == 4
    search = props["composite"]["search"]
    assert search["type"] == "object" and "search_items" in search["description"]
    assert "items" in props["cloud_cover_stats"]["search"]["description"]
    assert "JSON text" in instructions


async def test_unknown_search_argument_is_one_line_naming_the_known_ones(mcp):
    async with Client(mcp) as client:
        result = await client.call_tool(
            "composite",
            {"aoi": AOI, "bands": ["red"], "search": {"catalog": "sample", "cloud": 10}},
            raise_on_error=False,
        )
    text = result.content[0].text
    assert result.is_error and "\n" not in text
    assert text.startswith("invalid arguments for composite: search: unknown search argument 'cloud'; ")
    assert "collections, datetime" in text


async def test_an_area_inside_search_names_the_tools_own_area_argument(mcp):
    async with Client(mcp) as client:
        result = await client.call_tool(
            "composite",
            {"aoi": AOI, "bands": ["red"], "search": {"catalog": "sample", "bbox": AOI}},
            raise_on_error=False,
        )
    text = result.content[0].text
    assert result.is_error and "\n" not in text
    assert "'bbox' is not part of `search`: the area is the tool's own argument" in text
    assert "unknown search argument" not in text


async def test_unknown_search_arguments_with_line_breaks_stay_on_one_short_line(mcp):
    odd = {f"x{i}\nfake line {i}": i for i in range(40)}  # found by the long fuzzing lane
    async with Client(mcp) as client:
        result = await client.call_tool(
            "time_series", {"aoi": AOI, "search": {"catalog": "sample", **odd}}, raise_on_error=False
        )
    text = result.content[0].text
    assert result.is_error and "\n" not in text and len(text) < 500, text
    assert "unknown search arguments 'x0\\nfake line 0', " in text and " and 35 more; " in text


# --- result shapes -----------------------------------------------------------------------------


async def test_list_catalogs_is_an_object_with_catalogs(mcp):
    async with Client(mcp) as client:
        result = await client.call_tool("list_catalogs", {})
        resource = json.loads((await client.read_resource("stac://catalogs"))[0].text)
    assert list(result.structured_content) == ["catalogs"]
    ids = [c["id"] for c in result.structured_content["catalogs"]]
    assert "sample" in ids and "earth-search" in ids
    assert [c["id"] for c in resource["catalogs"]] == ids


async def test_list_extensions_with_nothing_installed_says_so(mcp):
    async with Client(mcp) as client:
        result = await client.call_tool("list_extensions", {})
    assert result.structured_content == {"extensions": []}
    assert json.loads(result.content[0].text) == {"extensions": []}


async def test_an_unknown_argument_is_answered_with_the_nearest_names(mcp, session):
    """A mistyped argument name: every tool (an operation's, a discovery tool) names the nearest
    parameters it takes, and the library's method the nearest of its own."""
    from stac_gdal_mcp.errors import InvalidArgument

    async with Client(mcp) as client:
        for tool, arguments, near in (
            ("cloud_cover_stats", {"aoi": AOI, "serch": {"catalog": "sample"}}, "'search'"),
            ("reproject_asset", {"href": "x.tif", "dst_cr": "EPSG:4326"}, "'dst_crs'"),
            ("search_items", {"collection": [S2]}, "'collections'"),
        ):
            result = await client.call_tool(tool, arguments, raise_on_error=False)
            message = result.content[0].text
            assert result.is_error and "\n" not in message, message
            assert f"did you mean {near}" in message, message
    with pytest.raises(InvalidArgument, match="did you mean 'reducer'"):
        session.time_series(AOI, reduce="median", catalog="sample")
    with pytest.raises(InvalidArgument, match="did you mean 'dst_crs'"):
        session.reproject("x.tif", dst_cr="EPSG:4326")


def test_tools_and_methods_are_made_from_the_operations_fields(mcp):
    """Each operation's tool lists its class's fields (library-only ones left out, the tool's
    own options added), described; the Session's method takes each field with its default."""
    import asyncio
    import inspect

    from stac_gdal_mcp import Session
    from stac_gdal_mcp.operations import OPERATIONS

    async def listed():
        async with Client(mcp) as client:
            return {t.name: t.input_schema for t in await client.list_tools()}

    schemas = asyncio.run(listed())
    for name, cls in OPERATIONS.items():
        options = [o for o in ("quicklook", "dry_run", "confirm") if getattr(cls.tool, o)]
        properties = schemas[name]["properties"]
        assert list(properties) == [*cls.tool_parameters(), *options], name
        assert all(p.get("description") for p in properties.values()), name
        signature = inspect.signature(getattr(Session, cls.library_name))
        for field, info in cls.model_fields.items():
            if field == "search":
                continue  # its names are keywords (**search)
            parameter = signature.parameters[field]
            assert info.is_required() or parameter.default == info.get_default(call_default_factory=True)
