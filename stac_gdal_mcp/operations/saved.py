"""An output record as a result (`Output`, the kind "output" of `operations.RESULTS`):
reproject_asset, convert_asset and save_search write one as they run. It is answered as itself
with links to its resources (and with `quicklook`, a PNG of its file; a folder of files gets a
link to its record only), and drawn at its bbox.
"""

from __future__ import annotations

from .result import Answer, Result, call, image


class Output(Result):
    """An output record (`record`): it keeps itself, answers as itself, is drawn at its bbox."""

    result_kind = "output"

    def __init__(self, record, core=None):
        self.record, self._core = record, core

    @classmethod
    def of(cls, obj, core=None) -> Output:
        return cls(obj, core)

    @property
    def request(self) -> dict:
        """The parameters of the operation that wrote it, as its record keeps them."""
        return dict(parameters_of(self.record))

    def _outputs(self, core, job) -> tuple:
        return (self.record,)

    def _answer(self, core, records, limits, quicklook: bool) -> Answer:
        record = self.record
        path = core.outputs.path(record.id)
        images = (quicklook_png(path),) if quicklook else ()
        layer = record_layer(record, 0 if images else None)
        return Answer(record, records, images, note=saved_note(record), files=not path.is_dir(), layer=layer)

    def map_call(self) -> dict:
        return record_call(self.record)


def parameters_of(record) -> dict:
    """The parameters of the operation that wrote `record`, as it keeps them."""
    expression = record.properties.processing_expression.get("expression") or {}
    return expression.get("parameters") or {}


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
    asked = parameters_of(record).get("max_items")
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

    arguments = dict(parameters_of(record))
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
