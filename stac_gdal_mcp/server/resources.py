"""The MCP face's names for things: resource URIs of outputs, and the links an output record
carries to them (the core store asks `record_links` how a record names itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..outputs import Link
    from ..settings import Settings

OUTPUT_URI = "stac-gdal://outputs/{output_id}"
OUTPUT_FILE_URI = "stac-gdal://outputs/{output_id}/file"


def output_uri(output_id: str) -> str:
    """The MCP resource holding an output's record."""
    return OUTPUT_URI.format(output_id=output_id)


def file_uri(output_id: str) -> str:
    """The MCP resource holding an output's file (when it is small enough)."""
    return OUTPUT_FILE_URI.format(output_id=output_id)


def record_links(settings: Settings):
    """How an output record links to itself on this server: `self` is its resource; `enclosure`
    the file's resource, when the file is small enough to be served (limits.max_resource_bytes)."""
    from ..outputs import Link

    limit = settings.limits.max_resource_bytes

    def links(output_id: str, media_type: str | None, size: int) -> list[Link]:
        found = [Link(rel="self", href=output_uri(output_id), type="application/geo+json")]
        if size <= limit:
            found.append(
                Link(
                    rel="enclosure",
                    href=file_uri(output_id),
                    type=media_type,
                    title="the file, as an MCP resource",
                )
            )
        return found

    return links
