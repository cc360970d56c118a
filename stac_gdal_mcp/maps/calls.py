"""The library's results as the calls the map draws, and `MapView`: the map page in a notebook.

The map page draws tool calls (`{"tool", "arguments", "result"}`, the result as a tool returns it:
`structuredContent`, `content`). `map_call(result)` turns a result of the library into the call
of the tool that gives the same answer, built from the same result models the tools return (a
ranking's `CloudCover.result`, a search's `page`, a zonal table's `zone_layer`, an output's
record), so `build_map_view` sees in a notebook what it sees beside a tool result. Each kind of
result says how it is drawn (`map_call` of its module, found by operations/registry.py):

- `SearchResults` -> search_items: the page and the search's arguments (its bbox or geometry);
- `CloudCover` -> cloud_cover_stats: the ranking and its AOI;
- a `zonal_stats` table -> zonal_stats: the zones, coloured by the first statistic;
- a `time_series` table -> time_series: its AOI and the chart (drawn as the tool saves it);
- an `OutputRecord` -> the operation that wrote it, at its bbox; a `Preview` with its quicklook.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .page import map_page
from .view import build_map_view

if TYPE_CHECKING:
    from ..core import Core

FRAME_HEIGHT = 720  # CSS px of the notebook's frame (the page scrolls inside it when taller)


def map_call(result: Any) -> dict:
    """The call of the tool whose answer is `result` (see the module's docstring), as its kind
    draws it (operations/registry.py); an object of another kind is refused with one line naming
    its type."""
    from ..operations.registry import map_call as call_of

    return call_of(result)


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
