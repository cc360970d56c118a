"""An external server's tools, resources and prompts as fastmcp components of our server.

Their content is untrusted: tool annotations are replaced (open world always; read-only only for
a trusted server), the server's output schemas are not advertised, results are cut to the
server's `max_result_bytes` with a note saying so, and their result metadata is not passed on.
Every call goes to the server's session on the extension host loop.
"""

import json
from typing import Any

from fastmcp.prompts import Prompt
from fastmcp.resources import Resource, ResourceTemplate
from fastmcp.tools import Tool
from pydantic import PrivateAttr

from ..tools.errors import client_error
from .errors import ExternalServerError

DESCRIPTION_CHARS = 2000


def tool_annotations(original, trusted: bool):
    """Annotations we publish for an external tool: never read-only unless the server is trusted."""
    from mcp.types import ToolAnnotations

    title = original.title if original is not None else None
    if trusted and original is not None:
        return ToolAnnotations(
            title=title,
            readOnlyHint=original.read_only_hint,
            destructiveHint=original.destructive_hint,
            idempotentHint=original.idempotent_hint,
            openWorldHint=True,
        )
    return ToolAnnotations(
        title=title, readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
    )


def _description(text: str | None, server_name: str) -> str:
    text = (text or "").strip()
    if len(text) > DESCRIPTION_CHARS:
        text = text[:DESCRIPTION_CHARS] + "..."
    return f"{text}\n\n(From external server '{server_name}'.)".strip()


def _shown(original, server, mime: bool = False) -> dict[str, Any]:
    """How a component of an external server is presented: its name and title, its description
    (cut, and saying where it comes from), its MIME type (resources; text by default)."""
    fields = {
        "name": original.name,
        "title": original.title,
        "description": _description(original.description, server.name),
    }
    if mime:
        fields["mime_type"] = original.mime_type or "text/plain"
    return fields


class _Forwarding:
    """Mixin: where to send calls. Private attributes survive fastmcp's renaming copies."""

    _server: Any = PrivateAttr(default=None)
    _host: Any = PrivateAttr(default=None)
    _backend: str = PrivateAttr(default="")

    def bind(self, server, host, backend: str):
        self._server, self._host, self._backend = server, host, backend
        return self

    async def _send(self, what: str, shown: str, error, call):
        """Send one request (`what`, for the server's errors) on the host loop; a failure becomes
        `error` (fastmcp's tool, resource or prompt error) naming the component as `shown`."""
        try:
            return await self._host.call(self._server.request(what, call))
        except ExternalServerError as exc:
            raise client_error(error, str(exc), shown) from None

    def _names(self, kind: str) -> tuple[str, str]:
        """A tool's or prompt's name as its server knows it, and as our clients do."""
        return f"{kind} '{self._backend}'", f"{kind} '{self._server.name}_{self._backend}'"

    @property
    def _limit(self) -> int:
        return self._server.spec.config.max_result_bytes

    def _note(self, total: int, dropped: int, structured: bool = False) -> str:
        gone = (["the structured content"] if structured else []) + (
            [f"{dropped} non-text part(s)"] if dropped else []
        )
        return (
            f"[truncated by stac-gdal-mcp: this answer from external server '{self._server.name}' was "
            f"{total} bytes, over its limit of {self._limit} bytes (max_result_bytes)"
            + (f"; dropped: {' and '.join(gone)}" if gone else "")
            + "]"
        )


class ExternalTool(_Forwarding, Tool):
    async def run(self, arguments: dict[str, Any]):
        from fastmcp.exceptions import ToolError
        from fastmcp.tools import ToolResult
        from mcp.types import TextContent

        backend = self._backend
        result = await self._send(
            *self._names("tool"), ToolError, lambda c: c.call_tool_mcp(backend, arguments)
        )
        blocks = list(result.content)
        structured = result.structured_content
        total = sum(_size(b) for b in blocks) + (len(json.dumps(structured)) if structured is not None else 0)
        if total > self._limit:
            blocks, dropped = bound_blocks(blocks, self._limit)
            blocks.append(TextContent(type="text", text=self._note(total, dropped, structured is not None)))
            structured = None
        if not blocks and structured is None:
            blocks = [TextContent(type="text", text="")]
        return ToolResult(content=blocks, structured_content=structured, is_error=bool(result.is_error))

    @classmethod
    def from_mcp(cls, mcp_tool, server, host):
        return cls(
            **_shown(mcp_tool, server),
            parameters=mcp_tool.input_schema or {"type": "object", "properties": {}},
            annotations=tool_annotations(mcp_tool.annotations, server.spec.config.trusted),
        ).bind(server, host, mcp_tool.name)


class ExternalResource(_Forwarding, Resource):
    async def read(self):
        from fastmcp.exceptions import ResourceError

        what = f"resource {self._backend}"
        result = await self._send(
            what, what, ResourceError, lambda client: client.read_resource_mcp(self._backend)
        )
        return self._contents(result)

    def _contents(self, result):
        """The server's contents as ours, cut to the size limit (text shortened, blobs dropped)."""
        import base64

        from fastmcp.resources import ResourceContent, ResourceResult
        from mcp.types import BlobResourceContents

        parts = [
            (base64.b64decode(c.blob), len(c.blob))
            if isinstance(c, BlobResourceContents)
            else (c.text, len(c.text.encode("utf-8")))
            for c in result.contents
        ]
        total, budget, dropped = sum(size for _, size in parts), self._limit, 0
        contents = []
        for c, (data, size) in zip(result.contents, parts):
            mime_type = c.mime_type or self.mime_type
            if total <= self._limit or size <= budget:
                contents.append(ResourceContent(content=data, mime_type=mime_type))
                budget -= size
            elif isinstance(data, str) and budget > 0:
                contents.append(
                    ResourceContent(
                        content=data.encode("utf-8")[:budget].decode("utf-8", "ignore"), mime_type=mime_type
                    )
                )
                budget = 0
            else:
                dropped += 1
        if total > self._limit:
            contents.append(ResourceContent(content=self._note(total, dropped), mime_type="text/plain"))
        return ResourceResult(contents=contents or [ResourceContent(content="", mime_type="text/plain")])

    @classmethod
    def from_mcp(cls, mcp_resource, server, host):
        return cls(uri=mcp_resource.uri, **_shown(mcp_resource, server, mime=True)).bind(
            server, host, str(mcp_resource.uri)
        )


class ExternalTemplate(_Forwarding, ResourceTemplate):
    async def _read(self, uri: str, params: dict[str, Any]):
        return await (await self.create_resource(uri, params)).read()

    async def create_resource(self, uri: str, params: dict[str, Any]):
        return ExternalResource(uri=uri, name=self.name, mime_type=self.mime_type).bind(
            self._server, self._host, uri
        )

    @classmethod
    def from_mcp(cls, mcp_template, server, host):
        return cls(
            uri_template=mcp_template.uri_template, parameters={}, **_shown(mcp_template, server, mime=True)
        ).bind(server, host, mcp_template.uri_template)


class ExternalPrompt(_Forwarding, Prompt):
    async def render(self, arguments: dict[str, Any] | None = None):
        from fastmcp.exceptions import PromptError
        from fastmcp.prompts import Message, PromptResult
        from mcp.types import TextContent

        backend = self._backend
        result = await self._send(
            *self._names("prompt"), PromptError, lambda c: c.get_prompt_mcp(backend, arguments)
        )
        blocks = [m.content for m in result.messages]
        roles = {id(m.content): m.role for m in result.messages}
        total = sum(_size(b) for b in blocks)
        if total <= self._limit:
            messages = [Message(content=b, role=roles[id(b)]) for b in blocks]
        else:
            kept, dropped = bound_blocks(blocks, self._limit)
            messages = [Message(content=b, role=roles.get(id(b), "user")) for b in kept]
            messages.append(
                Message(content=TextContent(type="text", text=self._note(total, dropped)), role="user")
            )
        return PromptResult(messages=messages, description=result.description)

    @classmethod
    def from_mcp(cls, mcp_prompt, server, host):
        from fastmcp.prompts.base import PromptArgument

        arguments = [
            PromptArgument(name=a.name, description=a.description, required=bool(a.required))
            for a in mcp_prompt.arguments or []
        ]
        return cls(arguments=arguments, **_shown(mcp_prompt, server)).bind(server, host, mcp_prompt.name)


def _size(block) -> int:
    text = getattr(block, "text", None)
    if isinstance(text, str):
        return len(text.encode("utf-8"))
    return len(block.model_dump_json(by_alias=True, exclude_none=True))


def bound_blocks(blocks: list, limit: int) -> tuple[list, int]:
    """Keep content blocks within `limit` bytes: whole blocks while they fit, then the start of
    the first text block that does not; other blocks that do not fit are dropped (counted)."""
    from mcp.types import TextContent

    kept, dropped, budget = [], 0, limit
    for block in blocks:
        size = _size(block)
        if size <= budget:
            kept.append(block)
            budget -= size
        elif isinstance(getattr(block, "text", None), str) and budget > 0:
            cut = block.text.encode("utf-8")[:budget].decode("utf-8", "ignore")
            kept.append(
                TextContent(type="text", text=cut)
                if isinstance(block, TextContent)
                else block.model_copy(update={"text": cut})
            )
            budget = 0
        else:
            dropped += 1
    return kept, dropped
