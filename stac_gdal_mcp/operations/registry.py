"""What happens to a result: saved, kept and answered by a tool, drawn on the map. (The
operations themselves are classes, registered in `operations.OPERATIONS`: base.py.)

A result has a kind: the `result_kind` of its class (`CloudCover`, `Preview`, `SearchResults`,
`OutputRecord`), else the `Provenance.kind` a table or array carries in its `attrs`, else the
name of its class (`AssetInfo`). The module
that names the kind in its `RESULT_KINDS` says, with functions of fixed names, what happens to
its results (or the object it maps the kind to, as `saved.py` does for output records):

- `save(core, result, *, format, output_name, job)` -> the `OutputRecord` of the file written
  (`Session.save`);
- `outputs(core, result, job)` -> the records a tool keeps of it (a time series: its CSV and its
  chart; a composite: its COG; an output: itself);
- `answer(core, result, records, limits, *, quicklook)` -> the tool's `Answer`: its structured
  value within the limits, the records it links to, the images shown beside it;
- `map_call(result)` -> the tool call the map draws for it (`maps.calls`).

A kind without one of them refuses it with one line. The registry finds the modules itself: a new
operation declares its kinds in its own module and nothing here changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..outputs import OutputRecord

SAVED = "a table (from time_series or zonal_stats) or an array (from composite)"
MAPPED = (
    "search results, a cloud cover ranking, a zonal_stats or time_series table, an output record or a preview"
)
HOOKS = {"save": f"save takes {SAVED}", "map_call": f"map takes {MAPPED}"}


@dataclass(frozen=True)
class Answer:
    """What a tool answers for a result: `value` (structured content, also sent as JSON text unless
    `as_text` is false), the `records` it links to (their files too, unless `files` is false: a
    folder is no file), PNG `images` shown first, then a `note` line."""

    value: BaseModel
    records: tuple[OutputRecord, ...] = ()
    images: tuple[bytes, ...] = ()
    note: str | None = None
    as_text: bool = True
    files: bool = True


def call(tool: str, arguments: dict, structured: dict, images: list[dict] = ()) -> dict:
    """A tool call as the map draws it: its arguments and its result (`structuredContent` and
    `content`, images as the tools send them)."""
    return {
        "tool": tool,
        "arguments": arguments,
        "result": {"content": list(images), "structuredContent": structured},
    }


def image(png: bytes) -> dict:
    """A PNG as an image content block of a map call."""
    import base64

    return {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()}


@cache
def kinds() -> dict[str, Any]:
    """Result kind -> what handles it: the module of operations/ that names it in its
    `RESULT_KINDS` (a tuple of kinds), or the object it maps it to (a dict)."""
    from .. import operations

    found = {}
    for info in pkgutil.walk_packages(operations.__path__, f"{operations.__name__}."):
        module = importlib.import_module(info.name)
        declared = getattr(module, "RESULT_KINDS", ())
        found.update(declared if isinstance(declared, dict) else dict.fromkeys(declared, module))
    return found


def kind_of(result: Any) -> str:
    """The kind of `result`: its class's `result_kind`; for a table or an array the provenance in
    its `attrs`, else the kind its type defaults to (a table: a time series, whose save says
    where it came from is unknown; an array: any georeferenced array); else its class's name (an
    `AssetInfo`)."""
    kind = getattr(type(result), "result_kind", None)
    if isinstance(kind, str):
        return kind
    if not hasattr(type(result), "attrs"):  # not a pandas or xarray object: its class's name
        return type(result).__name__
    from ..processing.records import Provenance

    provenance = Provenance.of(result)
    if provenance is not None:
        return provenance.kind
    return "time_series" if hasattr(type(result), "columns") else "array"


def hook(result: Any, name: str):
    """The function `name` of the module of `result`'s kind; else one line naming what takes it."""
    module = kinds().get(kind_of(result))
    found = getattr(module, name, None) if module is not None else None
    if found is None:
        raise InvalidArgument(
            f"{HOOKS.get(name, name + ' takes none of these')}, not {type(result).__name__}"
        )
    return found


def save(core, result: Any, *, format: str | None = None, output_name: str | None = None, job=None):
    """`result` written into the workspace as its kind saves it; its record."""
    return hook(result, "save")(core, result, format=format, output_name=output_name, job=job)


def answer(core, result: Any, limits, *, job=None, quicklook: bool = False) -> Answer:
    """A tool's answer for `result`: the outputs its kind keeps of it written first (in `job`)."""
    module = kinds().get(kind_of(result))
    if module is None or not hasattr(module, "answer"):
        raise InvalidArgument(f"no tool answers a {type(result).__name__}")
    outputs = getattr(module, "outputs", None)
    records = tuple(outputs(core, result, job)) if outputs is not None else ()
    return module.answer(core, result, records, limits, quicklook=quicklook)


def map_call(result: Any) -> dict:
    """The call of the tool whose answer is `result`, as the map draws it."""
    return hook(result, "map_call")(result)
