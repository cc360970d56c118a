"""The services every core function takes as its first argument, built once from the settings.

`Core` holds the settings, the catalogs, the output store and the cursor codec. Core functions
(`discovery.search.search_items(core, ...)`, `processing.warp.reproject_asset(core, ...)`, ...)
take it first; the public `stac_gdal_mcp.Session` wraps one and is what notebooks, the
server's tools and plugins use.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from .catalogs import Catalogs
from .discovery.cursors import Cursors
from .processing.jobs import JobSlots
from .settings import Settings, load_settings

if TYPE_CHECKING:
    from .outputs import OutputStore


class Core:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or load_settings()
        # made here, not on first use: two threads must never sign with two different keys
        self.cursors: Cursors = Cursors()
        # the slots processing jobs wait for (limits.max_jobs); one per core, made here for the same reason
        self.job_slots = JobSlots(self.settings.limits.max_jobs)

    @cached_property
    def catalogs(self) -> Catalogs:
        return Catalogs(self.settings)

    @cached_property
    def outputs(self) -> OutputStore:
        from .outputs import OutputStore

        return OutputStore(self.settings)

    def close(self) -> None:
        """Release what was opened (the output store's claim on the workspace)."""
        store = self.__dict__.get("outputs")
        close = getattr(store, "close", None)
        if close is not None:
            close()
