"""Workspace escapes by symlink: a link planted in the workspace (an output file, a record, the
outputs/records/.tmp folders, a local input) never makes a read return, or a write land in, a
file outside the workspace. And start-up sweeps what a dead writer left.

A temporary "secret" file outside the workspace stands in for /etc/passwd; every check reads the
file system directly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from fastmcp import Client
from fastmcp.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from test_processing_access import write_cog

from stac_gdal_mcp.outputs import OutputStore

SECRET = b"root:x:0:0:secret stand-in for /etc/passwd\n"


@pytest.fixture
def setup(tmp_path, make_settings):
    settings = make_settings()
    workspace = settings.workspace
    (workspace / "inputs").mkdir(parents=True)
    write_cog(workspace / "inputs" / "in.tif", np.arange(64 * 64, dtype="uint16").reshape(64, 64) + 1)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_bytes(SECRET)
    return settings, workspace, outside


def everything_outside(outside) -> list[str]:
    return sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))


async def make_output(client, workspace) -> dict:
    result = await client.call_tool(
        "convert_asset", {"href": str(workspace / "inputs" / "in.tif"), "output_format": "GTiff"}
    )
    return result.structured_content


async def test_output_file_replaced_by_a_link(setup, build):
    settings, workspace, outside = setup
    async with Client(build(settings)) as client:
        record = await make_output(client, workspace)
        file = workspace / "outputs" / os.path.basename(record["assets"]["data"]["href"])
        file.unlink()
        file.symlink_to(outside / "passwd")
        with pytest.raises((ResourceError, MCPError), match="symbolic link"):
            await client.read_resource(f"stac-gdal://outputs/{record['id']}/file")
        # deleting removes the link, never the file it points to
        await client.call_tool("delete_output", {"output_id": record["id"]})
    assert (outside / "passwd").read_bytes() == SECRET and not file.is_symlink()


async def test_record_replaced_by_a_link(setup, build):
    settings, workspace, outside = setup
    (outside / "other.json").write_text(json.dumps({"secret": True}))
    async with Client(build(settings)) as client:
        record = await make_output(client, workspace)
        path = workspace / "records" / f"{record['id']}.json"
        path.unlink()
        path.symlink_to(outside / "other.json")
        with pytest.raises((ResourceError, MCPError), match="symbolic link"):
            await client.read_resource(f"stac-gdal://outputs/{record['id']}")


@pytest.mark.parametrize("folder", ["outputs", "records", ".tmp"])
async def test_workspace_folder_replaced_by_a_link(setup, build, folder):
    settings, workspace, outside = setup
    target = outside / "folder"
    target.mkdir()
    (workspace / folder).symlink_to(target, target_is_directory=True)
    before = everything_outside(outside)
    async with Client(build(settings)) as client:
        with pytest.raises(ToolError, match="link"):
            await make_output(client, workspace)
    assert everything_outside(outside) == before  # nothing written outside


async def test_outputs_folder_linked_after_a_write(setup, build):
    """The outputs folder swapped for a link to a folder holding a file of the same name."""
    settings, workspace, outside = setup
    async with Client(build(settings)) as client:
        record = await make_output(client, workspace)
        name = os.path.basename(record["assets"]["data"]["href"])
        (workspace / "outputs").rename(workspace / "moved")
        fake = outside / "fake-outputs"
        fake.mkdir()
        (fake / name).write_bytes(SECRET)
        (workspace / "outputs").symlink_to(fake, target_is_directory=True)
        with pytest.raises((ResourceError, MCPError), match="link"):
            await client.read_resource(f"stac-gdal://outputs/{record['id']}/file")


async def test_local_input_link_leaving_the_workspace(setup, build):
    settings, workspace, outside = setup
    link = workspace / "inputs" / "link.tif"
    link.symlink_to(outside / "passwd")
    async with Client(build(settings)) as client:
        for tool, extra in [("inspect_asset", {}), ("convert_asset", {"output_format": "GTiff"})]:
            with pytest.raises(ToolError, match="outside the allowed"):
                await client.call_tool(tool, {"href": str(link), **extra})


# --- leftovers of dead writers ---------------------------------------------------------------


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sweep_removes_what_dead_writers_left(make_settings):
    settings = make_settings()
    store = OutputStore(settings)
    with store.writing(".tif", stem="kept") as out:
        out.path.write_bytes(b"kept")
        kept = store.commit(out, operation="test", parameters={}, sources=[], media_type="image/tiff")
    live_prefix = store.prefix
    store.close()
    tmp = settings.workspace / ".tmp"
    pid = dead_pid()
    leftovers = {
        tmp / f"{pid}-0123abcd-convert-x.1234.tmp.tif": b"x" * 1000,
        tmp / f"{pid}-0123abcd-convert-x.1234.tmp.tif.scratch0.tif": b"y",
        tmp / f"{pid}-0123abcd.alive": b"",
        tmp / "junk-not-ours": b"z",
        settings.workspace / "outputs" / ".old-style.tmp.tif": b"w",
        settings.workspace / "outputs" / "orphan.tif": b"no record",
    }
    for path, data in leftovers.items():
        path.write_bytes(data)
    record_only = settings.workspace / "records" / "gone.json"
    record_only.write_text(
        (settings.workspace / "records" / f"{kept.id}.json").read_text().replace(kept.id, "gone")
    )
    # a record whose file was renamed away: its href names a file that is not there
    assert not (settings.workspace / "outputs" / "gone.tif").exists()

    fresh = OutputStore(settings)
    try:
        assert all(not p.exists() for p in leftovers), [p.name for p in leftovers if p.exists()]
        assert not record_only.exists()
        assert [r.id for r in fresh.list()] == [kept.id]
        assert fresh.read_bytes(kept.id) == b"kept"
        remaining = sorted(p.name for p in tmp.iterdir())
        assert remaining == [f"{fresh.prefix}.alive"] and live_prefix != fresh.prefix
    finally:
        fresh.close()


def test_sweep_leaves_a_live_writer_alone(make_settings):
    settings = make_settings()
    writer = OutputStore(settings)
    with writer.writing(".tif", stem="busy") as out:
        out.path.write_bytes(b"in progress")
        (settings.workspace / "outputs" / "committing.tif").write_bytes(b"between rename and record")
        other = OutputStore(settings)  # starts while the first one writes
        assert out.path.read_bytes() == b"in progress"
        # another live store uses the workspace: a file without record may be mid-commit
        assert (settings.workspace / "outputs" / "committing.tif").exists()
        other.close()
    writer.close()


def test_a_folder_catalog_does_not_open_its_parent(tmp_path, make_settings):
    """A stac-geoparquet snapshot given as a folder (`path = ".../parent/snap"`): its files may be
    read, the folder above it may not (the root was taken as resolve().parent)."""
    from stac_gdal_mcp import Session
    from stac_gdal_mcp.errors import AccessDenied
    from stac_gdal_mcp.operations.zonal import stats as zonal_stats

    parent = tmp_path / "parent"
    (parent / "snap").mkdir(parents=True)
    zone = {
        "type": "Polygon",
        "coordinates": [[[13.6, 45.92], [13.61, 45.92], [13.61, 45.93], [13.6, 45.92]]],
    }
    for folder in (parent, parent / "snap"):
        (folder / "zones.geojson").write_text(
            json.dumps({"type": "Feature", "properties": {}, "geometry": zone})
        )
    core = Session(make_settings(catalogs=[{"id": "snap", "path": str(parent / "snap")}])).core
    assert (parent / "snap").resolve() in core.catalogs.local_roots()
    assert parent.resolve() not in core.catalogs.local_roots()
    with pytest.raises(AccessDenied, match="outside the allowed folders") as error:
        zonal_stats.check(core, str(parent / "zones.geojson"))
    assert str(tmp_path) not in str(error.value).replace(str(parent / "zones.geojson"), "")
    assert len(zonal_stats.check(core, str(parent / "snap" / "zones.geojson")).zones) == 1
    glob = Session(make_settings(catalogs=[{"id": "g", "path": str(parent / "snap" / "*.parquet")}])).core
    assert (parent / "snap").resolve() in glob.catalogs.local_roots()
