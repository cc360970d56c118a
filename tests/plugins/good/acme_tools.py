"""A working plugin: tools that use the core (catalogs), a capability, a tool that fails."""

from typing import Annotated

from pydantic import Field

__version__ = "0.3.0"


def register(registry):
    catalogs = registry.catalogs

    def acme_echo(text: Annotated[str, Field(description="any text")]) -> str:
        """Return the text, reversed."""
        return text[::-1]

    def acme_collection_ids(catalog: str) -> list[str]:
        """The collection ids of a configured catalog, sorted."""
        return sorted(catalogs.get(catalog).collections)

    def acme_fail(message: str) -> str:
        """Always fails with a RuntimeError carrying `message`."""
        raise RuntimeError(message)

    def acme_collection(catalog: str, collection_id: str) -> dict:
        """A collection of a configured catalog (the core raises CollectionNotFound for a wrong id)."""
        return catalogs.get(catalog).collection(collection_id)

    registry.add_tool(acme_echo, annotations=registry.READ_ONLY)
    registry.add_tool(acme_collection_ids, annotations=registry.READ_ONLY)
    registry.add_tool(acme_fail)
    registry.add_tool(acme_collection)
    registry.add_capability("cloud_mask", {"sensors": ["sentinel-2"], "method": "threshold"})
