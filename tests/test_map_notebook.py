"""Session.map: the same map in a notebook. The view of the library's results is the view of
the tools' answers to the same calls; it shows inline as the standalone page, and the page and
the notebook frame draw it in headless Chromium (helpers and fixtures: map_pixels.py).
"""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

import map_pixels
import pytest
from map_pixels import (
    AOI,
    Projection,
    _slot,
    check_ground,
    check_outlines,
    screenshot,
)

from stac_gdal_mcp.maps import build_map_view

# The fixtures the page needs, found by pytest under these names in this module.
browser, served, page = map_pixels.browser, map_pixels.served, map_pixels.page


NOTEBOOK_AOI = [13.595, 45.915, 13.63, 45.94]
NOTEBOOK_SEARCH = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-09-30"}
NOTEBOOK_FIELDS = {
    "type": "FeatureCollection",
    "features": [
        {"type": "Feature", "id": zone_id, "properties": {},
         "geometry": {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}}
        for zone_id, (w, s, e, n) in {
            "vineyard": (13.600, 45.927, 13.610, 45.935), "meadow": (13.610, 45.920, 13.620, 45.927)
        }.items()
    ],
}  # fmt: skip


@pytest.fixture
def sample_session(tmp_path):
    from stac_gdal_mcp import Session
    from stac_gdal_mcp.settings import load_settings

    with Session(load_settings(default_catalog="sample", workspace=tmp_path / "workspace")) as opened:
        yield opened


async def _tool_views(session, calls: dict[str, dict]) -> dict[str, dict]:
    """build_map_view of each tool's answer as the server's tool gives it (with its map layer)."""
    from helpers import layered

    from stac_gdal_mcp.server import build_server

    views = {}
    mcp = build_server(session=session)
    for tool, arguments in calls.items():
        dumped = await layered(mcp, tool, arguments)
        assert not dumped.get("isError"), dumped
        views[tool] = build_map_view([{"tool": tool, "arguments": arguments, "result": dumped}])
    return views


def _without_thumbnails(view: dict) -> dict:
    return {**view, "footprints": [{**fp, "thumbnail": None} for fp in view["footprints"]]}


async def test_session_map_gives_the_view_of_the_tools_answers(sample_session):
    """session.map(ranking | search results | zonal table | time series).view is the view the
    page builds from the cloud_cover_stats, search_items, zonal_stats and time_series answers of
    the same calls; a search's local thumbnails are inlined (the tool names them by resource URI)."""
    session = sample_session
    search = {"catalog": "sample", **NOTEBOOK_SEARCH}
    tools = await _tool_views(
        session,
        {
            "cloud_cover_stats": {"aoi": NOTEBOOK_AOI, "search": search},
            "search_items": {**search, "bbox": NOTEBOOK_AOI},
            "zonal_stats": {"geometries": NOTEBOOK_FIELDS, "search": search},
            "time_series": {"aoi": NOTEBOOK_AOI, "search": search},
        },
    )
    ranking = session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH)
    assert len(ranking) == 5 and session.map(ranking).view == tools["cloud_cover_stats"]
    assert tools["cloud_cover_stats"]["aois"][0]["bbox"] == NOTEBOOK_AOI

    results = session.search(bbox=NOTEBOOK_AOI, **NOTEBOOK_SEARCH)
    mapped = session.map(results)
    assert _without_thumbnails(mapped.view) == _without_thumbnails(tools["search_items"])
    assert [fp["id"] for fp in mapped.view["footprints"]] == results.ids and len(results) == 5
    for summary, fp in zip(results.summaries, mapped.view["footprints"]):
        assert fp["thumbnail"] == summary.thumbnail and Path(summary.thumbnail).is_file()
        want = "data:image/png;base64," + base64.b64encode(Path(summary.thumbnail).read_bytes()).decode()
        assert mapped.thumbnails[summary.thumbnail] == want
    for fp in tools["search_items"]["footprints"]:  # the tool's: resources the host reads
        assert fp["thumbnail"] == f"stac://sample/collections/sentinel-2-l2a/items/{fp['id']}/thumbnail"

    zonal = session.map(session.zonal_stats(NOTEBOOK_FIELDS, **NOTEBOOK_SEARCH)).view
    assert zonal == tools["zonal_stats"] and [z["id"] for z in zonal["zones"][0]["zones"]] == [
        "vineyard",
        "meadow",
    ]
    series = session.map(session.time_series(NOTEBOOK_AOI, **NOTEBOOK_SEARCH)).view
    assert series["series"][0]["image"].startswith("data:image/png;base64,")
    assert series == tools["time_series"]  # the chart too: drawn as the tool saves it


def test_session_map_of_outputs_and_several_results(sample_session, tmp_path):
    """An output record at its bbox, a preview with its quicklook, several results on one map;
    anything else refused in one line naming its type."""
    from stac_gdal_mcp.errors import InvalidArgument
    from stac_gdal_mcp.maps.calls import local_thumbnails

    session = sample_session
    item = ("sentinel-2-l2a", "S2A_33TUL_20240619_0_L2A")
    preview = session.preview(item, "red", bbox=NOTEBOOK_AOI, max_size=64)
    ranking = session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH)
    both = session.map(ranking, session.search(ids=list(ranking["item_id"])), preview)
    view = both.view
    # the preview was asked for the same bbox: one AOI, the first call's
    assert view["aois"] == [{"bbox": NOTEBOOK_AOI, "geometry": None, "tool": "cloud_cover_stats"}]
    assert session.map(preview).view["aois"] == [{"bbox": NOTEBOOK_AOI, "geometry": None, "tool": "preview"}]
    assert sorted(fp["rank"] for fp in view["footprints"]) == list(range(5))  # each ranked scene's footprint
    (output,) = view["outputs"]  # the preview at its bbox, with its quicklook
    assert output["bbox"] == preview.record.bbox and output["id"] == preview.record.id
    assert output["image"] == "data:image/png;base64," + base64.b64encode(preview.png).decode()
    assert session.map(preview.record).view["outputs"] == [{**output, "image": None}]  # the record alone
    assert repr(both) == "<MapView aois=1 footprints=5 ranking=5 outputs=1>"
    outside = tmp_path / "elsewhere.png"  # an image outside the catalogs and the workspace
    outside.write_bytes(preview.png)
    inside = str(session.outputs.path(preview.record.id))
    assert local_thumbnails([str(outside), inside, "https://example.org/t.png"], session.core) == {
        inside: output["image"]
    }
    for wrong in (42, {"tool": "x"}, session):
        with pytest.raises(InvalidArgument) as caught:
            session.map(wrong)
        assert str(caught.value).endswith(f"not {type(wrong).__name__}") and "\n" not in str(caught.value)


def test_session_map_shows_inline_as_the_standalone_page(sample_session, tmp_path):
    """In Jupyter: one <iframe> whose srcdoc is the page `save` writes, with the calls in it."""
    mapped = sample_session.map(sample_session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH))

    class Frames(HTMLParser):
        def __init__(self):
            super().__init__()
            self.frames = []

        def handle_starttag(self, tag, attrs):
            self.frames.append((tag, dict(attrs)))

    parser = Frames()
    parser.feed(mapped._repr_html_())
    ((tag, attrs),) = parser.frames
    path = mapped.save(tmp_path / "map.html")
    assert tag == "iframe" and attrs["srcdoc"] == path.read_text(encoding="utf-8") == mapped.html()
    assert attrs["sandbox"] == "allow-scripts"
    assert json.loads(_slot(attrs["srcdoc"], "map-view")) == mapped.view
    assert build_map_view(mapped.calls) == mapped.view


@pytest.mark.testbed
def test_session_map_page_and_notebook_frame_draw_the_rankings_aoi(page, sample_session, tmp_path):
    """The page `session.map(ranking).save()` writes draws the ranking's AOI where it projects, on
    the bundled coastline; shown as in Jupyter (its <iframe srcdoc> in a page) it draws the same
    view, without waiting for a host."""
    mapped = sample_session.map(sample_session.cloud_cover(NOTEBOOK_AOI, **NOTEBOOK_SEARCH))
    page.goto(mapped.save(tmp_path / "map.html").as_uri())
    page.wait_for_selector("body[data-state=rendered]")
    assert page.evaluate("window.stacMap.view") == mapped.view
    proj = Projection(page)
    proj.check([NOTEBOOK_AOI])
    img = screenshot(page, tmp_path / "session-map.png")
    assert check_outlines(img, proj, [(NOTEBOOK_AOI, AOI)]) == 16
    assert check_ground(img, proj, [NOTEBOOK_AOI]) >= 20

    notebook = tmp_path / "notebook.html"
    notebook.write_text(f"<!doctype html><html><body style='margin:0'>{mapped._repr_html_()}</body></html>")
    page.goto(notebook.as_uri())
    page.frame_locator("iframe").locator("body[data-state=rendered]").wait_for()
    frame = next(f for f in page.frames if f != page.main_frame)
    assert frame.evaluate("window.stacMap.view") == mapped.view
    box = page.locator("iframe").bounding_box()
    for _ in range(10):  # the frame may lay out (and draw) again once it has its size
        proj = Projection(frame, offset=(box["x"] + 1, box["y"] + 1))  # inside the frame's 1 px border
        img = screenshot(page, tmp_path / "session-map-frame.png")
        if vars(Projection(frame, offset=(box["x"] + 1, box["y"] + 1))) == vars(proj):
            break
    assert check_outlines(img, proj, [(NOTEBOOK_AOI, AOI)]) == 16
    assert "host" not in frame.text_content("#status")
