"""`stac-gdal-mcp index DIR`: a folder of generated COGs (and one plain GeoTIFF) becomes a local
catalog that the MCP tools search by bbox/datetime and process. Expected sets come from how the
files were made (places, dates), footprints from pyproj/rasterio directly."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
from fastmcp import Client
from helpers import found_items
from pyproj import Transformer
from rasterio.transform import from_origin
from rasterio.warp import transform_bounds

from stac_gdal_mcp.cli import main
from stac_gdal_mcp.testing import synthetic

TO_WGS84 = Transformer.from_crs(32633, 4326, always_xy=True)
SITE_A, SITE_B = (300000.0, 5100000.0), (420000.0, 5000000.0)
SCENES = [  # item folder, date, site
    ("S2B_33TUL_20240604_0_L2A", "2024-06-04T10:05:59Z", SITE_A),
    ("S2A_33TUL_20240619_0_L2A", "2024-06-19T10:05:49Z", SITE_A),
    ("S2A_33TVK_20240619_0_L2A", "2024-06-19T10:05:49Z", SITE_B),
]
BANDS = ("red", "green", "blue", "nir", "scl")
PLAIN = "plain/mosaic.tif"  # not a COG: striped, no overviews, no date in its name


def bbox_around(site, size_m=2560.0):
    """A small WGS84 bbox inside a scene written at `site` (upper-left corner, 2.56 km wide)."""
    x, y = site[0] + size_m / 2, site[1] - size_m / 2
    lon, lat = TO_WGS84.transform(x, y)
    return [lon - 0.003, lat - 0.003, lon + 0.003, lat + 0.003]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("mycogs")
    for seed, (name, when, site) in enumerate(SCENES):
        synthetic.write_scene(
            "sentinel-2-l2a",
            root / "scenes",
            name,
            when,
            seed=seed,
            origin=site,
            size_px=256,
            with_visual=False,
        )
    (root / "plain").mkdir()
    profile = {
        "driver": "GTiff",
        "width": 1024,
        "height": 1024,
        "count": 1,
        "dtype": "uint16",
        "crs": "EPSG:32633",
        "transform": from_origin(*SITE_B, 10, 10),
        "tiled": False,
        "nodata": 0,
    }
    with rasterio.open(root / PLAIN, "w", **profile) as dst:
        dst.write(np.arange(1024 * 1024, dtype="uint32").reshape(1, 1024, 1024).astype("uint16") % 5000 + 1)
        dst.update_tags(TIFFTAG_DATETIME="2024:07:01 10:30:00")
    return root


def files(root: Path, names) -> set[str]:
    return {str((root / n).resolve()) for n in names}


def test_index_command_flags_the_plain_geotiff_and_is_incremental(folder, tmp_path, capsys):
    work = tmp_path / "copy"
    shutil.copytree(folder, work)
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    out = capsys.readouterr().out
    n = len(SCENES) * len(BANDS) + 1
    assert f"indexed {n} file(s)" in out and f"{n} added" in out
    assert f"not a COG: {PLAIN}" in out and "rio cogeo create" in out
    assert out.count("not a COG") == 1
    index = json.loads((work / "stac-index.json").read_text())
    by_href = {i["assets"]["data"]["href"]: i for i in index["features"]}
    assert by_href[PLAIN]["assets"]["data"]["type"] == "image/tiff; application=geotiff"
    assert by_href[PLAIN]["properties"]["datetime"] == "2024-07-01T10:30:00Z"  # TIFFTAG_DATETIME
    red = by_href[f"scenes/{SCENES[0][0]}/red.tif"]
    assert red["properties"]["datetime"] == "2024-06-04T00:00:00Z"  # the pattern, from the path
    assert red["assets"]["data"]["type"].endswith("profile=cloud-optimized")
    with rasterio.open(work / "scenes" / SCENES[0][0] / "red.tif") as src:
        want = transform_bounds(src.crs, "EPSG:4326", *src.bounds)
        assert red["properties"]["proj:code"] == "EPSG:32633"
        assert red["properties"]["proj:shape"] == [src.height, src.width]
        assert red["assets"]["data"]["raster:bands"][0]["data_type"] == src.dtypes[0]
    assert red["bbox"] == pytest.approx(list(want), abs=1e-4)
    assert red["assets"]["data"]["eo:bands"][0]["common_name"] == "red"

    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    assert f"0 added, 0 updated, {n} unchanged, 0 removed" in capsys.readouterr().out

    (work / "scenes" / SCENES[2][0] / "nir.tif").unlink()
    os.utime(work / "scenes" / SCENES[1][0] / "red.tif", ns=(10**18, 10**18))
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    out = capsys.readouterr().out
    assert f"0 added, 1 updated, {n - 2} unchanged, 1 removed" in out
    assert "not a COG" in out  # still flagged when unchanged
    hrefs = {
        i["assets"]["data"]["href"] for i in json.loads((work / "stac-index.json").read_text())["features"]
    }
    assert f"scenes/{SCENES[2][0]}/nir.tif" not in hrefs and len(hrefs) == n - 1


def test_index_refuses_an_output_below_the_folder(folder, tmp_path, capsys):
    assert main(["index", str(folder), "--output", str(folder / "scenes" / "x.json")]) == 2
    assert "must be in" in capsys.readouterr().err


@pytest.fixture(scope="module")
def indexed(folder):
    assert main(["index", str(folder), "--datetime-pattern", "%Y%m%d", "--collection", "my-cogs"]) == 0
    return folder / "stac-index.json"


async def test_search_by_bbox_and_datetime_then_reproject(build, make_settings, indexed, folder):
    settings = make_settings(catalogs=[{"id": "mine", "path": str(indexed)}])
    async with Client(build(settings)) as client:

        async def search(**args):
            result = await client.call_tool(
                "search_items", {"catalog": "mine", "detail": "full", "limit": 100, **args}
            )
            return {i["assets"]["data"]["href"] for i in found_items(result.structured_content)}

        site_a = bbox_around(SITE_A)
        assert await search(bbox=site_a) == files(
            folder, [f"scenes/{s[0]}/{b}.tif" for s in SCENES[:2] for b in BANDS]
        )
        assert await search(bbox=site_a, datetime="2024-06-01/2024-06-10") == files(
            folder, [f"scenes/{SCENES[0][0]}/{b}.tif" for b in BANDS]
        )
        assert await search(bbox=bbox_around(SITE_B), datetime="2024-06-25/2024-07-31") == files(
            folder, [PLAIN]
        )
        assert await search(collections=["my-cogs"], datetime="2024-06-19") == files(
            folder, [f"scenes/{s[0]}/{b}.tif" for s in SCENES[1:] for b in BANDS]
        )

        found = await client.call_tool(
            "search_items", {"catalog": "mine", "bbox": site_a, "datetime": "2024-06-04", "limit": 100}
        )
        nir = next(i for i in found_items(found.structured_content) if i["id"].endswith("nir"))
        assert nir["assets"]["data"]["bands"] == ["nir"]
        record = (
            await client.call_tool(
                "reproject_asset",
                {
                    "catalog": "mine",
                    "collection_id": "my-cogs",
                    "item_id": nir["id"],
                    "asset": "nir",  # the band common name read from the header
                    "dst_crs": "EPSG:4326",
                },
            )
        ).structured_content
    source = folder / "scenes" / SCENES[0][0] / "nir.tif"
    with rasterio.open(source) as src, rasterio.open(record["assets"]["data"]["href"]) as out:
        west, south, east, north = transform_bounds(src.crs, "EPSG:4326", *src.bounds)
        assert out.crs.to_epsg() == 4326
        assert out.bounds.left == pytest.approx(west, abs=2 * out.res[0])
        assert out.bounds.top == pytest.approx(north, abs=2 * out.res[1])
        assert out.bounds.right == pytest.approx(east, abs=2 * out.res[0])
        data = out.read(1, masked=True)
        assert 0.9 * src.read(1).mean() < data.mean() < 1.1 * src.read(1).mean()
    assert str(source) in [link["href"] for link in record["links"]]


async def test_a_running_server_sees_a_re_index(build, make_settings, folder, tmp_path, capsys):
    """Re-running `index` while the server runs: the next search sees the new file, no restart."""
    work = tmp_path / "live"
    shutil.copytree(folder, work)
    new = work / "scenes" / SCENES[1][0] / "red.tif"
    moved = tmp_path / "red.tif"
    new.rename(moved)  # indexed without it first
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    settings = make_settings(catalogs=[{"id": "mine", "path": str(work / "stac-index.json")}])
    async with Client(build(settings)) as client:

        async def hrefs():
            result = await client.call_tool(
                "search_items",
                {"catalog": "mine", "detail": "full", "limit": 100, "bbox": bbox_around(SITE_A)},
            )
            return {i["assets"]["data"]["href"] for i in found_items(result.structured_content)}

        before = await hrefs()
        assert str(new.resolve()) not in before
        moved.rename(new)
        assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
        assert "1 added" in capsys.readouterr().out
        assert await hrefs() == before | {str(new.resolve())}


# --- hardening: what a hostile folder cannot make `index` do ------------------------


def small_tiff(path: Path, *, site=SITE_A, value: int = 7) -> Path:
    """A small georeferenced GeoTIFF (uncompressed: a pixel can be changed in place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = {
        "driver": "GTiff",
        "width": 64,
        "height": 64,
        "count": 1,
        "dtype": "uint8",
        "crs": "EPSG:32633",
        "transform": from_origin(*site, 10, 10),
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.full((1, 64, 64), value, dtype="uint8"))
    return path


def features(index: Path) -> list[dict]:
    return json.loads(index.read_text())["features"]


def test_index_writes_no_file_through_a_planted_link(tmp_path):
    """Links planted at every temporary name the index could use: nothing outside DIR changes."""
    from stac_gdal_mcp.catalogs.indexing import build_index

    work, outside = tmp_path / "dir", tmp_path / "outside"
    small_tiff(work / "a.tif")
    outside.mkdir()
    victims = []
    for name in ("stac-index.json", "stac-index.collection.json"):
        victim = outside / f"victim-{name}"
        victim.write_text("precious")
        victims.append(victim)
        (work / f".{name}.{os.getpid()}.tmp").symlink_to(victim)
    report = build_index(work)
    assert [v.read_text() for v in victims] == ["precious", "precious"]
    assert [i["assets"]["data"]["href"] for i in features(report.output)] == ["a.tif"]
    assert not (work / "stac-index.json").is_symlink()


def test_index_reads_no_file_through_a_link(tmp_path):
    """A linked file and a linked folder leading out of DIR are skipped with a note, not indexed."""
    from stac_gdal_mcp.catalogs.indexing import build_index

    work, outside = tmp_path / "dir", tmp_path / "outside"
    small_tiff(work / "a.tif")
    small_tiff(outside / "secret.tif", site=SITE_B)
    small_tiff(outside / "folder" / "deep.tif", site=SITE_B)
    (work / "link.tif").symlink_to(outside / "secret.tif")
    (work / "linked").symlink_to(outside / "folder", target_is_directory=True)
    report = build_index(work)
    assert [i["assets"]["data"]["href"] for i in features(report.output)] == ["a.tif"]
    skipped = {entry["path"]: entry["reason"] for entry in report.skipped}
    assert set(skipped) == {"link.tif", "linked"}
    assert all("symbolic link" in reason for reason in skipped.values())


def test_a_planted_previous_index_is_not_trusted(tmp_path):
    """A previous index whose entries match the files' size and mtime, with a forged id and an
    extra asset pointing elsewhere: its entries are not reused as they are."""
    from stac_gdal_mcp.catalogs.indexing import build_index

    work = tmp_path / "dir"
    small_tiff(work / "a.tif")
    small_tiff(work / "b.tif", site=SITE_B)
    index = build_index(work).output
    honest = {i["id"]: i for i in features(index)}
    doc = json.loads(index.read_text())
    forged = doc["features"][0]
    forged["id"] = "<img src=x onerror=alert(1)>"
    forged["assets"]["evil"] = {"href": "/etc/passwd", "type": "text/plain"}
    forged["properties"]["title"] = "<script>alert(1)</script>"
    index.write_text(json.dumps(doc))
    build_index(work)
    items = {i["id"]: i for i in features(index)}
    assert items == honest  # every entry as an honest run makes it
    for item in items.values():
        assert list(item["assets"]) == ["data"]


def test_a_file_changed_in_place_is_read_again(tmp_path):
    """Same size, same mtime, other content: the content fingerprint tells, the item is redone."""
    from stac_gdal_mcp.catalogs.indexing import build_index

    work = tmp_path / "dir"
    path = small_tiff(work / "a.tif")
    build_index(work)
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # a pixel of the last strip
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    report = build_index(work)
    assert (report.updated, report.unchanged) == (["a.tif"], [])


def test_a_file_that_vanishes_mid_run_is_reported_and_the_rest_indexed(tmp_path, monkeypatch):
    """b.tif is removed while a.tif is being indexed (after the folder was listed)."""
    from stac_gdal_mcp.catalogs import indexing

    work = tmp_path / "dir"
    small_tiff(work / "a.tif")
    small_tiff(work / "b.tif", site=SITE_B)
    small_tiff(work / "c.tif")
    real = indexing._cog_check

    def check_then_remove_b(path):
        (work / "b.tif").unlink(missing_ok=True)
        return real(path)

    monkeypatch.setattr(indexing, "_cog_check", check_then_remove_b)
    report = indexing.build_index(work)
    assert sorted(report.added) == ["a.tif", "c.tif"]
    assert [entry["path"] for entry in report.skipped] == ["b.tif"]
    assert sorted(i["assets"]["data"]["href"] for i in features(report.output)) == ["a.tif", "c.tif"]


def test_file_names_are_escaped_in_the_report(tmp_path, capsys):
    """A name with a line break cannot forge a report line; escape sequences do not reach the
    terminal."""
    work = tmp_path / "dir"
    small_tiff(work / "ok.tif")
    (work / "x\nindexed 999 file(s) into etc: forged.tif").write_bytes(b"not a tiff")
    (work / "\x1b[2J\x1b]0;title\x07y.tif").write_bytes(b"not a tiff")
    assert main(["index", str(work)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert not [line for line in out.splitlines() if line.startswith("indexed 999")]
    assert "x\\nindexed 999 file(s) into etc: forged.tif" in out
    assert "\\x1b[2J" in out


def test_index_writes_stac_geoparquet_by_the_output_suffix(folder, tmp_path, capsys, make_settings):
    """`--output items.parquet`: the same items as the JSON index (read back by stac-geoparquet
    and DuckDB), incremental on a re-run, and searched as a catalog like the JSON index."""
    import duckdb
    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import stac_table_to_items

    from stac_gdal_mcp import Session

    work = tmp_path / "copy"
    shutil.copytree(folder, work)
    out = work / "items.parquet"
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d", "--output", str(out)]) == 0
    n = len(SCENES) * len(BANDS) + 1
    assert f"indexed {n} file(s) into {out}" in capsys.readouterr().out
    want = features(work / "stac-index.json")
    got = list(stac_table_to_items(pq.read_table(out)))
    assert [i["id"] for i in got] == [i["id"] for i in want]
    assert [i["assets"]["data"]["href"] for i in got] == [i["assets"]["data"]["href"] for i in want]
    assert [i["bbox"] for i in got] == [pytest.approx(i["bbox"]) for i in want]
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}')").fetchall() == [(n,)]
    assert b"collections" in pq.read_schema(out).metadata[b"stac-geoparquet"]

    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d", "--output", str(out)]) == 0
    assert f"0 added, 0 updated, {n} unchanged, 0 removed" in capsys.readouterr().out

    settings = make_settings(
        catalogs=[{"id": "json", "path": str(work / "stac-index.json")}, {"id": "gp", "path": str(out)}]
    )
    with Session(settings) as session:
        for args in ({"bbox": bbox_around(SITE_A)}, {"datetime": "2024-06-01/2024-06-30"}):
            args["sortby"] = "id"  # (the order of ties in datetime differs: pgstac's rule vs the file's)
            ids = session.search(catalog="json", limit=100, **args).ids
            assert session.search(catalog="gp", limit=100, **args).ids == ids and ids
        red = session.search(catalog="gp", ids=[want[0]["id"]], detail="full").items[0]
        assert Path(red["assets"]["data"]["href"]).is_file()  # made absolute against the file's folder


@pytest.mark.parametrize("name", ["items.parquet", "items.json"])
def test_index_output_never_writes_through_a_link_at_its_path(tmp_path, name):
    """`--output DIR/items.parquet` where items.parquet is a planted link to a file above DIR
    (a place the index may be written): the link itself is replaced, the file it points to is not."""
    work = tmp_path / "dir"
    small_tiff(work / "a.tif")
    victim = tmp_path / f"victim-{name}"
    victim.write_bytes(b"precious")
    (work / name).symlink_to(victim)
    assert main(["index", str(work), "--output", str(work / name)]) == 0
    assert victim.read_bytes() == b"precious"
    assert not (work / name).is_symlink() and (work / name).stat().st_size > 0
    assert not (tmp_path / f"victim-{name.rsplit('.', 1)[0]}.collection.json").exists()


def test_index_parquet_of_a_float_cog_with_nan_nodata_beside_an_integer_one(tmp_path, capsys):
    """Two of the demo's own outputs in one folder: a float COG whose nodata is NaN and an
    integer one whose nodata is 0. The stac-geoparquet index holds both (nodata is a double
    column: NaN is a double in Parquet), and reads back with their nodata."""
    import math

    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import stac_table_to_items

    work = tmp_path / "dir"
    small_tiff(work / "int.tif")
    profile = {
        "driver": "GTiff", "width": 64, "height": 64, "count": 1, "dtype": "float32",
        "crs": "EPSG:32633", "transform": from_origin(*SITE_B, 10, 10), "nodata": float("nan"),
    }  # fmt: skip
    with rasterio.open(work / "ndvi.tif", "w", **profile) as dst:
        dst.write(np.full((1, 64, 64), 0.5, dtype="float32"))
    with rasterio.open(work / "int.tif", "r+") as dst:
        dst.nodata = 0
    out = work / "items.parquet"
    assert main(["index", str(work), "--output", str(out)]) == 0, capsys.readouterr().err
    items = {i["id"]: i for i in stac_table_to_items(pq.read_table(out))}
    nodata = {k: i["assets"]["data"]["raster:bands"][0]["nodata"] for k, i in items.items()}
    assert nodata["int"] == 0 and math.isnan(nodata["ndvi"])
    # the re-run reads the file back and keeps both items as they are
    assert main(["index", str(work), "--output", str(out)]) == 0
    assert "0 added, 0 updated, 2 unchanged" in capsys.readouterr().out
    assert main(["index", str(work)]) == 0  # the JSON index keeps the JSON spelling "nan"
    bands = {i["id"]: i["assets"]["data"]["raster:bands"][0] for i in features(work / "stac-index.json")}
    assert bands["ndvi"]["nodata"] == "nan" and bands["int"]["nodata"] == 0


def test_index_partitioned_by_year_and_month(folder, tmp_path, capsys, make_settings):
    """`--output items.parquet --partition-by year,month`: hive folders DuckDB opens with
    hive_partitioning (every file once, in the folder of its month: June's scenes, July's plain
    GeoTIFF), incremental on a re-run, and searched as a catalog like the JSON index, its asset
    hrefs leading to the files from every part."""
    import duckdb

    from stac_gdal_mcp import Session

    work = tmp_path / "copy"
    shutil.copytree(folder, work)
    out = work / "items.parquet"
    args = [
        "index",
        str(work),
        "--datetime-pattern",
        "%Y%m%d",
        "--output",
        str(out),
        "--partition-by",
        "year,month",
    ]
    assert main(args) == 0, capsys.readouterr().err
    n = len(SCENES) * len(BANDS) + 1
    rows = duckdb.sql(
        f"SELECT id, year, month, datetime FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert len(rows) == n and all((y, m) == (w.year, w.month) for _, y, m, w in rows)
    assert sorted({(y, m) for _, y, m, _ in rows}) == [(2024, 6), (2024, 7)]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == [
        "year=2024/month=6/part-0.parquet",
        "year=2024/month=7/part-0.parquet",
    ]
    capsys.readouterr()
    assert main(args) == 0
    assert f"0 added, 0 updated, {n} unchanged, 0 removed" in capsys.readouterr().out
    assert main(["index", str(work), "--datetime-pattern", "%Y%m%d"]) == 0
    settings = make_settings(
        catalogs=[{"id": "json", "path": str(work / "stac-index.json")}, {"id": "gp", "path": str(out)}]
    )
    with Session(settings) as session:
        for search in ({"bbox": bbox_around(SITE_A)}, {"datetime": "2024-07-01/2024-07-31"}):
            ids = session.search(catalog="json", limit=100, sortby="id", **search).ids
            assert session.search(catalog="gp", limit=100, sortby="id", **search).ids == ids and ids
        for item in session.search(catalog="gp", limit=100, detail="full").items:
            assert Path(item["assets"]["data"]["href"]).is_file(), item["assets"]["data"]["href"]


def test_index_partition_by_needs_a_parquet_output(folder, tmp_path, capsys):
    assert main(["index", str(folder), "--output", str(folder / "x.json"), "--partition-by", "year"]) == 2
    assert "name the output <name>.parquet" in capsys.readouterr().err
    assert main(["index", str(folder), "--output", str(folder / "x.parquet"), "--partition-by", "day"]) == 2
    assert "partition_by takes collection, year, month" in capsys.readouterr().err
    assert not (folder / "x.parquet").exists() and not (folder / "x.json").exists()
