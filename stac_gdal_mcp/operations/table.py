"""`Table`: a table result that knows itself - the DataFrame an operation made, with its request
and provenance as attributes - a `result.Result`: its kind's class (a time series, a zonal or
threshold_area table) says in its hooks how it is saved, kept, answered and drawn (`save`,
`answer`, `map_layer`).

It reads as its DataFrame - `table["value"]`, `table.iloc[0]`, `len(table)`, `table.columns` and
the other DataFrame attributes go to the DataFrame (`frame`), `table["new"] = ...` adds a column
to it - so code written for the table keeps working; in Jupyter it shows as the table, and tab
completion offers the DataFrame's names. A DataFrame its indexing or methods make of it (a
filtered copy, `head()`, a column dropped) is the same table again (`replaced`: its class,
request and provenance), saved and drawn as its kind; a column, a pivot to a plain DataFrame of
a table of zones, is what pandas made.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, ClassVar

from .result import Wrapping

if TYPE_CHECKING:
    import pandas as pd

    from ..core import Core
    from ..processing.records import Provenance


class Table(Wrapping):
    """A table an operation made (`result_kind`: its name): `frame` is the DataFrame (a
    GeoDataFrame for a table of zones), `provenance` says where it came from and `request` the
    parameters of the call; `save(format)`, `answer(limits)` and `map_layer()` as its class's
    hooks say (`_save`, `_outputs`, `_answer`, `map_call`)."""

    result_kind: ClassVar[str] = ""  # the operation that made it (registry.py)
    _own: ClassVar[tuple[str, ...]] = ("_frame", "_provenance")

    def __init__(self, frame: pd.DataFrame, provenance: Provenance, core: Core | None = None):
        self._frame = frame
        self._core = core
        self._provenance = provenance

    @property
    def frame(self) -> pd.DataFrame:
        """The DataFrame itself (not a copy)."""
        return self._frame

    @property
    def provenance(self) -> Provenance:
        """How the table was made: what its output record will say, and its facts."""
        return self._provenance

    @property
    def request(self) -> dict[str, Any]:
        """The parameters of the call that made it (what its output record lists)."""
        return dict(self.provenance.parameters)

    def to_dataframe(self) -> pd.DataFrame:
        """The table as a DataFrame (a copy)."""
        return self._frame.copy()

    def replaced(self, frame: pd.DataFrame | None = None, provenance: Provenance | None = None):
        """The same table (its class, its other attributes) with another `frame` (some of its
        rows) or `provenance`; what its indexing and methods give is this of their DataFrame."""
        made = copy.copy(self)
        made._frame = self._frame if frame is None else frame
        made._provenance = self._provenance if provenance is None else provenance
        return made

    def _held(self) -> pd.DataFrame:
        return self._frame
