"""Results of the tools that write outputs: the structured record, plus MCP `resource_link`
content blocks naming the output's resources, so a host fetches files when it wants them
instead of receiving them inline; and the result of a dry run (an estimate, nothing written).

A tool that may answer either (an output, or with `dry_run=true` an estimate) lists no output
schema: both answers are structured content (server/schemas.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .resources import file_uri, output_uri

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..models import MapLayer
    from ..operations.result import Answer
    from ..outputs import OutputRecord
    from ..processing.estimate import Estimate


def resource_links(records: Iterable[OutputRecord], max_file_bytes: int) -> list:
    """For each output: a link to its file resource (when it is small enough to be served as
    one, limits.max_resource_bytes) and a link to its record (STAC-like JSON)."""
    from mcp.types import ResourceLink

    links = []
    for record in records:
        name = Path(record.file.href).name
        size = record.file.file_size
        if size <= max_file_bytes:
            links.append(
                ResourceLink(
                    type="resource_link",
                    uri=file_uri(record.id),
                    name=name,
                    title=record.properties.title,
                    mime_type=record.file.type,
                    size=size,
                    description=f"the output file ({size:,} bytes)",
                )
            )
        links.append(
            ResourceLink(
                type="resource_link",
                uri=output_uri(record.id),
                name=f"{record.id}.json",
                mime_type="application/geo+json",
                description=(
                    "the output's record: footprint, CRS, bands, checksum, derived_from"
                    + ("" if size <= max_file_bytes else f"; the file ({size:,} bytes) is too large to serve")
                ),
            )
        )
    return links


def linked_result(
    value: BaseModel,
    records: Iterable[OutputRecord],
    max_file_bytes: int,
    *,
    extra=(),
    as_text: bool = True,
    layer: MapLayer | None = None,
):
    """A ToolResult: `value` as structured content (and as JSON text, as for any structured
    result, unless `as_text` is false), `extra` content blocks, then resource links to each of
    `records`; `layer` (what the map draws) in its `_meta`."""
    import pydantic_core
    from fastmcp.tools.base import ToolResult
    from mcp.types import TextContent

    structured = value.model_dump(mode="json")
    text = [TextContent(type="text", text=pydantic_core.to_json(structured).decode())] if as_text else []
    return ToolResult(
        content=[*extra, *text, *resource_links(records, max_file_bytes)],
        structured_content=structured,
        meta=layer.as_meta() if layer is not None else None,
    )


def answered(answer: Answer, max_file_bytes: int, *, area: dict | None = None):
    """The ToolResult of an operation's `Answer` (operations/registry.py): its images first, then
    its note, its value, and links to its records (files up to `max_file_bytes`); its map layer
    drawn at the call's `area` (`models.map_area`)."""
    from mcp.types import TextContent

    from ..models import MapLayer
    from .images import png_content

    extra = [png_content(png) for png in answer.images]
    if answer.note:
        extra.append(TextContent(type="text", text=answer.note))
    limit = max_file_bytes if answer.files else 0  # a folder is no file resource: its record only
    layer = (answer.layer or MapLayer()).over(area)
    return linked_result(
        answer.value, answer.records, limit, extra=extra, as_text=answer.as_text, layer=layer
    )


def estimate_result(estimate: Estimate, *, first: str | None = None, area: dict | None = None):
    """The answer of a dry run: the estimate as structured content, with a one-line summary
    (after `first`, a line saying why the estimate is the answer: a job not confirmed); the map
    draws the call's `area` (`models.map_area`) and the estimate's notes."""
    import pydantic_core
    from fastmcp.tools.base import ToolResult
    from mcp.types import TextContent

    from ..models import MapLayer

    structured = estimate.model_dump(mode="json")
    return ToolResult(
        content=[
            *([TextContent(type="text", text=first)] if first else []),
            TextContent(type="text", text=estimate.summary()),
            TextContent(type="text", text=pydantic_core.to_json(structured).decode()),
        ],
        structured_content=structured,
        meta=MapLayer(notes=estimate.notes).over(area).as_meta(),
    )
