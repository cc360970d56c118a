"""A result's class by its kind, and what happens to a result through it: saved, kept and answered
by a tool, drawn on the map. (The operations themselves are classes, registered in
`operations.OPERATIONS`: base.py.)

A result says its kind: the `result_kind` of its class (`CloudCover`: "cloud_cover_stats",
`Preview`, `AssetInfo`, `SearchResults`, `OutputRecord`, `Raster`, `Change`, the tables of
`table.Table`: a time series, a zonal or threshold_area table), else - for what pandas or xarray
made of a result: a time series filtered, an array cut from a composite - the `Provenance.kind`
its `attrs` kept; the kind is the name of the operation that made it.
`operations.RESULTS` maps each kind to its class:

- a typed result (`result.Result`) does it all itself - `save`, `answer` (its outputs kept
  first), `map_layer` / `map_call` -; a bare object of its kind (a composite's DataArray, an
  output record, a change's table) is wrapped by the class first (`typed`);
- any other kind is handled by the class of the operation that made it (`Results`), whose class
  methods take the result: `save(core, result, *, format, output_name, job)`, `outputs(core,
  result, job)`, `answer(core, result, records, limits, *, quicklook)`, `map_call(result)`.

What a kind does not do (a ranking is not saved) is refused in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from .result import MAPPED, SAVED, Answer, Result, call, image, layer_of

if TYPE_CHECKING:
    from ..models import MapLayer

__all__ = ["Answer", "Results", "call", "image", "kind_of"]


class Results:
    """What happens to the results of a kind (the defaults: kept as they are, answered as
    themselves, neither saved nor drawn). An operation's class is the handler of its results
    (`Operation` derives from this); `saved.py` has those of output records and search pages."""

    @classmethod
    def save(cls, core, result, *, format=None, output_name=None, job=None):
        """`result` written into the workspace; its record."""
        raise InvalidArgument(f"save takes {SAVED}, not {type(result).__name__}")

    @classmethod
    def outputs(cls, core, result, job) -> tuple:
        """The records a tool keeps of `result` (written in `job`)."""
        return ()

    @classmethod
    def answer(cls, core, result, records, limits, *, quicklook: bool = False) -> Answer:
        """The tool's answer for `result`."""
        return Answer(result)

    @classmethod
    def map_call(cls, result) -> dict:
        """The tool call the map draws for `result`."""
        raise InvalidArgument(f"map takes {MAPPED}, not {type(result).__name__}")


def kind_of(result: Any) -> str | None:
    """The kind of `result`, said by the result itself: its class's `result_kind`, else the
    `Provenance.kind` kept in its `attrs` (a DataFrame made of a time series, a DataArray of a
    composite); an array without one is of the kind "array" (saved as a COG, as a composite is);
    anything else has none."""
    kind = getattr(type(result), "result_kind", None)
    if isinstance(kind, str):
        return kind
    if not hasattr(type(result), "attrs"):  # not a pandas or xarray object
        return None
    from ..processing.records import Provenance

    provenance = Provenance.of(result)
    if provenance is not None:
        return provenance.kind
    return "array" if hasattr(type(result), "dims") else None


def typed(core, result: Any) -> Result | None:
    """`result` as the typed `Result` that does all this itself: the result, or a bare object of
    its kind (a DataFrame or DataArray carrying its provenance, a record) wrapped by the class
    `operations.RESULTS` names for the kind; None: a kind the class of its operation handles
    (`Results`), or no kind."""
    from .. import operations

    cls = operations.RESULTS.get(kind_of(result) or "")
    if isinstance(cls, type) and issubclass(cls, Result):
        return result if isinstance(result, cls) else cls.of(result, core)
    if cls is None and isinstance(result, Result):  # a kind of a layer above (a search page)
        return result
    return None


def handler(result: Any) -> type[Results]:
    """What handles `result` when it is no typed `Result`: `operations.RESULTS` by its kind (the
    class of the operation that made it); a result of no kind: the plain `Results`, which
    refuses it."""
    from .. import operations

    return operations.RESULTS.get(kind_of(result) or "", Results)


def save(core, result: Any, *, format: str | None = None, output_name: str | None = None, job=None):
    """`result` written into the workspace as its kind saves it; its record."""
    own = typed(core, result)
    if own is not None:
        return own._save(core, format, output_name, job)
    return handler(result).save(core, result, format=format, output_name=output_name, job=job)


def answer(core, result: Any, limits, *, job=None, quicklook: bool = False) -> Answer:
    """A tool's answer for `result`: the outputs its kind keeps of it written first (in `job`)."""
    own = typed(core, result)
    if own is not None:
        return own._answered(core, limits, job, quicklook)
    results = handler(result)
    if results is Results:
        raise InvalidArgument(f"no tool answers a {type(result).__name__}")
    records = tuple(results.outputs(core, result, job))
    return results.answer(core, result, records, limits, quicklook=quicklook)


def map_call(result: Any) -> dict:
    """The call of the tool whose answer is `result`, as the map draws it."""
    own = typed(None, result)
    return own.map_call() if own is not None else handler(result).map_call(result)


def map_layer(result: Any) -> MapLayer | None:
    """What the map draws of `result`: the layer of the call that answers it (None: nothing)."""
    own = typed(None, result)
    return own.map_layer() if own is not None else layer_of(map_call(result))
