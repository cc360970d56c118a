"""Naming an input: asset lookup on JSON, the href policy (every refusal), GDAL paths and env,
opening over the Range server and through items of the pgstac test bed.

Expected pixel values come from rasterio on the local file, not through the code under test.
"""

from __future__ import annotations

import os
import uuid

import numpy as np
import pytest
import rasterio
from helpers import write_cog  # (test_faults_processing imports it from here too)

from stac_gdal_mcp.core import Core
from stac_gdal_mcp.errors import AccessDenied, AssetNotFound, AssetUnreadable, InvalidArgument
from stac_gdal_mcp.processing.access import find_asset, gdal_env, open_raster, resolve_input, unsigned_href

COG = "image/tiff; application=geotiff; profile=cloud-optimized"


def _band(common_name):
    return {"eo:bands": [{"name": common_name, "common_name": common_name}]}


EARTH_SEARCH = {
    "id": "S2B_33TUL_20240601_0_L2A",
    "assets": {
        "visual": {
            "type": COG,
            "roles": ["visual"],
            "eo:bands": [{"common_name": c} for c in ("red", "green", "blue")],
        },
        "red": {"type": COG, "roles": ["data"], **_band("red")},
        "red-jp2": {"type": "image/jp2", "roles": ["data"], **_band("red")},
        "nir": {"type": COG, "roles": ["data"], **_band("nir")},
        "nir08": {"type": COG, "roles": ["data"], **_band("nir08")},
        "scl": {"type": COG, "roles": ["data"]},
    },
}
PLANETARY = {
    "id": "S2B_MSIL2A_20240601",
    "assets": {
        "B04": {"type": COG, "roles": ["data"], **_band("red")},
        "B08": {"type": COG, "roles": ["data"], **_band("nir")},
        "SCL": {"type": COG, "roles": ["data"]},
        "visual": {"type": COG, "roles": ["data"]},
    },
}
LANDSAT = {  # STAC 1.1 `bands` with eo:common_name, no plain `nir`
    "id": "LC09_L2SP_190028_20240601",
    "assets": {
        "red": {"type": COG, "roles": ["data"], "bands": [{"name": "OLI_B4", "eo:common_name": "red"}]},
        "nir08": {"type": COG, "roles": ["data"], "bands": [{"name": "OLI_B5", "eo:common_name": "nir08"}]},
        "qa_pixel": {"type": COG, "roles": ["cloud"]},
    },
}
NO_METADATA_PC = {"id": "x", "assets": {"B04": {"href": "a"}, "B08": {"href": "b"}, "SCL": {"href": "c"}}}


@pytest.mark.parametrize(
    "item, name, key",
    [
        (EARTH_SEARCH, "red", "red"),  # key beats the visual asset's band list
        (EARTH_SEARCH, "RED", "red"),
        (EARTH_SEARCH, "nir", "nir"),
        (EARTH_SEARCH, "scl", "scl"),
        (EARTH_SEARCH, "SCL", "scl"),
        (EARTH_SEARCH, "visual", "visual"),
        (PLANETARY, "red", "B04"),
        (PLANETARY, "nir", "B08"),
        (PLANETARY, "scl", "SCL"),
        (PLANETARY, "b04", "B04"),
        (LANDSAT, "nir", "nir08"),
        (LANDSAT, "red", "red"),
        (LANDSAT, "QA_PIXEL", "qa_pixel"),
        (NO_METADATA_PC, "red", "B04"),  # known key aliases when there is no band metadata
        (NO_METADATA_PC, "nir", "B08"),
    ],
)
def test_find_asset(item, name, key):
    found, asset = find_asset(item, name)
    assert found == key and asset is item["assets"][key]


def test_find_asset_prefers_cog_single_band_over_jp2_and_visual():
    item = {"id": "i", "assets": {k: v for k, v in EARTH_SEARCH["assets"].items() if k != "red"}}
    assert find_asset(item, "red")[0] == "red-jp2"  # only single-band red left; visual has 3 bands
    item["assets"]["B04"] = {"type": COG, "roles": ["data"], **_band("red")}
    assert find_asset(item, "red")[0] == "B04"  # COG beats JP2


def test_find_asset_not_found_lists_assets():
    with pytest.raises(AssetNotFound, match=r"no asset or band 'swir16'.*B04 \(red\)"):
        find_asset(PLANETARY, "swir16")
    with pytest.raises(InvalidArgument):
        find_asset(PLANETARY, "")


def test_unsigned_href_drops_credentials():
    signed = (
        "https://sentinel2l2a01.blob.core.windows.net/sentinel2-l2/33/T/UL/B04.tif"
        "?st=2024-06-01T10%3A00Z&se=2024-06-02T10%3A00Z&sp=rl&sv=2021-06-08&sr=c&skoid=abc&sig=SECRET%3D"
    )
    assert (
        unsigned_href(signed) == "https://sentinel2l2a01.blob.core.windows.net/sentinel2-l2/33/T/UL/B04.tif"
    )
    presigned = "https://bucket.s3.amazonaws.com/k.tif?X-Amz-Signature=s&X-Amz-Credential=c&versionId=3"
    assert unsigned_href(presigned) == "https://bucket.s3.amazonaws.com/k.tif?versionId=3"
    assert unsigned_href("https://user:pw@host/x.tif") == "https://host/x.tif"
    assert unsigned_href("s3://bucket/key.tif") == "s3://bucket/key.tif"


def test_gdal_env():
    from stac_gdal_mcp.settings import load_settings

    settings = load_settings(network={"timeout_s": 12, "max_retries": 4})
    env = gdal_env(settings)
    assert env["GDAL_DISABLE_READDIR_ON_OPEN"] == "EMPTY_DIR"
    assert env["GDAL_HTTP_MERGE_CONSECUTIVE_RANGES"] == "YES"
    assert env["GDAL_HTTP_MULTIRANGE"] == "YES"
    assert env["GDAL_HTTP_MAX_RETRY"] == "4" and env["GDAL_HTTP_TIMEOUT"] == "12"
    assert env["VSI_CACHE"] == "FALSE"  # its 32 KB blocks doubled the bytes of every COG header
    assert int(env["CPL_VSIL_CURL_CACHE_SIZE"]) <= 256 * 1024**2
    assert env["AWS_NO_SIGN_REQUEST"] == "YES" and "AWS_REQUEST_PAYER" not in env
    paying = gdal_env(settings, requester_pays=True)
    assert paying["AWS_REQUEST_PAYER"] == "requester" and "AWS_NO_SIGN_REQUEST" not in paying


# --- the href policy: every refusal --------------------------------------------------------


@pytest.fixture
def strict_core(make_settings, tmp_path):
    """Private hosts refused, as in production."""
    return Core(make_settings(network={"allow_private_hosts": False}, workspace=tmp_path / "ws"))


@pytest.mark.parametrize(
    "href",
    [
        "file:///etc/passwd",
        "FILE:/etc/passwd",
        "/vsicurl/https://example.com/x.tif",
        "/vsis3/bucket/key.tif",
        "/VSIZIP//tmp/x.zip/a.tif",
        "PG:dbname=postgres",
        "GTIFF_DIR:1:/tmp/x.tif",
        "NETCDF:/tmp/x.nc:var",
        "ftp://example.com/x.tif",
        "gs://bucket/x.tif",
        "http://127.0.0.1:8000/x.tif",
        "http://localhost/x.tif",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.1.2.3/x.tif",
        "http://192.168.0.1/x.tif",
        "http://[::1]/x.tif",
        "http://0.0.0.0/x.tif",
        "/etc/passwd",
    ],
)
def test_refused_hrefs(strict_core, href):
    with pytest.raises(AccessDenied):
        resolve_input(strict_core, href=href)


def test_local_paths_only_inside_workspace(strict_core, tmp_path):
    workspace = strict_core.settings.workspace
    workspace.mkdir(parents=True)
    inside = workspace / "in.tif"
    inside.write_bytes(b"x")
    assert resolve_input(strict_core, href=str(inside)).gdal_path == str(inside.resolve())
    outside = tmp_path / "secret.tif"
    outside.write_bytes(b"x")
    with pytest.raises(AccessDenied):
        resolve_input(strict_core, href=str(outside))
    with pytest.raises(AccessDenied):
        resolve_input(strict_core, href=f"{workspace}/../secret.tif")
    (workspace / "link.tif").symlink_to(outside)
    with pytest.raises(AccessDenied):
        resolve_input(strict_core, href=str(workspace / "link.tif"))


def test_gdal_paths_for_remote_hrefs(strict_core):
    s3 = resolve_input(strict_core, href="s3://sentinel-cogs/sentinel-s2-l2a-cogs/33/T/B04.tif")
    assert s3.gdal_path == "/vsis3/sentinel-cogs/sentinel-s2-l2a-cogs/33/T/B04.tif"
    assert s3.href_unsigned == "s3://sentinel-cogs/sentinel-s2-l2a-cogs/33/T/B04.tif"


def test_input_must_be_named_one_way(strict_core):
    with pytest.raises(InvalidArgument, match="not both"):
        resolve_input(strict_core, href="s3://b/k.tif", collection_id="c", item_id="i", asset="red")
    with pytest.raises(InvalidArgument, match="collection_id \\+ item_id \\+ asset"):
        resolve_input(strict_core, collection_id="c", item_id="i")
    with pytest.raises(InvalidArgument):
        resolve_input(strict_core)


# --- reading: Range server, local catalog, pgstac items -------------------------------------


@pytest.fixture
def served_cog(cog_server):
    name = f"access-{uuid.uuid4().hex[:8]}.tif"
    data = np.arange(300 * 400, dtype="uint16").reshape(300, 400)
    write_cog(cog_server.root / name, data, nodata=0)
    return f"{cog_server.url}/{name}", cog_server.root / name


def test_open_over_http_reads_the_served_file(make_settings, served_cog):
    url, path = served_cog
    core = Core(make_settings())
    source = resolve_input(core, href=url)
    assert source.gdal_path == f"/vsicurl/{url}"
    with open_raster(source, core.settings) as src:
        got = src.read(1, window=((10, 20), (30, 50)))
    with rasterio.open(path) as truth:
        assert np.array_equal(got, truth.read(1, window=((10, 20), (30, 50))))


def test_private_hosts_refused_by_default(make_settings, served_cog):
    url, _ = served_cog
    core = Core(make_settings(network={"allow_private_hosts": False}))
    with pytest.raises(AccessDenied, match="allow_private_hosts"):
        resolve_input(core, href=url)


def test_vrt_and_non_rasters_are_refused(make_settings, cog_server):
    name = f"evil-{uuid.uuid4().hex[:8]}"
    (cog_server.root / f"{name}.vrt").write_text(
        '<VRTDataset rasterXSize="1" rasterYSize="1"><VRTRasterBand dataType="Byte" band="1">'
        "<SimpleSource><SourceFilename>/etc/passwd</SourceFilename></SimpleSource>"
        "</VRTRasterBand></VRTDataset>"
    )
    (cog_server.root / f"{name}.tif").write_text((cog_server.root / f"{name}.vrt").read_text())
    core = Core(make_settings())
    for suffix in (".vrt", ".tif"):
        source = resolve_input(core, href=f"{cog_server.url}/{name}{suffix}")
        with pytest.raises(AssetUnreadable, match="not a raster this server reads"):
            with open_raster(source, core.settings):
                pass
    missing = resolve_input(core, href=f"{cog_server.url}/{name}-missing.tif")
    with pytest.raises(AssetUnreadable):
        with open_raster(missing, core.settings):
            pass


def test_local_catalog_items_follow_the_policy(make_settings, tmp_path):
    import json

    folder = tmp_path / "catalog"
    folder.mkdir()
    write_cog(folder / "red.tif", np.full((64, 64), 7, dtype="uint16"))
    items = [
        {
            "type": "Feature",
            "stac_version": "1.0.0",
            "id": item_id,
            "collection": "local",
            "geometry": None,
            "properties": {"datetime": "2024-06-01T10:00:00Z"},
            "links": [],
            "assets": {"red": {"href": href, "type": COG, **_band("red")}},
        }
        for item_id, href in [
            ("good", "./red.tif"),
            ("escape", "/etc/passwd"),
            ("metadata", "http://169.254.169.254/latest/x.tif"),
        ]
    ]
    (folder / "items.json").write_text(json.dumps({"type": "FeatureCollection", "features": items}))
    core = Core(
        make_settings(
            catalogs=[{"id": "loc", "path": str(folder / "items.json")}],
            default_catalog="loc",
            network={"allow_private_hosts": False},
        )
    )
    source = resolve_input(core, collection_id="local", item_id="good", asset="red")
    assert source.gdal_path == str((folder / "red.tif").resolve())
    assert (source.catalog, source.asset_key, source.datetime) == ("loc", "red", "2024-06-01T10:00:00Z")
    with open_raster(source, core.settings) as src:
        assert int(src.read(1)[0, 0]) == 7
    for item_id in ("escape", "metadata"):
        with pytest.raises(AccessDenied):
            resolve_input(core, collection_id="local", item_id=item_id, asset="red")


def test_items_from_pgstac(make_settings, pgstac_api, served_cog):
    url, path = served_cog
    collection_id = f"proc-access-{uuid.uuid4().hex[:6]}"
    collection = {
        "type": "Collection",
        "stac_version": "1.0.0",
        "id": collection_id,
        "description": "access tests",
        "license": "proprietary",
        "links": [],
        "extent": {
            "spatial": {"bbox": [[14, 45, 16, 46]]},
            "temporal": {"interval": [["2024-01-01T00:00:00Z", None]]},
        },
    }
    item = {
        "type": "Feature",
        "stac_version": "1.0.0",
        "id": "pc-like",
        "collection": collection_id,
        "bbox": [14, 45, 16, 46],
        "geometry": {"type": "Polygon", "coordinates": [[[14, 45], [16, 45], [16, 46], [14, 46], [14, 45]]]},
        "properties": {"datetime": "2024-06-01T10:00:00Z"},
        "links": [],
        "assets": {"B04": {"href": url + "?sv=2021&sig=SECRET", "type": COG, **_band("red")}},
    }
    pgstac_api.load([collection], [item])
    core = Core(make_settings(catalogs=[{"id": "testbed", "url": pgstac_api.url}], default_catalog="testbed"))
    source = resolve_input(core, collection_id=collection_id, item_id="pc-like", asset="red")
    assert source.asset_key == "B04"
    assert source.href_unsigned == url  # the signature never reaches records or messages
    assert "SECRET" not in repr(source)
    with open_raster(source, core.settings) as src:
        got = src.read(1)
    with rasterio.open(path) as truth:
        assert np.array_equal(got, truth.read(1))
    assert not os.environ.get("AWS_NO_SIGN_REQUEST")  # gdal_env is scoped, never exported


# --- many files at once: the long-lived reader threads ----------------------------------------------


def test_read_each_bounds_the_calls_in_flight_and_reuses_threads():
    import threading
    import time

    from stac_gdal_mcp.processing.access import read_each

    lock, running, peak, threads = threading.Lock(), [0], [0], set()

    def work(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            threads.add(threading.get_ident())
        time.sleep(0.01)
        with lock:
            running[0] -= 1
        return i * i

    results = dict(read_each(work, [(i,) for i in range(20)], 3))
    assert results == {i: i * i for i in range(20)}
    assert peak[0] <= 3 and len(threads) <= 3
    first = set(threads)
    threads.clear()
    assert dict(read_each(work, [(i,) for i in range(6)], 3)) == {i: i * i for i in range(6)}
    assert threads <= first  # the same threads serve the next call (GDAL's per-thread set-up kept)


def test_read_each_stopped_early_leaves_nothing_running():
    import time

    from stac_gdal_mcp.processing.access import read_each

    started, finished = [], []

    def work(i):
        started.append(i)
        time.sleep(0.05)
        finished.append(i)
        return i

    results = read_each(work, [(i,) for i in range(10)], 2)
    next(results)
    results.close()  # as a caller does when a job is cancelled between items
    assert sorted(started) == sorted(finished)  # what had started has finished: nothing runs on
    assert len(started) < 10  # the calls not started were dropped
    time.sleep(0.1)
    assert len(started) == len(finished)  # and nothing started after the generator closed


def test_read_each_passes_errors_to_the_caller():
    from stac_gdal_mcp.processing.access import read_each

    def work(i):
        if i == 2:
            raise ValueError("item 2")
        return i

    with pytest.raises(ValueError, match="item 2"):
        list(read_each(work, [(i,) for i in range(4)], 2))
