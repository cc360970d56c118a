"""The save_search tool: every item of a search taken away as one file in the workspace (or a
folder of hive-partitioned stac-geoparquet files, `partition_by`).

One `run_operation` (operations.py): the Session call as a job (progress per page, cancel removes
the partial file); the answer is the output's record with links to its resources, as for any
output (a folder: to its record).
"""

import functools
from typing import Annotated, Literal

from fastmcp import Context
from fastmcp.dependencies import CurrentContext
from pydantic import Field

from ...outputs import OutputRecord
from ...session import Session
from . import WRITES_OUTPUT, session_tool
from .args import FieldsArg, SearchArg, json_text, search_kwargs
from .operations import run_operation


@session_tool(WRITES_OUTPUT, task=True, estimates=False)
async def save_search(
    session: Session,
    search: SearchArg = None,
    bbox: json_text(list[float] | None, "WGS84") = None,
    format: Annotated[
        Literal["geoparquet", "ndjson"], Field(description="ndjson: an item a line")
    ] = "geoparquet",
    max_items: Annotated[int | None, Field(description="default: limits.max_items")] = None,
    fields: FieldsArg = None,
    partition_by: json_text(
        list[Literal["collection", "year", "month"]] | None, "hive folders, e.g. [collection, year]"
    ) = None,
    ctx: Context = CurrentContext(),
) -> OutputRecord:
    """Save a whole search's full items to the workspace: one stac-geoparquet file, or (partition_by)
    hive folders (collection=/year=/month=) for DuckDB or rustac."""
    arguments = {**search_kwargs(search), **({"bbox": bbox} if bbox is not None else {})}
    if partition_by:
        arguments["partition_by"] = partition_by
    call = functools.partial(
        session.save_search, format=format, max_items=max_items, fields=fields, **arguments
    )
    return await run_operation(ctx, session, call)
