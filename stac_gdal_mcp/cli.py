"""Command line: `stac-gdal-mcp serve` and `stac-gdal-mcp demo`."""

from __future__ import annotations

import argparse
import os
import sys


def server_allocator() -> None:
    """Arrow's memory pool for the server's process: the system allocator, unless the user's
    ARROW_DEFAULT_MEMORY_POOL names one. Arrow reads the variable when pyarrow is imported, so this
    runs before. Its default, mimalloc, keeps what its threads freed (pandas' strings and Parquet
    writes allocate there): a zonal call over 100,000 zones on a dask cluster grew the server's RSS
    by 60 MB over its 50 groups, and 1.22x the peak of 10,000 zones; flat with the system's
    (docs/figures.md). Then glibc's mmap threshold is fixed (`fixed_mmap_threshold`)."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    fixed_mmap_threshold()


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024  # glibc's own initial threshold


def fixed_mmap_threshold() -> None:
    """glibc maps blocks of at least its mmap threshold apart and unmaps them when freed, but it
    raises the threshold to the size of each mapped block freed (up to 32 MiB): after a few
    pandas columns come and go, blocks of their size come from the heap instead, whose freed
    middle stays resident. A zonal call's table of 180,000 rows left 60 MB resident that way,
    and the server's peak grew with the number of zone groups. `mallopt` with a fixed threshold
    (glibc's initial 128 KiB) keeps large blocks mapped: 21 MB left. A user's
    MALLOC_MMAP_THRESHOLD_ wins; other C libraries are left as they are."""
    import ctypes

    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):  # (not glibc: musl has no such threshold)
        return


def _serve(args: argparse.Namespace) -> int:
    import gc

    server_allocator()
    # Start-up makes ~200,000 objects that live as long as the server (modules, classes, schemas):
    # the cyclic collector walking them again and again while they are made costs more than our own
    # start-up work. Collect nothing until the server is built; then freeze what exists, so later
    # collections (during tool calls) skip it too.
    gc.disable()
    try:
        mcp = _build(args)
    finally:
        gc.enable()
    if mcp is None:
        return 2
    gc.freeze()
    if args.transport == "stdio":
        from .server.stdio_guard import answer_every_line

        answer_every_line()  # a line that is not a JSON-RPC message gets an error, not silence
        mcp.run(transport="stdio", show_banner=False)
    else:
        mcp.run(transport="http", host=args.host, port=args.port, show_banner=False)
    return 0


def _build(args: argparse.Namespace):
    """The server `serve` runs, or None when it cannot start (the reason on stderr)."""
    from .errors import StacGdalMcpError
    from .server import build_server
    from .setting_checks import checked_token
    from .settings import load_settings

    try:
        settings = load_settings(args.config, workspace=args.workspace)
    except StacGdalMcpError as exc:
        print(f"stac-gdal-mcp: {exc}", file=sys.stderr)
        return None
    from .server.logs import setup_logging

    setup_logging(settings.log_level)
    token = args.token if args.token is not None else settings.token
    if token is not None:
        try:
            token = checked_token(token)
        except StacGdalMcpError as exc:
            print(f"stac-gdal-mcp: {exc}", file=sys.stderr)
            return None
    if args.transport == "http" and not token and args.host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"stac-gdal-mcp: refusing to serve HTTP on {args.host} without a token; "
            "set --token or STAC_GDAL_MCP_TOKEN (or bind to 127.0.0.1)",
            file=sys.stderr,
        )
        return None
    try:
        return build_server(settings, http_token=token if args.transport == "http" else None)
    except StacGdalMcpError as exc:
        print(f"stac-gdal-mcp: {exc}", file=sys.stderr)
        return None


def _demo(args: argparse.Namespace) -> int:
    import asyncio

    from .demo import run_demo

    return asyncio.run(run_demo(workspace=args.workspace))


def _index(args: argparse.Namespace) -> int:
    """`stac-gdal-mcp index`: build the index, print the report and how to configure it."""
    import json

    from .catalogs.indexing import build_index
    from .errors import StacGdalMcpError

    try:
        report = build_index(
            args.directory,
            args.output,
            collection_id=args.collection,
            datetime_pattern=args.datetime_pattern,
            recursive=not args.no_recursive,
            partition_by=args.partition_by.split(",") if args.partition_by else None,
        )
    except StacGdalMcpError as exc:
        print(f"stac-gdal-mcp index: {exc}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    print(
        "\nsearch and process it: add to the settings file (--config)\n\n"
        f'[[catalogs]]\nid = "{report.collection_id}"\npath = {json.dumps(str(report.output))}'
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    from ._version import __version__

    parser = argparse.ArgumentParser(
        prog="stac-gdal-mcp",
        description="MCP server: find imagery in STAC catalogs and process its COG assets with GDAL.",
        epilog="Run 'stac-gdal-mcp <command> --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", title="commands", metavar="<command>")

    serve = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    serve.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (default) for desktop hosts that start the server, or http: streamable HTTP at /mcp",
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=8000, help="HTTP port (default 8000; with --transport http)"
    )
    serve.add_argument("--config", help="TOML settings file (or STAC_GDAL_MCP_CONFIG)")
    serve.add_argument("--workspace", help="folder for outputs (or STAC_GDAL_MCP_WORKSPACE)")
    serve.add_argument("--token", help="bearer token every HTTP request must carry (or STAC_GDAL_MCP_TOKEN)")
    serve.set_defaults(func=_serve)

    demo = sub.add_parser(
        "demo", help="offline tour: the server on the bundled sample catalog, driven as a client"
    )
    demo.add_argument(
        "--workspace", help="folder for the demo's outputs (default: a new folder, kept and named at the end)"
    )
    demo.set_defaults(func=_demo)

    index = sub.add_parser(
        "index",
        help="index a folder of GeoTIFF/COG files as a local STAC catalog (an ItemCollection) "
        "that [[catalogs]] path = ... makes searchable and processable",
    )
    index.add_argument("directory", help="folder holding the .tif/.tiff files (searched recursively)")
    index.add_argument(
        "--output",
        help="the index file (.json ItemCollection, .ndjson, or .parquet: stac-geoparquet), in the folder or above it "
        "(default: DIRECTORY/stac-index.json); re-running updates it incrementally",
    )
    index.add_argument("--collection", help="collection id of the items (default: the folder's name)")
    index.add_argument(
        "--datetime-pattern",
        help="strftime pattern of the acquisition time in file paths, e.g. %%Y%%m%%d or %%Y-%%m-%%dT%%H%%M "
        "(default: the TIFFTAG_DATETIME tag, else the file's modification time)",
    )
    index.add_argument(
        "--no-recursive", action="store_true", help="index only the files directly in the folder"
    )
    index.add_argument(
        "--partition-by",
        help="with --output NAME.parquet: write a folder of hive folders instead of one file, by any of "
        "collection,year,month (e.g. year,month), that DuckDB opens with hive_partitioning",
    )
    index.set_defaults(func=_index)

    args = parser.parse_args(argv)
    if args.command is None:  # like pip: no command prints the help
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
