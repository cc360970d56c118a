"""The map: one page (maps/map.html with the Natural Earth coastline inlined) that the MCP
App shows beside a tool result and a notebook shows inline (`Session.map`).

- `build_map_view(calls)`: the page's view data from tool calls, the one place it is built
  (view.py): the page only draws it;
- `map_html`, `map_page(calls)`: the page, and the page with the calls' view in it (page.py);
- `map_call(result)`, `MapView`: the library's results as those calls, and the map of them in a
  notebook (calls.py).
"""

from .calls import MapView, map_call
from .page import map_html, map_page, tile_origin
from .view import build_map_view

__all__ = ["MapView", "build_map_view", "map_call", "map_html", "map_page", "tile_origin"]
