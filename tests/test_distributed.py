"""time_series and composite on a dask.distributed LocalCluster with worker processes.

The cluster's workers are separate processes: everything they need (the GDAL settings among
it) must travel in the task graph. Values are checked against numpy on the local files, and
against the same call on the local threaded scheduler.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
import uuid

import numpy as np
import pytest
import rasterio
from helpers import expected_ndvi, fractions, run_composite, run_time_series, utm_aoi, write_days
from test_fuzz import Harness

from stac_gdal_mcp import Session
from stac_gdal_mcp.errors import AssetUnreadable
from stac_gdal_mcp.testing import synthetic

pytestmark = pytest.mark.testbed  # a dask LocalCluster of worker processes

UID = uuid.uuid4().hex[:8]
S2 = f"dist-s2-{UID}"
ORIGIN = (500000.0, 5000000.0)  # EPSG:32633, where synthetic scenes start
AOI = utm_aoi(ORIGIN[0] + 1500, ORIGIN[1] - 4000, ORIGIN[0] + 4500, ORIGIN[1] - 1000)
DAYS = {"S2B_D1": "2024-07-01T10:00:00Z", "S2B_D2": "2024-07-06T10:00:00Z", "S2B_D3": "2024-07-11T10:00:00Z"}


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def scenes(cog_server, pgstac_api):
    folder = f"dist-{UID}"
    out_dir, href_base = cog_server.root / folder, f"{cog_server.url}/{folder}"
    items = write_days(
        out_dir,
        DAYS,
        seed=40,
        collection_id=S2,
        size_px=512,
        blocksize=128,
        href_base=href_base,
        **fractions(cloud=lambda number: 0.2 + 0.2 * number, nodata=0.1),
    )
    made = {item["id"]: {"item": item, "dir": out_dir / item["id"]} for item in items}
    pgstac_api.load([synthetic.collection("sentinel-2-l2a", S2)], items)
    return made


@pytest.fixture
def cores(make_settings, pgstac_api, scenes, cluster):
    catalogs = [{"id": "testbed", "url": pgstac_api.url}]
    local = Session(make_settings(catalogs=catalogs, default_catalog="testbed"))
    remote = Session(
        make_settings(catalogs=catalogs, default_catalog="testbed", dask_scheduler=cluster.scheduler_address)
    )
    return local, remote


def executed(cluster) -> int:
    """Tasks the worker processes have run so far."""
    from distributed import Client

    with Client(cluster.scheduler_address, set_as_default=False) as client:
        return sum(client.run(lambda dask_worker: dask_worker.state.executed_count).values())


def test_time_series_on_the_cluster(cores, scenes, cluster):
    local, remote = cores
    before = executed(cluster)
    # every day kept, however thin (min_valid_fraction=0), to compare each with numpy
    on_cluster = run_time_series(remote, AOI, collections=[S2], catalog="testbed", min_valid_fraction=0)
    assert executed(cluster) > before + 3  # the loads and reductions ran in the worker processes
    assert on_cluster.scheduler == f"dask.distributed at {cluster.scheduler_address}"
    on_threads = run_time_series(local, AOI, collections=[S2], catalog="testbed", min_valid_fraction=0)
    assert on_threads.scheduler == "dask threads (local)"
    assert [r.date for r in on_cluster.rows] == ["2024-07-01", "2024-07-06", "2024-07-11"]
    for a, b in zip(on_cluster.rows, on_threads.rows):
        assert (a.value, a.valid_pixels, a.item_ids) == (b.value, b.valid_pixels, b.item_ids)
        want, count = expected_ndvi([scenes[i] for i in a.item_ids], AOI)
        assert a.value == pytest.approx(want, rel=1e-3) and a.valid_pixels == pytest.approx(
            count, rel=0.005, abs=3
        )


def test_composite_on_the_cluster(cores, scenes):
    local, remote = cores
    a = run_composite(remote, AOI, bands=["nir"], collections=[S2], catalog="testbed", method="mean")
    b = run_composite(local, AOI, bands=["nir"], collections=[S2], catalog="testbed", method="mean")
    with (
        rasterio.open(remote.outputs.path(a.output.id)) as x,
        rasterio.open(local.outputs.path(b.output.id)) as y,
    ):
        np.testing.assert_array_equal(x.read(), y.read())
        assert x.transform == y.transform
    assert a.items == 3 and a.valid_fraction == b.valid_fraction


def test_gdal_settings_reach_the_workers(cores):
    """A GDAL setting given for the load is applied in the worker processes: allowing only
    .jp2 over HTTP makes every read of the .tif assets fail there (the server process reads no
    pixel). The same call without it succeeds (test above)."""
    _, remote = cores
    with pytest.raises(AssetUnreadable) as info:
        run_time_series(
            remote,
            AOI,
            collections=[S2],
            catalog="testbed",
            gdal_options={"CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".jp2"},
        )
    # every item failed in the workers, for the reason the setting gives (.tif not allowed)
    assert "none of the 3 items could be read" in str(info.value)
    assert "not recognized as a supported dataset name" in str(info.value)


# --- a scheduler address where no cluster can run -----------------------------------------------

JOB_S = 5  # limits.job_timeout_s of these calls
SQUARE = {"type": "Polygon", "coordinates": [[[13.6, 45.92], [13.61, 45.92], [13.61, 45.93], [13.6, 45.92]]]}
JUNE = {"collections": ["sentinel-2-l2a"], "datetime": "2024-06-01/2024-06-30"}


def _peer(behaviour):
    """A TCP server at 127.0.0.1 answering every connection with `behaviour(conn)`."""
    server = socket.create_server(("127.0.0.1", 0))

    def accept():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=behaviour, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return server, f"tcp://127.0.0.1:{server.getsockname()[1]}"


def _send_then_wait(data: bytes):
    def behaviour(conn):
        try:
            conn.sendall(data)
            threading.Event().wait(120)
        except OSError:
            pass
        finally:
            conn.close()

    return behaviour


def _http(conn):
    """An HTTP server: it waits for a request line, which a dask client never sends first."""
    try:
        if conn.recv(65536):
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    finally:
        conn.close()


def _closed_port() -> str:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture(scope="module")
def unusable_addresses():
    """{what: address} of places where no cluster can run."""
    from distributed import LocalCluster

    servers = {
        "garbage": _peer(_send_then_wait(os.urandom(65536))),
        "a 2^60-byte frame": _peer(_send_then_wait(struct.pack("<Q", 2**60))),
        "a silent peer": _peer(_send_then_wait(b"")),
        "an HTTP server": _peer(_http),
    }
    with LocalCluster(n_workers=0, dashboard_address=None, silence_logs=logging.ERROR) as empty:
        yield {
            "unreachable": _closed_port(),
            **{what: address for what, (_, address) in servers.items()},
            "no workers": empty.scheduler_address,
        }
    for server, _ in servers.values():
        server.close()


@pytest.mark.parametrize(
    "what", ["unreachable", "garbage", "a 2^60-byte frame", "a silent peer", "an HTTP server", "no workers"]
)
def test_a_cluster_that_cannot_run_is_one_line_naming_the_setting(what, unusable_addresses, tmp_path):
    """zonal_stats, time_series, composite and cloud_cover_stats through an MCP client: one line naming
    settings.dask_scheduler within the job limit + a few seconds (they failed bare, tried to
    allocate exabytes, or waited past the limit), and the server still answers."""
    harness = Harness(
        tmp_path / "workspace", dask_scheduler=unusable_addresses[what], limits={"job_timeout_s": JOB_S}
    )
    try:
        for tool, arguments in (
            ("zonal_stats", {"geometries": SQUARE, "search": JUNE}),
            ("time_series", {"aoi": [13.6, 45.92, 13.62, 45.94], "search": JUNE}),
            ("composite", {"aoi": [13.6, 45.92, 13.62, 45.94], "search": JUNE, "bands": ["red"]}),
            ("cloud_cover_stats", {"aoi": [13.6, 45.92, 13.62, 45.94], "search": JUNE}),
        ):
            started = time.monotonic()
            result = harness.call(tool, arguments)
            elapsed = time.monotonic() - started
            text = result.content[0].text
            assert result.is_error and "settings.dask_scheduler" in text and "\n" not in text, (tool, text)
            assert len(text) < 400, (tool, text)
            assert elapsed < JOB_S + 5, (tool, elapsed)
        assert harness.alive()
    finally:
        harness.close()
