"""A composite is computed and written tile by tile: an output of several tiles equals
the median numpy computes from the source files; the reduction equals numpy's nan-reductions
exactly; a day whose reads fail only on a later tile is left out of every tile, of the record's
derived_from and of the item count; a cancelled save writes nothing.

The tiles are made small (composite.TILE = 256 px) so that a 700 px output has nine of them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rasterio
from helpers import scaled, usable_pixels, write_days

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import OperationCancelled
from stac_gdal_mcp.operations import composite as composites
from stac_gdal_mcp.processing.jobs import Job

DAYS = {"T1": "2024-06-01T10:00:00Z", "T2": "2024-06-06T10:00:00Z", "T3": "2024-06-11T10:00:00Z"}
DAYS |= {"T4": "2024-06-16T10:00:00Z"}
SIZE = 768  # px, 10 m, 128 px COG tiles
TILE = 256
BANDS = ["red", "nir"]


def aoi_of(item) -> list[float]:
    west, south, east, north = item["bbox"]
    pad = (east - west) / 40
    return [west + pad, south + pad, east - pad, north - pad]


def write_scenes(root, href_base: str) -> tuple[list[dict], dict]:
    items = write_days(
        root, DAYS, seed=40, size_px=SIZE, blocksize=128, href_base=href_base, cloud_fraction=0.3
    )
    return items, {item["id"]: {"dir": root / item["id"]} for item in items}


def catalog(path, items) -> str:
    path.write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    return str(path)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The scenes as local files, in a local catalog (its folder holds them)."""
    root = tmp_path_factory.mktemp("tiles")
    items, scenes = write_scenes(root, str(root))
    return catalog(root / "items.json", items), items, scenes


@pytest.fixture
def small_tiles(monkeypatch):
    monkeypatch.setattr(composites, "TILE", TILE)


def numpy_median(scenes, ids, band, aoi, out_transform, shape):
    """np.nanmedian over the items `ids` of the band's usable reflectances, on the output grid."""
    stack = []
    for item_id in ids:
        values, keep, item_transform = usable_pixels(scenes[item_id], [band], aoi)
        stack.append(np.where(keep, values[band], np.nan))
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):  # pixels never clear: All-NaN
        want = np.nanmedian(np.stack(stack), axis=0)
    col = round((out_transform.c - item_transform.c) / 10)
    row = round((item_transform.f - out_transform.f) / 10)
    return want[row : row + shape[0], col : col + shape[1]]


def test_a_composite_of_several_tiles_is_numpys_median(local, small_tiles, tmp_path):
    path, items, scenes = local
    aoi = aoi_of(items[0])
    with Session(workspace=tmp_path, catalogs=[{"id": "tiles", "path": path}]) as session:
        array = session.composite(aoi, BANDS, catalog="tiles", collections=["sentinel-2-l2a"])
        rows, cols = array.data.chunks[1:]
        assert len(rows) >= 3 and len(cols) >= 3 and max(rows + cols) == TILE  # several tiles
        record = session.save(array)
        with rasterio.open(session.outputs.path(record.id)) as out:
            data, transform = out.read(), out.transform
    assert array.attrs["items"] == 4 and 0.3 < array.attrs["valid_fraction"] <= 1
    for index, band in enumerate(BANDS):
        want = numpy_median(scenes, DAYS, band, aoi, transform, data.shape[1:])
        got = data[index, : want.shape[0], : want.shape[1]]
        both = np.isfinite(got) & np.isfinite(want)
        assert both.sum() > 0.3 * got.size
        np.testing.assert_allclose(got[both], want[both], rtol=1e-6)
        # the same pixels have a value, up to a few on the AOI's edge (pixel centres vs. the polygon)
        assert np.count_nonzero(np.isfinite(got) != np.isfinite(want)) <= 0.01 * both.sum()


@pytest.mark.parametrize("method", ["median", "mean", "min", "max"])
def test_the_reduction_is_numpys_exactly(method):
    import dask.array as da

    rng = np.random.default_rng(3)
    cube = (rng.integers(1, 10000, (2, 7, 60, 50)) * 0.0001 - 0.1).astype("float32")
    cube[rng.random(cube.shape) < 0.4] = np.nan
    cube[:, :, :5, :5] = np.nan  # never a value
    cube[:, 1:, 10:15, :] = np.nan  # one value
    cube[:, 2:, 20:25, :] = np.nan  # two values (the median is their mean)
    got = composites.reduce_days(da.from_array(cube, chunks=(1, 7, 32, 32)), method).compute()
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = getattr(np, f"nan{method}")(cube, axis=1)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_a_cancelled_save_writes_nothing(local, small_tiles, tmp_path):
    path, items, _ = local
    with Session(workspace=tmp_path, catalogs=[{"id": "tiles", "path": path}]) as session:
        array = session.composite(aoi_of(items[0]), ["red"], catalog="tiles", collections=["sentinel-2-l2a"])
        seen = []

        def progress(done, total, message):
            seen.append(message)
            if "tile 2/" in (message or ""):
                job.cancel()

        job = Job(progress, min_interval_s=0)
        with pytest.raises(OperationCancelled):
            session.save(array, job=job)
        assert any("tile 1/" in (m or "") for m in seen)
        assert not session.outputs.list()
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


# --- a day failing only on a later tile ------------------------------------------------------------


def tile_offset(path, row: int, col: int = 0) -> int:
    """Byte offset of the full-resolution COG tile (row, col) of band 1 (tiles are stored row
    by row, after the overviews)."""
    with rasterio.open(path) as src:
        return int(src.get_tag_item(f"BLOCK_OFFSET_{col}_{row}", "TIFF", bidx=1))


@pytest.mark.testbed
def test_a_day_failing_on_a_later_tile_is_left_out_everywhere(
    local, small_tiles, tmp_path, make_settings, monkeypatch
):
    from stac_gdal_mcp.processing import formats
    from testbed.faults import ServerError, serve_faults

    failed_tiles, written = [], []
    failing_days, write_chunks = composites._failing_days, formats.write_chunks

    def spy_failing_days(core, job, plan, days, tile):
        failed_tiles.append(tile)
        return failing_days(core, job, plan, days, tile)

    def spy_write_chunks(path, *, chunks, **kwargs):
        counted = (written.append(window) or (window, data) for window, data in chunks)
        return write_chunks(path, chunks=counted, **kwargs)

    monkeypatch.setattr(composites, "_failing_days", spy_failing_days)
    monkeypatch.setattr(formats, "write_chunks", spy_write_chunks)

    _, local_items, scenes = local
    root = scenes["T1"]["dir"].parent  # the module's scenes, served (new URLs: nothing cached)
    with serve_faults(root) as server:
        items = json.loads(json.dumps(local_items).replace(json.dumps(str(root))[1:-1], server.url))
        # T2's red band: the header and the first rows of COG tiles read fine; every request from
        # the 16 KB chunk holding the fifth row of 128 px tiles on (read by the second and third
        # rows of output tiles) answers HTTP 500 - also GDAL's fall-back reads of whole chunks
        red = root / "T2" / "red.tif"
        path = "/T2/red.tif"
        from_byte = tile_offset(red, 4) // 16384 * 16384
        assert from_byte > tile_offset(red, 2, SIZE // 128 - 1)  # the first output row reads fine
        server.set_fault(path, ServerError(status=500, from_byte=from_byte))
        settings = make_settings(
            catalogs=[{"id": "faulty", "path": catalog(tmp_path / "c.json", items)}],
            network={"timeout_s": scaled(2), "max_retries": 0},
        )
        aoi = aoi_of(items[0])
        with Session(settings) as session:
            array = session.composite(aoi, BANDS, catalog="faulty", collections=["sentinel-2-l2a"])
            record = session.save(array)
            result = composites.result(array, record)
            tiles = len(written)
            tile_count = len(array.data.chunks[1]) * len(array.data.chunks[2])
            stats = server.stats()["paths"][path]
            with rasterio.open(session.outputs.path(record.id)) as out:
                got, transform = out.read(), out.transform
            # the same composite of the three good items, asked for by id
            server.clear_faults(path)
            want_array = session.composite(
                aoi, BANDS, catalog="faulty", collections=["sentinel-2-l2a"], ids=["T1", "T3", "T4"]
            )
            with rasterio.open(session.outputs.path(session.save(want_array).id)) as out:
                want = out.read()
    assert stats["faults"] >= 1
    # T2 failed on a tile of the second row, after tiles of the first row were written with it;
    # then every tile was made again without it
    assert failed_tiles and all(t[0] >= TILE for t in failed_tiles), (failed_tiles, result, tiles)
    assert tile_count < tiles <= 2 * tile_count, (tiles, tile_count)
    assert [f.item_id for f in result.failed_items] == ["T2"] and result.failed_items[0].error
    assert result.items == 3 and any("could not be read" in n for n in result.notes)
    derived = [link.href for link in record.links if link.rel == "derived_from"]
    assert derived and not any("/T2/" in href for href in derived), derived
    assert all(any(f"/{i}/" in href for href in derived) for i in ("T1", "T3", "T4"))
    np.testing.assert_array_equal(got, want)  # no pixel of T2 in any tile, the first ones included
    for index, band in enumerate(BANDS):
        median = numpy_median(scenes, ["T1", "T3", "T4"], band, aoi, transform, got.shape[1:])
        part = got[index, : median.shape[0], : median.shape[1]]
        both = np.isfinite(part) & np.isfinite(median)
        np.testing.assert_allclose(part[both], median[both], rtol=1e-6)


def test_the_stream_keeps_at_most_ahead_parts_in_flight(make_settings):
    import threading
    import time

    import dask

    from stac_gdal_mcp.core import Core
    from stac_gdal_mcp.processing.dask_runtime import compute_stream

    active, most, lock = [0], [0], threading.Lock()

    def part(value):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.3)  # longer than the stream's polling interval
        with lock:
            active[0] -= 1
        return value

    core = Core(make_settings())
    pulled, got, ahead_seen = [0], {}, []

    def parts():
        for i in range(7):
            pulled[0] += 1
            yield i, dask.delayed(part)(i)

    for key, value in compute_stream(core, Job(), parts(), ahead=2):
        got[key] = value
        ahead_seen.append(pulled[0] - len(got))  # taken from the parts, not yet given back
    assert got == {i: i for i in range(7)} and most[0] == 2
    assert max(ahead_seen) <= 1, ahead_seen  # (one of the two in flight was just given back)
