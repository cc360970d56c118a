"""A dry run's answer and its limit checks.

`Estimate` is what every `estimate_*` function returns (with `OutputSize`, `FileRead` and
`LimitCheck`). Limits are checked with the very functions the operation calls, inside
`refusals`, so a dry run refuses what the operation would refuse, with the same words (how to
shrink the request); `output_checks` and `read_check` list each limit's needed and allowed
values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ...errors import LimitExceeded
from ...models import Model

if TYPE_CHECKING:
    from ..access import AssetSource

MAX_FILES_LISTED = 20  # per-file detail in a result, at most (the totals cover every file)


# --- results ---------------------------------------------------------------------------------------


class OutputSize(Model):
    """What the operation would write (pixels before compression)."""

    width: int | None = None
    height: int | None = None
    bands: int | None = None
    dtype: str | None = None
    pixels: int | None = Field(None, description="width x height")
    bytes: int | None = Field(None, description="pixels x bands x bytes per value, before compression")
    format: str | None = None
    crs: str | None = None
    resolution: list[float] | None = None
    rows: int | None = Field(None, description="table rows (time series: one per solar day)")


class FileRead(Model):
    """What would be read from one file."""

    asset: str = Field(description="item/asset, or the file name")
    href: str = Field(description="without any signature")
    overview_level: int | None = Field(None, description="None: full resolution; 0: the first overview")
    reads: int = Field(description="reads (strips, warped blocks, windows) that fetch tiles")
    tiles: int
    bytes: int | None = Field(
        description="bytes it would fetch, header included; None: unknown (no tile index)"
    )
    requests: int = Field(description="HTTP requests (0 for a local file)")


class LimitCheck(Model):
    limit: str = Field(description="the setting, e.g. limits.max_output_pixels")
    needed: float
    allowed: float
    ok: bool


class Estimate(Model):
    """A dry run's answer: nothing was read but headers, nothing was written."""

    dry_run: Literal[True] = True
    operation: str
    # (names unlike the results' own fields: `items`, `assets`, so that one loose schema fits both)
    item_ids: list[str] = Field(default_factory=list, description="items involved")
    inputs: list[str] = Field(default_factory=list, description="assets read: item/asset, or the file name")
    output: OutputSize | None = None
    read_bytes: int | None = Field(None, description="bytes it expects to fetch (tiles + headers)")
    read_requests: int | None = Field(None, description="HTTP range requests it expects")
    read_tiles: int | None = None
    read_pixels: int | None = Field(
        None, description="source pixels read (checked against limits.max_read_pixels)"
    )
    files: list[FileRead] = Field(default_factory=list, description=f"per file (at most {MAX_FILES_LISTED})")
    limits: list[LimitCheck] = Field(default_factory=list)
    would_refuse: bool = False
    refusal: str | None = Field(
        None, description="the error the operation would give, saying how to shrink it"
    )
    notes: list[str] = Field(default_factory=list)

    def summary(self) -> str:
        """One line a person (or an agent) reads first."""
        parts = [f"dry run of {self.operation}: nothing was read but headers, nothing written"]
        out = self.output
        if out is not None and out.pixels:
            parts.append(
                f"output {out.width} x {out.height} px x {out.bands} band(s) ({out.bytes:,} bytes uncompressed)"
            )
        if self.read_bytes is not None and self.read_requests:
            parts.append(f"would fetch about {self.read_bytes:,} bytes in {self.read_requests} HTTP requests")
        elif self.read_bytes is not None:
            parts.append(f"would read about {self.read_bytes:,} bytes of local files")
        if self.would_refuse:
            parts.append(f"WOULD BE REFUSED: {self.refusal}")
        return "; ".join(parts)

    def _repr_markdown_(self) -> str:
        """In Jupyter: the summary, each limit against what the call needs, and the notes."""
        lines = [self.summary(), ""]
        lines += [
            f"- `{c.limit}`: needs {c.needed:,.0f} of {c.allowed:,.0f} ({'ok' if c.ok else 'refused'})"
            for c in self.limits
        ]
        lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines)


# --- limits ----------------------------------------------------------------------------------------


BEYOND = 10**300  # sizes are shown up to this; any limit is far below


def output_checks(width: int, height: int, bands: int, dtype: str, limits) -> list[LimitCheck]:
    import numpy as np

    pixels = int(width) * int(height)
    nbytes = pixels * bands * np.dtype(dtype).itemsize
    pixels, nbytes = min(pixels, BEYOND), min(nbytes, BEYOND)  # as floats (1e-300 m pixels: 600 digits)
    return [
        LimitCheck(
            limit="limits.max_output_pixels",
            needed=pixels,
            allowed=limits.max_output_pixels,
            ok=pixels <= limits.max_output_pixels,
        ),
        LimitCheck(
            limit="limits.max_output_bytes",
            needed=nbytes,
            allowed=limits.max_output_bytes,
            ok=nbytes <= limits.max_output_bytes,
        ),
    ]


def read_check(pixels: float, limits) -> LimitCheck:
    pixels = min(pixels, BEYOND)
    return LimitCheck(
        limit="limits.max_read_pixels",
        needed=pixels,
        allowed=limits.max_read_pixels,
        ok=pixels <= limits.max_read_pixels,
    )


@contextlib.contextmanager
def refusals(estimate: Estimate):
    """Inside the block, a LimitExceeded is the operation's refusal: recorded, not raised."""
    try:
        yield
    except LimitExceeded as exc:
        estimate.would_refuse = True
        estimate.refusal = str(exc)


def _output(width, height, bands, dtype, **extra) -> OutputSize:
    import numpy as np

    return OutputSize(
        width=min(int(width), BEYOND),
        height=min(int(height), BEYOND),
        bands=int(bands),
        dtype=str(dtype),
        pixels=min(int(width) * int(height), BEYOND),
        bytes=min(int(width) * int(height) * int(bands) * np.dtype(dtype).itemsize, BEYOND),
        **extra,
    )


def _items_of(sources: Iterable[AssetSource]) -> list[str]:
    return list(dict.fromkeys(s.item_id for s in sources if s.item_id))
