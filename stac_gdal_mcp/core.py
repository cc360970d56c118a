"""What the tools (and plugins) share: the settings and the services built from them once.

A notebook user can build one `Core` and call the core functions with it, exactly as the
MCP tools do.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from .catalogs import Catalogs
from .settings import Settings, load_settings

if TYPE_CHECKING:
    from .outputs import OutputStore


class Core:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or load_settings()

    @cached_property
    def catalogs(self) -> Catalogs:
        return Catalogs(self.settings)

    @cached_property
    def outputs(self) -> OutputStore:
        from .outputs import OutputStore

        return OutputStore(self.settings)
