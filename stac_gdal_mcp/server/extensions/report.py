"""What `list_extensions` shows: each plugin and external server, its source, tools and status."""

from typing import Any, Literal

from pydantic import Field

from ...models import Model


class ExtensionInfo(Model):
    kind: Literal["plugin", "external_server"]
    name: str
    source: str = Field(
        description="entry point, plugin file, or the (redacted) command of an external server"
    )
    version: str | None = None
    status: Literal["loaded", "failed", "running", "died", "stopped"]
    error: str | None = Field(None, description="why it failed, without a stack trace")
    tools: list[str] = Field(default_factory=list, description="tool names as clients see them")
    resources: list[str] = Field(
        default_factory=list, description="resource URIs and URI templates (external servers)"
    )
    prompts: list[str] = Field(default_factory=list, description="prompt names (external servers)")
    capabilities: dict[str, Any] = Field(
        default_factory=dict, description="metadata recorded by add_capability"
    )
    trusted: bool | None = Field(
        None, description="external servers: whether its read-only hints are believed"
    )

    @property
    def failed(self) -> bool:
        return self.status in ("failed", "died")


class ExtensionList(Model):
    extensions: list[ExtensionInfo] = Field(
        description="every plugin and external server, loaded or not; empty when none is configured"
    )


class Extensions:
    """Everything install_extensions did: plugin records, external servers (live status), and
    the host loop that runs them. `close()` stops the external servers."""

    def __init__(self, strict: bool = False):
        self.strict = strict
        self.plugins: list[ExtensionInfo] = []
        self.external: list = []  # ExternalServer, or ExtensionInfo for an entry that failed validation
        self.host = None

    def entries(self) -> list[ExtensionInfo]:
        return self.plugins + [e if isinstance(e, ExtensionInfo) else e.info() for e in self.external]

    def failures(self) -> list[ExtensionInfo]:
        return [e for e in self.entries() if e.failed]

    def close(self) -> None:
        host, self.host = self.host, None
        if host is None:
            return
        servers = [e for e in self.external if not isinstance(e, ExtensionInfo)]

        async def stop_all():
            for server in servers:
                await server.stop()

        try:
            host.run(stop_all(), timeout=30)
        finally:
            host.stop()
