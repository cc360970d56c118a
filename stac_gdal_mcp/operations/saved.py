"""Results that are already saved or fetched (`registry.py`, `operations.RESULTS`):

- "output": an `OutputRecord` (reproject_asset, convert_asset, save_search write one as they
  run): answered as itself with links to its resources (and with `quicklook`, a PNG of its file;
  a folder of files gets a link to its record only), drawn at its bbox;
- "search": a page of `SearchResults`, drawn as the search_items call that found it.
"""

from __future__ import annotations

from .registry import Answer, Results, call, image


class Output(Results):
    """An output record: it keeps itself, answers as itself, is drawn at its bbox."""

    @staticmethod
    def outputs(core, record, job) -> tuple:
        return (record,)

    @staticmethod
    def answer(core, record, records, limits, *, quicklook: bool = False) -> Answer:
        path = core.outputs.path(record.id)
        images = (quicklook_png(path),) if quicklook else ()
        layer = record_layer(record, 0 if images else None)
        return Answer(record, records, images, note=saved_note(record), files=not path.is_dir(), layer=layer)

    @staticmethod
    def map_call(record) -> dict:
        return record_call(record)


class SearchPage(Results):
    """A page of search results: drawn as the search_items call that found it."""

    @staticmethod
    def map_call(results) -> dict:
        from ..models import MapLayer, map_area

        page = {k: v for k, v in results.page.model_dump(mode="json").items() if k != "items"}
        fields = {"area": map_area(results.search_arguments), "notes": page.get("notes") or []}
        return call(
            "search_items", results.search_arguments, page, layer=MapLayer.of_items(results.items, **fields)
        )


def saved_note(record) -> str | None:
    """For a saved search: how many items it holds of how many matched, and why it stopped -
    "500 of 716 items saved: limits.max_items; pass max_items to save more"; None for another
    output."""
    from ..words import counted

    extra = record.properties.model_extra or {}
    written = extra.get("search:items")
    if written is None:
        return None
    matched = extra.get("search:matched")
    if not extra.get("search:more"):
        return f"{counted(written, 'item', thousands=True)} saved: every item the search matched"
    of = f"{matched:,}" if matched is not None else f"more than {written:,}"
    parameters = (record.properties.processing_expression.get("expression") or {}).get("parameters") or {}
    asked = parameters.get("max_items")
    why = f"max_items={asked:,}; pass a larger" if asked is not None else "limits.max_items; pass"
    return f"{written:,} of {of} items saved: {why} max_items to save more"


def quicklook_png(path) -> bytes:
    """A quicklook of an output's raster file."""
    from ..processing.quicklook import quicklook_png as png

    return png(path)


def record_call(record, png: bytes | None = None) -> dict:
    """An output (its record as the tools return it), with the operation's parameters as the
    call's arguments, drawn at the area they name (the bbox or AOI it was asked for); `png`: its
    picture."""
    from ..models import map_area

    expression = record.properties.processing_expression.get("expression") or {}
    arguments = dict(expression.get("parameters") or {})
    images = [image(png)] if png is not None else []
    layer = record_layer(record, 0 if images else None).over(map_area(arguments))
    return call(record.operation or "output", arguments, record.model_dump(mode="json"), images, layer)


def record_layer(record, image: int | None):
    """The `MapLayer` of an output: drawn at its bbox (or its geometry's), its picture the
    answer's `image`-th (None: none)."""
    from ..models import MapLayer

    raster = {"id": record.id, "title": record.properties.title, "image": image}
    shape = record.model_dump(mode="json", include={"bbox", "geometry"})
    return MapLayer(rasters=[{**raster, **shape}])
