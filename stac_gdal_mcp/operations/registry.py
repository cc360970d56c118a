"""What happens to a result: saved, kept and answered by a tool, drawn on the map. (The operations
themselves are classes, registered in `operations.OPERATIONS`: base.py.)

A result says its kind: the `result_kind` of its class (`CloudCover`: "cloud_cover_stats",
`Preview`, `SearchResults`, `Raster`, `Change`, the tables of `table.Table`: a time series, a
zonal or threshold_area table; `AssetInfo` and `OutputRecord` by their own classes), nothing
else: the kind is the name of the operation that made it. A typed result (`result.Result`) does
it all itself - `save`, `answer` (its outputs kept first), `map_layer` / `map_call` -; a bare
object of a kind (an output record, an asset's header) is wrapped first by the class
`operations.RESULTS` names for its kind (`typed`). What pandas or xarray make of a typed result
by its indexing and methods is that result again (`result.Wrapping`); a DataFrame or DataArray
on its own is of no kind. What a kind does not do (a ranking is not saved) is refused in one
line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from .result import MAPPED, SAVED, Answer, Result, layer_of

if TYPE_CHECKING:
    from ..models import MapLayer


def kind_of(result: Any) -> str | None:
    """The kind of `result`: its class's `result_kind` (None: no kind)."""
    kind = getattr(type(result), "result_kind", None)
    return kind if isinstance(kind, str) else None


def typed(core, result: Any) -> Result | None:
    """`result` as the typed `Result` that does all this itself: the result, or a bare object of
    a kind (an output record, an asset's header) wrapped by the class `operations.RESULTS` names
    for it; None: no kind."""
    from .. import operations

    if isinstance(result, Result):
        return result
    cls = operations.RESULTS.get(kind_of(result) or "")
    return cls.of(result, core) if cls is not None else None


def save(core, result: Any, *, format: str | None = None, output_name: str | None = None, job=None):
    """`result` written into the workspace as its kind saves it; its record."""
    own = typed(core, result)
    if own is None:
        raise InvalidArgument(f"save takes {SAVED}, not {type(result).__name__}")
    return own._save(core, format, output_name, job)


def answer(core, result: Any, limits, *, job=None, quicklook: bool = False) -> Answer:
    """A tool's answer for `result`: the outputs its kind keeps of it written first (in `job`)."""
    own = typed(core, result)
    if own is None:
        raise InvalidArgument(f"no tool answers a {type(result).__name__}")
    return own._answered(core, limits, job, quicklook)


def map_call(result: Any) -> dict:
    """The call of the tool whose answer is `result`, as the map draws it."""
    own = typed(None, result)
    if own is None:
        raise InvalidArgument(f"map takes {MAPPED}, not {type(result).__name__}")
    return own.map_call()


def map_layer(result: Any) -> MapLayer | None:
    """What the map draws of `result`: the layer of the call that answers it (None: nothing)."""
    return layer_of(map_call(result))
