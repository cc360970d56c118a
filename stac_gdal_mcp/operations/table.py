"""`Table`: a table result that knows itself - the DataFrame an operation made, with its request
and provenance, and what happens to it (`save`, `answer`, `map_layer`) by the class of the
operation that made it (registry.py).

It reads as its DataFrame - `table["value"]`, `table.iloc[0]`, `len(table)`, `table.attrs` and
the other DataFrame attributes go to `to_dataframe()` - so code written for the table keeps
working; in Jupyter it shows as the table. A table filtered with pandas is a plain DataFrame that
still carries its provenance in `attrs`, and is saved and drawn as its kind (`kind_of`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .result import Wrapping

if TYPE_CHECKING:
    import pandas as pd

    from ..core import Core
    from ..models import MapLayer
    from ..outputs import OutputRecord
    from ..processing.records import Provenance
    from .registry import Answer


class Table(Wrapping):
    """A table an operation made (`result_kind`: its name): `to_dataframe()` is the table (a copy),
    `provenance` and `request` say where it came from; `save(format)`, `answer(limits)` and
    `map_layer()` do what its operation's class does with it."""

    result_kind: ClassVar[str] = ""  # the operation that made it (registry.py)
    _own: ClassVar[tuple[str, ...]] = ("_frame",)

    def __init__(self, frame: pd.DataFrame, core: Core | None = None):
        self._frame = frame
        self._core = core

    @property
    def frame(self) -> pd.DataFrame:
        """The DataFrame itself (not a copy)."""
        return self._frame

    @property
    def provenance(self) -> Provenance:
        from ..processing.records import Provenance

        return Provenance.required(self._frame, self.result_kind, self.result_kind.replace("_", " "))

    @property
    def request(self) -> dict[str, Any]:
        """The parameters of the call that made it."""
        return dict(self.provenance.parameters)

    def to_dataframe(self) -> pd.DataFrame:
        """The table as a DataFrame (a copy, its provenance in `attrs`)."""
        return self._frame.copy()

    def _handler(self):
        from .registry import handler

        return handler(self)

    def save(self, format: str | None = None, *, output_name: str | None = None) -> OutputRecord:
        """The table written into the session's workspace as its operation saves it; its record."""
        return self._handler().save(self._bound(), self, format=format, output_name=output_name)

    def answer(self, limits) -> Answer:
        """The tool's answer for the table within `limits` (its outputs written first)."""
        from .registry import answer

        return answer(self._bound(), self, limits)

    def map_layer(self) -> MapLayer | None:
        """What the map draws of the table."""
        from .registry import map_layer

        return map_layer(self)

    def _held(self) -> pd.DataFrame:
        return self._frame
