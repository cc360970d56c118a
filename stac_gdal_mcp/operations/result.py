"""`Result`: what every typed result of an operation is, and `Answer`: what a tool answers for one.

A result knows itself, as rio-tiler's `ImageData` renders and summarises itself: its kind
(`result_kind`: the name of the operation that made it, the key of `operations.RESULTS`), where
it came from (`provenance`; `request`: the parameters of the call that made it), and what happens
to it:

- `save(format, *, output_name, job)` -> the `OutputRecord` of the file it is written as;
- `answer(limits, *, job, quicklook)` -> the tool's `Answer`, the outputs a tool keeps of it
  written first;
- `map_layer()` -> the `MapLayer` the map draws of it (`map_call()`: the whole tool call, as a
  notebook's map draws it).

A kind says these in its hooks, each given the session's core (the registry passes the one
of `Session.save`, a tool's or a notebook's; the public methods the result's own): `_save`,
`_outputs` (what a tool keeps of it), `_answer` and `map_call`. What a kind does not do is refused
in one line (a ranking is not saved).

`Wrapping` is a result that reads as the object it holds (a DataFrame, a DataArray): every
attribute it does not have, `[...]`, `len()`, iteration, numpy and Jupyter's display go to that
object, so code written for the object keeps working; what its indexing and methods give of the
same kind as that object (a filtered table, a slice of an array) is the same result again.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..core import Core
    from ..models import MapLayer
    from ..outputs import OutputRecord
    from ..processing.jobs import Job
    from ..processing.records import Provenance
    from ..settings import LimitSettings

SAVED = (
    "a table (from time_series, zonal_stats, threshold_area or compare_periods), a change, an array "
    "(from composite) or search results"
)
MAPPED = (
    "search results, a cloud cover ranking, a zonal_stats, threshold_area, compare_periods or time_series "
    "table, an output record or a preview"
)


@dataclass(frozen=True)
class Answer:
    """What a tool answers for a result: `value` (structured content, also sent as JSON text unless
    `as_text` is false), the `records` it links to (their files too, unless `files` is false: a
    folder is no file), PNG `images` shown first, then a `note` line; `layer`: what the map draws
    of it that the value does not say (zones' geometries), sent in the result's `_meta`."""

    value: BaseModel
    records: tuple[OutputRecord, ...] = ()
    images: tuple[bytes, ...] = ()
    note: str | None = None
    as_text: bool = True
    files: bool = True
    layer: MapLayer | None = None


def call(tool: str, arguments: dict, structured: dict, images: list[dict] = (), layer=None) -> dict:
    """A tool call as the map draws it: its arguments and its result (`structuredContent` and
    `content`, images as the tools send them; its `MapLayer` in `_meta`)."""
    result = {"content": list(images), "structuredContent": structured}
    return {
        "tool": tool,
        "arguments": arguments,
        "result": {**result, "_meta": layer.as_meta()} if layer is not None else result,
    }


def image(png: bytes) -> dict:
    """A PNG as an image content block of a map call."""
    import base64

    return {"type": "image", "mimeType": "image/png", "data": base64.b64encode(png).decode()}


def layer_of(map_call: dict) -> MapLayer | None:
    """The `MapLayer` a map call carries in its result's `_meta` (None: nothing drawn)."""
    from ..models import MAP_LAYER_META, MapLayer

    layer = (map_call["result"].get("_meta") or {}).get(MAP_LAYER_META)
    return MapLayer.model_validate(layer) if layer else None


class Result:
    """A typed result (see the module's docstring). `_core`: the session's core it was made in,
    which its own `save` and `answer` write into (None: `session.save(result)` names one)."""

    result_kind: ClassVar[str] = ""  # the operation that made it
    _core: Core | None = None

    @classmethod
    def of(cls, obj: Any, core: Core | None = None) -> Result:
        """A bare object of this kind - one of a layer below that says its kind by its class (an
        output record, an asset's header) - as this result."""
        raise InvalidArgument(f"not a {cls.__name__}: {type(obj).__name__}")

    # --- where it came from --------------------------------------------------------------------

    @property
    def provenance(self) -> Provenance | None:
        """How it was made (None: a result whose record or search says it)."""
        return None

    @property
    def request(self) -> dict[str, Any]:
        """The parameters of the call that made it."""
        provenance = self.provenance
        return dict(provenance.parameters) if provenance is not None else {}

    # --- what happens to it ------------------------------------------------------------------------

    def save(
        self, format: str | None = None, *, output_name: str | None = None, job: Job | None = None
    ) -> OutputRecord:
        """Written into the session's workspace as its kind saves it; its record."""
        return self._save(self._bound(), format, output_name, job)

    def answer(self, limits: LimitSettings, *, job: Job | None = None, quicklook: bool = False) -> Answer:
        """The tool's answer for it within `limits` (the outputs a tool keeps written first)."""
        return self._answered(self._bound(), limits, job, quicklook)

    def map_layer(self) -> MapLayer | None:
        """What the map draws of it (None: nothing)."""
        return layer_of(self.map_call())

    # --- the hooks of a kind -----------------------------------------------------------------------

    def _save(self, core: Core, format: str | None, output_name: str | None, job) -> OutputRecord:
        raise InvalidArgument(f"save takes {SAVED}, not {type(self).__name__}")

    def _outputs(self, core: Core, job) -> tuple[OutputRecord, ...]:
        """The records a tool keeps of it (written in `job`)."""
        return ()

    def _answer(self, core: Core, records: tuple, limits, quicklook: bool) -> Answer:
        raise InvalidArgument(f"no tool answers a {type(self).__name__}")

    def map_call(self) -> dict:
        """The call of the tool whose answer it is, as the map draws it."""
        raise InvalidArgument(f"map takes {MAPPED}, not {type(self).__name__}")

    def _answered(self, core: Core, limits, job, quicklook: bool) -> Answer:
        """Its outputs kept (in `job`), then the answer linking them."""
        return self._answer(core, tuple(self._outputs(core, job)), limits, quicklook)

    def _bound(self) -> Core:
        if self._core is None:
            raise InvalidArgument(
                f"this {type(self).__name__} has no session to save into; use session.save(result)"
            )
        return self._core


class Wrapping(Result):
    """A result that reads as the object it holds (`_held()`): its attributes, `[...]`, `len()`,
    iteration, `numpy.asarray` and Jupyter's display go to that object (the names in `_own`, the
    result's own attributes, never). What indexing (`[...]`, `.loc[...]`, `.iloc[...]`) or one of
    its methods gives that is the same kind of object as the one held (a DataFrame of a table's
    DataFrame, a DataArray of a raster's) comes back as this result again (`replaced`: its class,
    request and provenance), as a pandas subclass's `_constructor` keeps the subclass; anything
    else (a column, a number) comes back as it is."""

    _own: ClassVar[tuple[str, ...]] = ()
    _indexers: ClassVar[tuple[str, ...]] = ("loc", "iloc")  # attributes that index the held object

    def _held(self) -> Any:
        raise NotImplementedError

    def replaced(self, held: Any) -> Wrapping | None:
        """This result holding `held` (some of its rows, a slice) instead; None: a kind that is
        not remade (the object itself is given back)."""
        return None

    def _kept(self, value: Any) -> Any:
        """`value` as this result again when it is the same kind of object as the one held."""
        if isinstance(value, type(self._held())):
            made = self.replaced(value)
            if made is not None:
                return made
        return value

    def __getattr__(self, name: str):
        if name.startswith("__") or name in self._own:
            raise AttributeError(name)
        value = getattr(self._held(), name)
        if name in self._indexers:
            return _Indexer(self, value)
        if inspect.ismethod(value):
            return _kept_method(self, value)
        return value

    def __getitem__(self, key):
        return self._kept(self._held()[key])

    def __setitem__(self, key, value) -> None:  # a column (a variable) added to the object itself
        self._held()[key] = value

    def __len__(self) -> int:
        return len(self._held())

    def __iter__(self):
        return iter(self._held())

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        return np.asarray(self._held(), dtype=dtype)

    def __dir__(self):  # tab completion: the result's own names and its object's
        return sorted(set(super().__dir__()) | set(dir(self._held())))

    def _repr_html_(self) -> str:
        return self._held()._repr_html_()

    def __repr__(self) -> str:
        return repr(self._held())


def _kept_method(result: Wrapping, method):
    """A method of the held object whose answer comes back as `result` again (see `Wrapping`);
    its name, docstring and signature are the method's (`help`, tab completion)."""

    @functools.wraps(method)
    def kept(*args, **kwargs):
        return result._kept(method(*args, **kwargs))

    return kept


class _Indexer:
    """An indexer of the held object (`.loc`, `.iloc`) whose selections come back as the result."""

    def __init__(self, result: Wrapping, indexer):
        self._result, self._indexer = result, indexer

    def __getitem__(self, key):
        return self._result._kept(self._indexer[key])

    def __setitem__(self, key, value) -> None:
        self._indexer[key] = value

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._indexer, name)
