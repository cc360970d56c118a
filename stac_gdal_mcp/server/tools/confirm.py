"""Confirm before large jobs: a job whose estimate reads or writes more than
`limits.confirm_bytes` runs only once the user said yes.

Before such a job runs, its dry run is worked out (headers and tile indexes only). When the
estimate is larger than the setting, the server asks the user through MCP elicitation (the
estimate's one-line summary; accept runs the job, decline or cancel does not) where the client
supports it: `ctx.elicit` on handshake-era connections, an `input_required` answer carrying the
question on 2026-07-28 ones (the client asks, then calls again with the answer, SEP-2322). Where
it does not (no elicitation capability, an MCP task in the background), the tool answers the
estimate with a note to call again with `confirm=true`, which an agent passes after asking the
user itself. `confirm=true`, `dry_run=true` and `limits.confirm_bytes = 0` skip the check.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from ...catalogs.security import shown
from ..links import estimate_result
from .jobs import run_job

if TYPE_CHECKING:
    from fastmcp import Context

    from ...processing.estimate import Estimate
    from ...session import Session

log = logging.getLogger(__name__)

CONFIRM_KEY = "confirm"  # the key of the question in a 2026-07-28 input_required answer

ConfirmArg = Annotated[bool, Field(description="run even if large")]


def size(estimate: Estimate) -> int:
    """The larger of the bytes the job would read and the bytes it would write (uncompressed)."""
    written = estimate.output.bytes if estimate.output is not None else None
    return max(estimate.read_bytes or 0, written or 0)


def unknown_reads(estimate: Estimate) -> int:
    """Files the estimate cannot size (no tile index: JPEG 2000, PNG ...): never counted as 0."""
    return sum(1 for f in estimate.files if f.bytes is None)


def unknown_names(estimate: Estimate, most: int = 3) -> list[str]:
    names = [shown(f.asset, 60) for f in estimate.files if f.bytes is None]
    return names[:most] + (["..."] if len(names) > most else [])


def _can_elicit(ctx: Context | None) -> bool:
    """The client declared the elicitation capability (a call may still be unable to ask: see
    `_asked`)."""
    from mcp.types import ClientCapabilities, ElicitationCapability

    try:
        session = None if ctx is None else ctx.session
    except RuntimeError:  # no request (a direct call)
        return False
    wanted = ClientCapabilities(elicitation=ElicitationCapability())
    return session is not None and session.check_client_capability(wanted)


def _modern(ctx: Context) -> bool:
    """A 2026-07-28 connection: input is asked by answering `input_required` (SEP-2322)."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    request = ctx.request_context
    return request is not None and request.protocol_version in MODERN_PROTOCOL_VERSIONS


YES = ("yes", "true", "y")  # an explicit yes as text; any other content ("no", "", 1) is not one


def _answer(action: str, content) -> str:
    """The answer: "yes" only when accepted with an explicit yes (the boolean true, or the text
    yes/true); else the action ("decline", "cancel"), an accepted "no" being a decline."""
    value = content.get("value") if isinstance(content, dict) else None
    if isinstance(value, str):
        value = value.strip().lower()
    accepted = action == "accept" and (value is True or (isinstance(value, str) and value in YES))
    return "yes" if accepted else ("decline" if action == "accept" else action)


async def _asked(ctx: Context, question: str):
    """The user's answer ("yes", "decline", "cancel"); an InputRequiredResult asking it (first
    round of a 2026-07-28 call); or None when this call cannot ask (an MCP task in the
    background: fastmcp says so with a ToolError)."""
    from fastmcp.exceptions import ToolError
    from fastmcp.server.elicitation import parse_elicit_response_type

    schema = parse_elicit_response_type(bool, response_title="Run it").schema
    if _modern(ctx) and not ctx.is_background_task:
        from mcp.types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

        answered = (ctx.input_responses or {}).get(CONFIRM_KEY)
        if answered is not None:
            return _answer(answered.action, getattr(answered, "content", None))
        ask = ElicitRequestFormParams(message=question, requested_schema=schema)
        return InputRequiredResult(input_requests={CONFIRM_KEY: ElicitRequest(params=ask)})
    try:
        answer = await ctx.elicit(question, bool, response_title="Run it")
    except ToolError as exc:
        log.info("cannot ask the user to confirm: %s", exc)
        return None
    return _answer(answer.action, {"value": answer.data} if answer.action == "accept" else None)


async def unconfirmed(
    ctx: Context | None, session: Session, confirm: bool, fn, /, *args, area=None, **kwargs
):
    """None when the job `fn(*args, **kwargs)` may run; else the tool's answer: the job's
    estimate, first saying why it did not run (the user declined, or `confirm=true` is needed),
    drawn on the map at the call's `area`."""
    limit = session.settings.limits.confirm_bytes
    if confirm or not limit or kwargs.get("dry_run"):
        return None
    from ...errors import StacGdalMcpError

    try:
        estimate = await run_job(ctx, session, fn, *args, **{**kwargs, "dry_run": True})
    except StacGdalMcpError as exc:  # e.g. a header that cannot be read: the run itself says why
        log.debug("no estimate to confirm against (%s); running", exc)
        return None
    needed, unknown = size(estimate), unknown_reads(estimate)
    if estimate.would_refuse or (needed <= limit and not unknown):  # a refusal: the run says why
        return None
    if needed > limit:
        over = f"{needed:,} bytes, more than limits.confirm_bytes={limit:,}"
    else:  # unknown is not small
        over = (
            f"{unknown} file(s) whose read size cannot be estimated ({', '.join(unknown_names(estimate))}: "
            f"not tiled GeoTIFFs) besides {needed:,} bytes, against limits.confirm_bytes={limit:,}"
        )
    answer = None
    if _can_elicit(ctx):
        answer = await _asked(ctx, f"{estimate.summary()}. That is {over}: run it?")
        if answer == "yes":
            return None
        if not isinstance(answer, str | None):
            return answer  # the question itself (a 2026-07-28 client answers, then calls again)
    if answer is None:
        note = f"not run: {over}; ask the user, then call again with confirm=true (or ask for less)"
    else:
        note = f"not run: the user did not confirm it ({answer}; {over})"
    estimate.notes.append(note)
    return estimate_result(estimate, first=note, area=area)
