"""The library's results as the calls the map draws, and `MapView`: the map page in a notebook.

The map page draws tool calls (`{"tool", "arguments", "result"}`, the result as a tool returns it:
`structuredContent`, `content`). `map_call(result)` turns a result of the library into the call
of the tool that gives the same answer, built from the same result models the tools return (a
ranking's `CloudCover.result`, a search's `page`, a zonal table's `zone_layer`, an output's
record), so `build_map_view` sees in a notebook what it sees beside a tool result:

- `SearchResults` -> search_items: the page and the search's arguments (its bbox or geometry);
- `CloudCover` -> cloud_cover_stats: the ranking and its AOI;
- a `zonal_stats` table -> zonal_stats: the zones, coloured by the first statistic;
- a `time_series` table -> time_series: its AOI and the chart (drawn here, as the tool saves it);
- an `OutputRecord` -> the operation that wrote it, at its bbox; a `Preview` with its quicklook.
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .page import map_page
from .view import build_map_view

if TYPE_CHECKING:
    from ..core import Core

ACCEPTED = (
    "search results, a cloud cover ranking, a zonal_stats or time_series table, an output record or a preview"
)
FRAME_HEIGHT = 720  # CSS px of the notebook's frame (the page scrolls inside it when taller)


def _image(png: bytes) -> dict:
    return {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()}


def _call(tool: str, arguments: dict, structured: dict, images: list[dict] = ()) -> dict:
    return {
        "tool": tool,
        "arguments": arguments,
        "result": {"content": list(images), "structuredContent": structured},
    }


def _record_call(record, png: bytes | None = None) -> dict:
    """An output (its record as the tools return it), with the operation's parameters as the
    call's arguments (the bbox or AOI it was asked for)."""
    expression = record.properties.processing_expression.get("expression") or {}
    arguments = dict(expression.get("parameters") or {})
    images = [_image(png)] if png is not None else []
    return _call(record.operation or "output", arguments, record.model_dump(mode="json"), images)


def _series_call(frame, provenance) -> dict:
    """A time series table: its rows and notes (no saved files), the chart as the tool draws it."""
    from ..operations.series import rows_of
    from ..operations.tables import write_chart

    facts = provenance.facts
    rows = rows_of(frame)
    chart = io.BytesIO()
    write_chart(chart, rows, title=provenance.title, ylabel=facts["ylabel"])
    structured = {
        "expression": facts["expression"],
        "reducer": facts["reducer"],
        "mask_clouds": facts["mask_clouds"],
        "rows": [r.model_dump(mode="json") for r in rows],
        "items": facts["items"],
        "notes": facts["notes"],
    }
    arguments = {"aoi": provenance.parameters.get("aoi"), "expression": facts["expression"]}
    return _call("time_series", arguments, structured, [_image(chart.getvalue())])


def _zonal_call(frame, provenance) -> dict:
    """A zonal statistics table: its zones with the first statistic's latest value."""
    from ..operations.zonal.result import zone_layer

    facts = provenance.facts
    structured = {
        "expression": facts["expression"],
        "per": facts["per"],
        "zone_layer": zone_layer(frame).model_dump(mode="json"),
        "notes": facts["notes"],
    }
    return _call("zonal_stats", {"expression": facts["expression"]}, structured)


def map_call(result: Any) -> dict:
    """The call of the tool whose answer is `result` (see the module's docstring); an object of
    another kind is refused with one line naming its type."""
    from ..errors import InvalidArgument
    from ..outputs import OutputRecord
    from ..processing.records import Provenance
    from ..results import CloudCover, Preview, SearchResults

    if isinstance(result, SearchResults):
        return _call("search_items", result.search_arguments, result.page.model_dump(mode="json"))
    if isinstance(result, CloudCover):
        return _call("cloud_cover_stats", {}, result.result.model_dump(mode="json"))
    if isinstance(result, Preview):
        return _record_call(result.record, result.png)
    if isinstance(result, OutputRecord):
        return _record_call(result)
    provenance = Provenance.of(result) if hasattr(result, "columns") else None
    if provenance is not None and provenance.kind == "zonal_stats":
        return _zonal_call(result, provenance)
    if provenance is not None and provenance.kind == "time_series":
        return _series_call(result, provenance)
    raise InvalidArgument(f"map takes {ACCEPTED}, not {type(result).__name__}")


def local_thumbnails(refs, core: Core) -> dict[str, str]:
    """The thumbnails among `refs` that are small image files of a local catalog (or the
    workspace), as `data:` URIs: the page shows them with no file server."""
    from ..catalogs.security import check_local_path
    from ..errors import StacGdalMcpError
    from ..html import thumbnail_src
    from ..processing.access import local_roots

    roots = local_roots(core)
    inlined = {}
    for ref in sorted(set(refs)):
        if "://" in ref:
            continue  # http(s): the page shows it where allowed; other URIs: not files here
        try:
            check_local_path(ref, roots)  # a file of a local catalog or the workspace, not any file
        except StacGdalMcpError:  # refused: outside those folders, not a path
            continue
        src = thumbnail_src(ref, lambda path: True)  # small images only
        if src is not None:
            inlined[ref] = src
    return inlined


@dataclass(frozen=True)
class MapView:
    """The map of some results, as the MCP App draws them: `view` is its view data, `html()` the
    standalone page (`save(path)` writes it); in Jupyter it shows inline, offline (the page in an
    `<iframe srcdoc>`: its coastline is bundled, its thumbnails inlined)."""

    calls: list[dict]
    thumbnails: dict[str, str] = field(default_factory=dict, repr=False)
    options: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, results, core: Core | None = None, **options: Any) -> MapView:
        """The map of `results` (see `map_call`); with `core`, local thumbnails are inlined.
        `options`: basemap (a `{z}/{x}/{y}` tile URL, drawn where the network allows), attribution."""
        calls = [map_call(r) for r in results]
        refs = [fp["thumbnail"] for fp in build_map_view(calls)["footprints"] if fp["thumbnail"]]
        thumbnails = local_thumbnails(refs, core) if core is not None and refs else {}
        return cls(calls, thumbnails, {k: v for k, v in options.items() if v is not None})

    @property
    def view(self) -> dict[str, Any]:
        """The view data (as `build_map_view` gives for the tools' answers)."""
        return build_map_view(self.calls)

    def html(self) -> str:
        """The standalone page drawing the calls."""
        return map_page(self.calls, thumbnails=self.thumbnails, **self.options)

    def save(self, path) -> Path:
        """Write the standalone page to `path` (open it in a browser); returns the path."""
        path = Path(path)
        path.write_text(self.html(), encoding="utf-8")
        return path

    def _repr_html_(self) -> str:
        return (
            f'<iframe srcdoc="{html.escape(self.html(), quote=True)}" sandbox="allow-scripts" '
            f'title="stac-gdal-mcp map" style="width:100%;height:{FRAME_HEIGHT}px;border:1px solid #ddd">'
            "</iframe>"
        )

    def __repr__(self) -> str:
        view = self.view
        counts = {k: len(view[k]) for k in ("aois", "footprints", "ranking", "zones", "series", "outputs")}
        return "<MapView " + " ".join(f"{k}={n}" for k, n in counts.items() if n) + ">"
