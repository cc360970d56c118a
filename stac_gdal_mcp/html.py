"""HTML for Jupyter: how search results show as a table with thumbnails.

The page is filled from small templates (`string.Template`, every value escaped), so result
classes only gather the values. Thumbnails are `<img>` elements pointing at the item's thumbnail
href; a local thumbnail (a file in a local catalog) is inlined as a data URI when it is small,
so the notebook needs no file server.
"""

from __future__ import annotations

import base64
import html
import mimetypes
from collections.abc import Callable, Sequence
from pathlib import Path
from string import Template

MAX_ROWS = 25  # rows shown; the rest are counted
MAX_INLINE_BYTES = 64 * 1024  # local thumbnails larger than this are not inlined

_PAGE = Template(
    """<div class="stac-gdal-results">
<p><b>$title</b> $summary</p>
$notes<table>
<thead><tr>$head</tr></thead>
<tbody>
$rows
</tbody>
</table>
$more</div>"""
)
_ROW = Template("<tr>$cells</tr>")
_IMG = Template('<img src="$src" alt="$alt" loading="lazy" style="max-width:96px;max-height:96px">')


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def thumbnail_src(href: str | None, allowed: Callable[[Path], bool]) -> str | None:
    """What an <img> can show for `href`: an http(s) URL as it is, a small local image allowed
    by `allowed` as a data URI, nothing otherwise (s3://, large or unknown files)."""
    if not href:
        return None
    if href.startswith(("http://", "https://")):
        return href
    if "://" in href:
        return None
    path = Path(href)
    media = mimetypes.guess_type(path.name)[0]
    try:
        if not (media or "").startswith("image/") or not allowed(path):
            return None
        if path.stat().st_size > MAX_INLINE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def table(
    *,
    title: str,
    summary: str,
    columns: Sequence[str],
    rows: Sequence[dict],
    thumbnails: Sequence[str | None],
    notes: Sequence[str] = (),
    total: int | None = None,
) -> str:
    """An HTML table: a thumbnail column, then `columns` of each row (at most MAX_ROWS rows)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["thumbnail", *columns])
    body = []
    for row, src in list(zip(rows, thumbnails))[:MAX_ROWS]:
        image = (
            _IMG.substitute(src=html.escape(src, quote=True), alt=html.escape(_text(row.get("id"))))
            if src
            else ""
        )
        cells = [f"<td>{image}</td>"] + [f"<td>{html.escape(_text(row.get(c)))}</td>" for c in columns]
        body.append(_ROW.substitute(cells="".join(cells)))
    shown = min(len(rows), MAX_ROWS)
    more = f"<p>... {len(rows) - shown} more rows</p>\n" if len(rows) > shown else ""
    if total is not None and total > len(rows):
        more += f"<p>{total - len(rows)} more matches on further pages (next())</p>\n"
    notes_html = "".join(f"<p><i>{html.escape(n)}</i></p>\n" for n in notes)
    return _PAGE.substitute(
        title=html.escape(title),
        summary=html.escape(summary),
        notes=notes_html,
        head=head,
        rows="\n".join(body),
        more=more,
    )
