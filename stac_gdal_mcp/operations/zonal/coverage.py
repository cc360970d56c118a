"""Coverage computed once per grid window and reused by every item on that grid: the statistics
exactextract gives, as reductions of each item's pixels against stored coverage fractions.

exactextract works out, for each zone, which cells of the raster it covers and by how much, then
visits those cells in row-major order, skipping cells whose value is not usable, and accumulates
in double precision: count = sum(c), sum = sum(x * c), per distinct value sum(c) (the histogram
of `frac`, `majority`, `minority`, `mode`, `variety`, `unique` and the weighted quantiles of
`median`/`quantile`), min and max. The cells and fractions depend on the zones and the grid only:
a season of Sentinel-2 over one MGRS tile shares them. So `cells` asks exactextract for them once
per window (its `cell_id` and `coverage` on a raster with no nodata) and keeps them as a sparse
matrix (zones x window cells, a row's cells in row-major order); `reduce` then computes each
item's statistics from its window's values:

- the linear statistics as one sparse product (scipy's CSR product adds a row's terms one after
  the other in the cells' order, as exactextract does: the same sums, to the bit);
- the histogram by a stable sort of the usable cells on (zone, value) and `numpy.bincount`, which
  also adds in the cells' order; the weighted quantiles (exactextract's `WeightedQuantiles`: the
  distinct values ascending, s_i = i*w_i + (n-1)*cumsum_{i-1}, interpolation between the values
  around q*sum(w)*(n-1)) on rows of zones padded to one length, vectorised.

Only statistics computed this way take the cached path (`cacheable`); the others (stdev,
variance, the min/max centres) and windows larger than `WINDOW_PIXELS` are exactextract's own
(`pixels.extract`). `Coverages` keeps the matrices of a call, least recently used out past
`MAX_CELLS`, each built once even when several items ask for it at the same time; `BUILT` counts
the builds.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Any

CACHED = frozenset(
    (
        "count",
        "sum",
        "mean",
        "min",
        "max",
        "median",
        "quantile",
        "majority",
        "minority",
        "mode",
        "variety",
        "frac",
        "unique",
    )
)
CLASS_STATS = frozenset(("frac", "unique", "majority", "minority", "mode"))  # a column or list per value
HISTOGRAM = frozenset(("median", "quantile", "majority", "minority", "mode", "variety", "frac", "unique"))
MAX_CELLS = 16_000_000  # covered cells kept per call (12 bytes each: ~190 MB at most)
PAD_CELLS = 4_000_000  # the padded rows of one step of the quantiles

_built = itertools.count()
BUILT = [0]  # coverage matrices built in this process (read by the tests: a season builds once)


def cacheable(request) -> bool:
    """Whether every statistic of `request` is computed from stored coverage here."""
    return all(s.name in CACHED for s in request.stats)


def cells(grid, window, geometries: list):
    """The coverage of the window's zones (`geometries` in the grid's CRS): a CSR matrix, one
    row per zone, one column per cell of the window (row-major), exactextract's fractions."""
    import numpy as np
    from exactextract import exact_extract
    from exactextract.raster import NumPyRasterSource
    from scipy.sparse import csr_matrix
    from shapely.geometry import mapping

    height, width = window.row1 - window.row0, window.col1 - window.col0
    x0, y0 = grid.transform @ (window.col0, window.row0)
    x1, y1 = grid.transform @ (window.col1, window.row1)
    blank = NumPyRasterSource(np.zeros((height, width), dtype="uint8"), x0, y1, x1, y0, name="blank")
    features = [{"type": "Feature", "properties": {}, "geometry": mapping(g)} for g in geometries]
    found = exact_extract(blank, features, ["cell_id", "coverage"], output="pandas")
    lengths = np.fromiter((len(c) for c in found["cell_id"]), dtype="int64", count=len(found))
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    total = int(indptr[-1])
    indices = np.concatenate([*found["cell_id"], np.empty(0)]).astype("int32" if total < 2**31 else "int64")
    data = np.concatenate([*found["coverage"], np.empty(0)]).astype("float64")
    BUILT[0] = next(_built) + 1
    return csr_matrix((data, indices, indptr), shape=(len(geometries), height * width))


class Coverages:
    """The coverage matrices of one call, by (grid, window): each built once (a second item
    asking while the first builds waits for it), the least recently used dropped past
    `max_cells` covered cells."""

    def __init__(self, max_cells: int = MAX_CELLS):
        self.max_cells = max_cells
        self._found: OrderedDict = OrderedDict()
        self._building: dict = {}
        self._lock = threading.Lock()
        self._cells = 0

    def get(self, key, make):
        with self._lock:
            if key in self._found:
                self._found.move_to_end(key)
                return self._found[key]
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            with self._lock:
                if key in self._found:
                    return self._found[key]
            made = make()
            with self._lock:
                self._keep(key, made)
                self._building.pop(key, None)
            return made

    def seed(self, found: dict) -> None:
        """Keep matrices built elsewhere (another worker's, for the same grid windows)."""
        with self._lock:
            for key, matrix in found.items():
                if key not in self._found:
                    self._keep(key, matrix)

    def _keep(self, key, matrix) -> None:
        self._found[key] = matrix
        self._cells += matrix.nnz
        while self._cells > self.max_cells and len(self._found) > 1:
            _, dropped = self._found.popitem(last=False)
            self._cells -= dropped.nnz


def window_key(grid, window) -> tuple:
    return (tuple(grid.transform), grid.width, grid.height, grid.crs.to_string(), window)


# --- the statistics of one item on one window ------------------------------------------------------


def check_classes(request, count: int, max_classes: int | None) -> None:
    """Refuse class statistics over more than `max_classes` distinct values (a continuous raster:
    a column or list entry per value would follow), in one line, for the whole call."""
    from ...errors import CallRefused

    if max_classes is None or count <= max_classes or not any(s.name in CLASS_STATS for s in request.stats):
        return
    names = ", ".join(s.name for s in request.stats if s.name in CLASS_STATS)
    expression = getattr(request, "expression", "the expression")
    raise CallRefused(
        f"{expression} has {count:,} distinct values under the zones, more than limits.max_classes="
        f"{max_classes:,}: class statistics ({names}) take each value as a class; for a continuous raster ask mean or "
        f'quantiles (median, quantile(q=0.9)), or classes by a threshold (expression="{expression} > 0.5")'
    )


def reduce(request, matrix, zones: tuple, value, cloud, label, max_classes=None):
    """The frame `pixels.extract` gives for the window's `zones`, from the stored `matrix` and the
    window's (value, cloud) masked arrays. `label`: a class value as a column suffix; class
    statistics refused past `max_classes` distinct values (`check_classes`)."""
    import numpy as np
    import pandas as pd

    data = np.ma.getdata(value).ravel()
    usable = ~np.ma.getmaskarray(value).ravel()
    columns = [usable.astype("float64"), np.where(usable, data.astype("float64"), 0.0)]
    if cloud is not None:
        known = ~np.ma.getmaskarray(cloud).ravel()
        columns += [np.where(known, np.ma.getdata(cloud).ravel(), 0.0), known.astype("float64")]
    sums = matrix @ np.column_stack(columns)
    count = sums[:, 0]
    out = {"_zone": np.asarray(zones, dtype="int64")}  # (the columns, made into a frame at once)
    names = {s.name for s in request.stats}
    with np.errstate(invalid="ignore", divide="ignore"):
        linear = {"count": count, "sum": sums[:, 1], "mean": sums[:, 1] / count}
        for stat in request.stats:
            if stat.name in linear:
                out[stat.column] = linear[stat.name]
        out["_count"] = count
        if cloud is not None:
            out["cloud_fraction"] = sums[:, 2] / sums[:, 3]
    fractions = None
    if names & (HISTOGRAM | {"min", "max"}):
        runs = _histogram(matrix, data, usable)
        if names & CLASS_STATS:
            check_classes(request, np.unique(runs["value"]).size, max_classes)
        fractions = _ordered(request, out, runs, count, label)
    frame = pd.DataFrame(out)
    return frame if fractions is None else pd.concat([frame, fractions], axis=1)


def _histogram(matrix, data, usable) -> dict:
    """The distinct usable values of each zone, ascending, with their summed coverage (added
    in the cells' order), as flat arrays: zone, value, weight; and each zone's first run."""
    import numpy as np

    zone = np.repeat(np.arange(matrix.shape[0]), np.diff(matrix.indptr))
    ok = usable[matrix.indices]
    zone, values, weights = zone[ok], data[matrix.indices[ok]], matrix.data[ok]
    order = np.lexsort((values, zone))  # (stable: a run keeps the cells' order)
    zone, values, weights = zone[order], values[order], weights[order]
    new = np.ones(len(zone), dtype=bool)
    new[1:] = (zone[1:] != zone[:-1]) | (values[1:] != values[:-1])
    run = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    run_zone = zone[starts]
    first = np.searchsorted(run_zone, np.arange(matrix.shape[0] + 1))
    return {
        "zone": run_zone,
        "value": values[starts],
        "weight": np.bincount(run, weights=weights, minlength=len(starts)),
        "first": first,
    }


def _ordered(request, frame: dict, runs: dict, count, label):
    """min, max, the class statistics and the quantiles of each zone from its runs, into the
    columns `frame`; the frac columns as a frame of their own (None without frac)."""
    import numpy as np
    import pandas as pd

    n = len(count)
    first, value, weight = runs["first"], runs["value"], runs["weight"]
    variety = np.diff(first)
    has = variety > 0
    at_first, at_last = np.minimum(first[:-1], len(value) - 1), np.maximum(first[1:] - 1, 0)

    def per_zone(index):
        out = np.full(n, np.nan)
        out[has] = value[index[has]] if len(value) else np.nan
        return out

    for stat in request.stats:
        if stat.name in ("min", "max"):
            frame[stat.column] = per_zone(at_first if stat.name == "min" else at_last)
        elif stat.name in ("majority", "mode", "minority"):
            frame[stat.column] = per_zone(_extreme(runs, n, largest=stat.name != "minority"))
        elif stat.name == "variety":
            frame[stat.column] = variety
        elif stat.name == "unique":
            frame[stat.column] = [list(map(label, part)) for part in np.split(value, first[1:-1])]
        elif stat.name in ("median", "quantile"):
            q = 0.5 if stat.name == "median" else float(dict(stat.options)["q"])
            found = _quantiles(runs, n, q)
            # (exactextract returns a quantile in the raster's type: an integer raster's truncated)
            frame[stat.column] = np.trunc(found) if runs["value"].dtype.kind in "iu" else found
    if any(s.name == "frac" for s in request.stats) and len(value):
        classes, column = np.unique(value, return_inverse=True)
        table = np.full((n, len(classes)), np.nan)
        table[runs["zone"], column] = weight / count[runs["zone"]]
        return pd.DataFrame(table, columns=[f"frac_{label(c)}" for c in classes])
    return None


def _extreme(runs: dict, n: int, *, largest: bool) -> Any:
    """Each zone's run of most coverage (`largest`: majority, mode; ties to the greatest value)
    or least (minority; ties to the lowest), as exactextract picks them."""
    import numpy as np

    zone, weight = runs["zone"], runs["weight"]
    best = np.full(n, -np.inf if largest else np.inf)
    (np.maximum if largest else np.minimum).at(best, zone, weight)
    hit = np.flatnonzero(weight == best[zone])  # (a zone's runs ascend by value)
    index = np.full(n, -1 if largest else len(weight), dtype="int64")
    (np.maximum if largest else np.minimum).at(index, zone[hit], hit)
    return np.clip(index, 0, max(0, len(weight) - 1))


def _quantiles(runs: dict, n: int, q: float):
    """exactextract's weighted quantile `q` of each zone's runs (NaN where it has none); zones
    of run counts within a factor of two padded to one row length, `PAD_CELLS` at a time."""
    import numpy as np

    first, value, weight = runs["first"], runs["value"].astype("float64"), runs["weight"]
    lengths = np.diff(first)
    out = np.full(n, np.nan)
    bucket = np.ceil(np.log2(np.maximum(lengths, 1))).astype("int64")
    for b in np.unique(bucket[lengths > 0]):
        rows = np.flatnonzero((bucket == b) & (lengths > 0))
        step = max(1, PAD_CELLS // (2 ** int(b)))
        for k in range(0, len(rows), step):
            chunk = rows[k : k + step]
            out[chunk] = _quantile_rows(first[chunk], lengths[chunk], value, weight, q)
    return out


def _quantile_rows(starts, lengths, value, weight, q: float):
    import numpy as np

    width = int(lengths.max())
    position = np.arange(width)
    inside = position[None, :] < lengths[:, None]
    flat = np.where(inside, starts[:, None] + position[None, :], 0)
    x = np.where(inside, value[flat], 0.0)
    w = np.where(inside, weight[flat], 0.0)
    cumsum = np.cumsum(w, axis=1)  # (sequential along each row, as exactextract adds)
    size = lengths[:, None].astype("float64")
    s = np.zeros_like(w)
    s[:, 1:] = position[None, 1:] * w[:, 1:] + (size - 1) * cumsum[:, :-1]
    rows = np.arange(len(lengths))
    target = q * (cumsum[rows, lengths - 1] * (size[:, 0] - 1))
    right = np.sum((s <= target[:, None]) & inside, axis=1)
    left = right - 1
    last = right >= lengths
    right = np.minimum(right, lengths - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lx, rx, ls, rs = x[rows, left], x[rows, right], s[rows, left], s[rows, right]
        between = lx + (target - ls) * (rx - lx) / (rs - ls)
    return np.where(last, lx, between)
