"""An upstream MCP server on FastMCP 2.x (the standalone `fastmcp` package), for Switchboard's
interop matrix (crates/switchboard/tests/interop_matrix.rs):

    python server_fastmcp2.py <port>     # Streamable HTTP with sessions, at /mcp

The same tools as every interop server (see server_mcp1.py), written with FastMCP's own
`Context` API: `ctx.report_progress`, `ctx.sample`, `ctx.elicit` and `ctx.list_roots()` (which
sends `roots/list` on the session's standalone GET stream, not on the call's). Listens on
127.0.0.1 only.
"""

import json
import sys

from dataclasses import dataclass

import anyio
from fastmcp import Context, FastMCP

port = int(sys.argv[1])

mcp = FastMCP("interop-fastmcp2")

CANCELLED: set[str] = set()
COUNTER = {"value": 0}
# The sessions that subscribed to test://counter (Switchboard holds one per upstream).
SUBSCRIBERS: list = []


# FastMCP lists tags in the tool's `_meta._fastmcp.tags`; Switchboard's search reads them
# (interop_matrix.rs::a_fastmcp_tools_tags_find_it_in_search).
@mcp.tool(tags={"parrot", "mimic"})
def echo(text: str) -> str:
    """Echoes its text."""
    return f"echo: {text}"


@mcp.tool
async def progress(ctx: Context) -> str:
    """Reports progress 1, 2, 3 of 3, then answers."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3)
        await anyio.sleep(0.05)
    return "progressed"


@mcp.tool
async def slow(tag: str) -> str:
    """Sleeps 30 s; a cancellation is recorded under `tag`."""
    try:
        await anyio.sleep(30)
    except anyio.get_cancelled_exc_class():
        CANCELLED.add(tag)
        raise
    return "finished"


@mcp.tool
def was_cancelled(tag: str) -> str:
    """`yes` once a `slow` call with this tag was cancelled."""
    return "yes" if tag in CANCELLED else "no"


@mcp.tool
async def sample(ctx: Context) -> str:
    """Asks the client's model (`sampling/createMessage`) and answers with its text."""
    result = await ctx.sample("say hi", max_tokens=16)
    return result.text


@dataclass
class Person:
    name: str


@mcp.tool
async def elicit(ctx: Context) -> str:
    """Asks the user for a name (`elicitation/create`); answers `<action>:<name>`."""
    result = await ctx.elicit("Who are you?", response_type=Person)
    name = result.data.name if result.action == "accept" else ""
    return f"{result.action}:{name}"


@mcp.tool
async def roots(ctx: Context) -> str:
    """Asks the client for its roots (`roots/list`); answers their URIs as a JSON list."""
    return json.dumps([str(root.uri) for root in await ctx.list_roots()])


@mcp.resource("test://counter")
def counter() -> str:
    """A counter that `bump` increments; subscribers hear of every change."""
    return str(COUNTER["value"])


@mcp.tool
async def bump() -> str:
    """Increments test://counter and tells its subscribers."""
    COUNTER["value"] += 1
    for session in list(SUBSCRIBERS):
        try:
            await session.send_resource_updated("test://counter")
        except Exception:  # a session that has gone away
            SUBSCRIBERS.remove(session)
    return str(COUNTER["value"])


lowlevel = mcp._mcp_server


@lowlevel.subscribe_resource()
async def subscribe(uri) -> None:
    session = lowlevel.request_context.session
    if session not in SUBSCRIBERS:
        SUBSCRIBERS.append(session)


@lowlevel.unsubscribe_resource()
async def unsubscribe(uri) -> None:
    session = lowlevel.request_context.session
    if session in SUBSCRIBERS:
        SUBSCRIBERS.remove(session)


# The mcp 1.x server under FastMCP always advertises `resources.subscribe: false`, even with a
# subscribe handler; say true.
_capabilities = lowlevel.get_capabilities


def _with_subscribe(*args, **kwargs):
    capabilities = _capabilities(*args, **kwargs)
    if capabilities.resources is not None:
        capabilities.resources.subscribe = True
    return capabilities


lowlevel.get_capabilities = _with_subscribe

if __name__ == "__main__":
    mcp.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")
