"""stac-geoparquet catalogs under attack: hostile files and servers meet the bounds the
catalog promises (docs/security.md), and bad input is one line naming the file and the column.

- CQL2 operators with too few or too many arguments: one line, as STAC API catalogs answer.
- Files with the wrong schema (geometry as text or bad WKB, id as integer, bbox, datetime or
  assets as text), on disk and from a `url` server: one line naming the file and the column.
- A footer claimed to be 600 MB: refused from the file's last 8 bytes, before it is read.
- A server dripping a byte at a time: network.timeout_s holds for a whole request (a search, and
  list_catalogs(check_reachable=true)), measured in wall time.
- A server sending its status line and headers a byte a second: the same deadline holds, for
  a catalog file's range reads and a STAC API's requests alike (the one HTTP client, http.py).
- 2,000 rows sharing one 4 MB string: a search's peak RSS, measured in a fresh process, stays
  under limits.query_memory_mb + MARGIN_MB.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import real_snapshots as rs

from stac_gdal_mcp import Session
from stac_gdal_mcp.catalogs import httpfs
from stac_gdal_mcp.errors import (
    CatalogUnavailable,
    GeoparquetError,
    InvalidFilter,
    LimitExceeded,
    StacGdalMcpError,
)
from testbed.faults import Drip, DripHeaders, serve_faults
from testbed.rangeserver import serve_directory

# what a server process holds beside its queries (Python, DuckDB, pyarrow, GDAL, shapely and the
# page it answers), measured on this test's file: docs/security.md names it
MARGIN_MB = 384


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A stac-geoparquet file of the real Sentinel-2 and Sentinel-1 items."""
    items = [i for i in rs.real_items() if i["collection"] in ("sentinel-2-l2a", "sentinel-1-rtc")]
    root = tmp_path_factory.mktemp("hostile")
    return rs.write(rs.table(items), root / "good.parquet", rs.collections(items))


def _one_line(session: Session, error=StacGdalMcpError, **args) -> str:
    with pytest.raises(error) as caught:
        session.search(catalog="gp", **args)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message and len(message) < 600
    return message


def _session(make_settings, where: str, **overrides) -> Session:
    key = "url" if where.startswith("http") else "path"
    return Session(make_settings(catalogs=[{"id": "gp", key: where}], default_catalog="gp", **overrides))


P = {"property": "eo:cloud_cover"}
TOO_FEW_OR_MANY = {
    "=": {"op": "=", "args": [P]},
    "not": {"op": "not", "args": []},
    "between": {"op": "between", "args": [P, 1]},
    "in": {"op": "in", "args": [P]},
    "+": {"op": "<", "args": [{"op": "+", "args": [P]}, 3]},
    "casei": {"op": "=", "args": [{"op": "casei", "args": []}, "x"]},
    "t_intersects": {"op": "t_intersects", "args": [{"property": "datetime"}]},
    "s_intersects": {"op": "s_intersects", "args": [{"property": "geometry"}, {"bbox": [0, 0, 1, 1]}, 3]},
}


@pytest.mark.parametrize("op", list(TOO_FEW_OR_MANY))
def test_cql2_operators_with_the_wrong_number_of_arguments_are_one_line(make_settings, good, op):
    with _session(make_settings, str(good)) as session:
        message = _one_line(session, InvalidFilter, filter=TOO_FEW_OR_MANY[op], filter_lang="cql2-json")
    assert re.search(rf"'{re.escape(op)}' takes \d argument", message), message


def _with_column(good, name: str, values) -> pa.Table:
    tbl = pq.read_table(good)
    return tbl.set_column(tbl.schema.get_field_index(name), name, values)


def _wrong_schemas(good) -> dict[str, pa.Table]:
    n = pq.read_metadata(good).num_rows
    text = pa.array(["not what it should be"] * n)
    return {
        "geometry": _with_column(good, "geometry", text),
        "id": _with_column(good, "id", pa.array(range(n))),
        "bbox": _with_column(good, "bbox", text),
        "datetime": _with_column(good, "datetime", text),
        "assets": _with_column(good, "assets", text),
    }


@pytest.fixture(scope="module")
def wrong(good, tmp_path_factory):
    """Each column of the wrong type in its own file, and a file whose WKB is garbage."""
    root = tmp_path_factory.mktemp("wrong")
    files = {}
    for column, tbl in _wrong_schemas(good).items():
        files[column] = root / f"{column}-as-wrong-type.parquet"
        pq.write_table(tbl, files[column])
    garbage = pa.array([b"\x01\x03\x00\x00\x00garbage"] * pq.read_metadata(good).num_rows, pa.binary())
    files["bad-wkb"] = root / "bad-wkb.parquet"
    pq.write_table(_with_column(good, "geometry", garbage), files["bad-wkb"])
    return files


@pytest.mark.parametrize("column", ["geometry", "id", "bbox", "datetime", "assets"])
def test_a_column_of_the_wrong_type_is_named_in_one_line(make_settings, wrong, column):
    with _session(make_settings, str(wrong[column])) as session:
        message = _one_line(session, GeoparquetError)
    assert str(wrong[column]) in message and f"column '{column}'" in message


def test_a_geometry_that_is_not_wkb_is_one_line(make_settings, wrong):
    with _session(make_settings, str(wrong["bad-wkb"])) as session:
        assert "not WKB" in _one_line(session, GeoparquetError)  # the page's items
        assert "not WKB" in _one_line(session, GeoparquetError, bbox=[-180, -90, 180, 90])  # footprints


def test_a_wrong_schema_from_a_url_server_is_one_line(make_settings, wrong):
    with serve_directory(wrong["id"].parent) as server:
        with _session(make_settings, f"{server.url}/{wrong['id'].name}") as session:
            message = _one_line(session, GeoparquetError)
    assert wrong["id"].name in message and "column 'id'" in message


def _huge_footer(good, path) -> None:
    """`good` with its last 8 bytes claiming a 600 MB footer."""
    data = good.read_bytes()
    path.write_bytes(data[:-8] + struct.pack("<I", 600 * 1024**2) + b"PAR1")


def test_a_footer_claimed_to_be_600_mb_is_refused_before_it_is_read(make_settings, good, tmp_path):
    _huge_footer(good, tmp_path / "huge-footer.parquet")
    with _session(make_settings, str(tmp_path / "huge-footer.parquet")) as session:
        assert "footer of 600 MB" in _one_line(session, LimitExceeded)
    with serve_directory(tmp_path) as server:
        with _session(make_settings, f"{server.url}/huge-footer.parquet") as session:
            assert "footer of 600 MB" in _one_line(session, LimitExceeded)
        requested = server.stats()["paths"]["/huge-footer.parquet"]["bytes"]
    tail = min(httpfs.FOOTER_READ, (tmp_path / "huge-footer.parquet").stat().st_size)
    assert requested == 1 + tail  # the version's byte and the file's tail, not 600 MB


def test_a_dripping_server_is_bounded_by_timeout_s_for_the_whole_request(make_settings, good):
    timeout = 3.0
    with serve_faults(good.parent) as server:
        url = f"{server.url}/{good.name}"
        server.set_fault(f"/{good.name}", Drip(interval_s=1.0, after=1))  # the version's byte, then drips
        with _session(make_settings, url, network={"timeout_s": timeout, "max_retries": 0}) as session:
            started = time.monotonic()
            message = _one_line(session, CatalogUnavailable)
            took = time.monotonic() - started
        assert f"within {timeout:g} s" in message and took < timeout + 2.5, took
        server.set_fault(f"/{good.name}", Drip(interval_s=10.0))  # even the version's one byte
        with _session(make_settings, url, network={"timeout_s": timeout, "max_retries": 0}) as session:
            started = time.monotonic()
            (info,) = [c for c in session.catalogs(check_reachable=True) if c.id == "gp"]
            took = time.monotonic() - started
    assert info.reachable is False and ("timed out" in info.error or f"within {timeout:g} s" in info.error)
    assert took < timeout + 2.5, took


@pytest.mark.parametrize("after", [0, 1], ids=["version", "footer"])
def test_headers_sent_a_byte_a_second_are_bounded_by_timeout_s(make_settings, good, after):
    """The first request (the file's version) or the next (its footer) gets its headers a byte a
    second: each read is answered in time, and only a deadline for the request as a whole ends it."""
    timeout = 3.0
    with serve_faults(good.parent) as server:
        server.set_fault(f"/{good.name}", DripHeaders(interval_s=1.0, after=after))
        url = f"{server.url}/{good.name}"
        with _session(make_settings, url, network={"timeout_s": timeout, "max_retries": 0}) as session:
            started = time.monotonic()
            message = _one_line(session, CatalogUnavailable)
            took = time.monotonic() - started
    assert f"within {timeout:g} s" in message and took < timeout + 2.5, took


def test_a_stac_api_sending_headers_a_byte_a_second_is_bounded_by_timeout_s(make_settings, tmp_path):
    (tmp_path / "search").write_text('{"type": "FeatureCollection", "features": [], "links": []}')
    (tmp_path / "index.json").write_text('{"type": "Catalog", "id": "x", "links": []}')
    timeout = 2.0
    with serve_faults(tmp_path) as server:
        server.set_fault(None, DripHeaders(interval_s=1.0))
        api = {"id": "api", "url": server.url}
        settings = make_settings(catalogs=[api], network={"timeout_s": timeout, "max_retries": 0})
        with Session(settings) as session:
            started = time.monotonic()
            with pytest.raises(CatalogUnavailable) as caught:
                session.search(catalog="api", limit=1)
            took = time.monotonic() - started
    assert f"within {timeout:g} s" in str(caught.value) and took < timeout + 2.5, took


PROBE = """
import json, re, sys
from stac_gdal_mcp import Session
from stac_gdal_mcp.settings import load_settings
path, workspace = sys.argv[1], sys.argv[2]
settings = load_settings(catalogs=[{"id": "gp", "path": path}], default_catalog="gp", workspace=workspace,
                         limits={"query_memory_mb": 256, "query_timeout_s": 8})
out = []
with Session(settings) as s:
    area = {"type": "Polygon", "coordinates": [[[-180, -90], [180, -90], [180, 90], [-180, 90], [-180, -90]]]}
    for args in ({"limit": 20}, {"limit": 20, "detail": "full"},
                 {"limit": 20, "filter": {"op": "s_intersects", "args": [{"property": "geometry"}, area]},
                  "filter_lang": "cql2-json"}):
        r = s.search(**args)
        out.append({"n": len(r.ids), "matched": r.matched})
status = open("/proc/self/status").read()  # VmHWM: this program's peak RSS
out.append(int(re.search(r"VmHWM:\\s*(\\d+) kB", status).group(1)) // 1024)
print(json.dumps(out))
"""


def test_rows_sharing_a_4_mb_string_stay_under_query_memory_mb(good, tmp_path):
    """2,000 rows whose `blob` property is the same 4 MB string (dictionary-encoded: an 8 MB
    file); a page, a full page and a CQL2 search whose count tests every candidate as an item.
    (The items of a page are held whole while it is answered: 20 here, 80 MB. The count stops at
    query_timeout_s, 8 s here, and says it is unknown: memory is what is measured.)"""
    base = pq.read_table(good).slice(0, 1)
    tbl = base.take([0] * 2000)
    tbl = _with_column_table(tbl, "id", pa.array([f"row-{n}" for n in range(2000)]))
    blob = pa.DictionaryArray.from_arrays(pa.array([0] * 2000, pa.int32()), pa.array(["x" * 4 * 1024**2]))
    tbl = tbl.append_column("blob", blob)
    path = tmp_path / "shared-string.parquet"
    pq.write_table(tbl.replace_schema_metadata(pq.read_schema(good).metadata), path)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE), str(path), str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    *answers, rss = json.loads(done.stdout)
    assert answers[0] == {"n": 20, "matched": 2000}
    assert answers[1]["n"] >= 1 and answers[1]["matched"] == 2000  # the answer's 1 MiB budget cuts it
    assert answers[2]["n"] == 20 and answers[2]["matched"] in (2000, None)
    assert rss < 256 + MARGIN_MB, f"peak RSS {rss} MB"


def _with_column_table(tbl: pa.Table, name: str, values) -> pa.Table:
    return tbl.set_column(tbl.schema.get_field_index(name), name, values)
