"""An upstream MCP server on the official Python SDK 2.x (`mcp.server.mcpserver.MCPServer`), for
Switchboard's interop matrix (crates/switchboard/tests/interop_matrix.rs):

    python server_mcp2.py <port>     # Streamable HTTP at /mcp: stateless 2026-07-28, and
                                     # sessions for 2025-era clients
    python server_mcp2.py stdio [S]  # stdio, after sleeping S seconds (a slow start)

The same tools as every interop server (see server_mcp1.py), written the 2.x way: sampling,
elicitation and roots are resolver dependencies (`Resolve` returning `Sample`, `Elicit`,
`ListRoots`), which the SDK turns into an `input_required` result at 2026-07-28 and into
server-to-client requests mid-call for 2025-era sessions. Resource updates go to
`subscriptions/listen` streams (`ctx.notify_resource_updated`) and to sessions that sent
`resources/subscribe`. Listens on 127.0.0.1 only.
"""

import json
import sys
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.resolve import AcceptedElicitation
from mcp_types import CreateMessageResult, EmptyResult, ListRootsResult, SamplingMessage, TextContent
from mcp_types import SubscribeRequestParams, UnsubscribeRequestParams
from pydantic import BaseModel

# `python server_mcp2.py stdio [slow-start-seconds]` serves on stdin/stdout instead, after
# sleeping that long first, as a server does that imports for seconds on a busy machine (the
# messages a client sends meanwhile wait in the pipe).
STDIO = sys.argv[1] == "stdio"
port = 0 if STDIO else int(sys.argv[1])

mcp = MCPServer("interop-mcp2", log_level="WARNING")

CANCELLED: set[str] = set()
COUNTER = {"value": 0}
# The 2025-era sessions that sent `resources/subscribe` for test://counter.
SUBSCRIBERS: list = []


@mcp.tool()
def echo(text: str) -> str:
    """Echoes its text."""
    return f"echo: {text}"


@mcp.tool()
async def progress(ctx: Context) -> str:
    """Reports progress 1, 2, 3 of 3, then answers."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3)
        await anyio.sleep(0.05)
    return "progressed"


@mcp.tool()
async def slow(tag: str) -> str:
    """Sleeps 30 s; a cancellation is recorded under `tag`."""
    try:
        await anyio.sleep(30)
    except anyio.get_cancelled_exc_class():
        CANCELLED.add(tag)
        raise
    return "finished"


@mcp.tool()
def was_cancelled(tag: str) -> str:
    """`yes` once a `slow` call with this tag was cancelled."""
    return "yes" if tag in CANCELLED else "no"


def ask_model() -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text="say hi"))],
        max_tokens=16,
    )


@mcp.tool()
async def sample(answer: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Asks the client's model (`sampling/createMessage`) and answers with its text."""
    return answer.content.text


class Person(BaseModel):
    name: str


def ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@mcp.tool()
async def elicit(person: Annotated[AcceptedElicitation[Person], Resolve(ask_person)]) -> str:
    """Asks the user for a name (`elicitation/create`); answers `<action>:<name>`."""
    return f"{person.action}:{person.data.name}"


def ask_roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
async def roots(answer: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """Asks the client for its roots (`roots/list`); answers their URIs as a JSON list."""
    return json.dumps([str(root.uri) for root in answer.roots])


@mcp.resource("test://counter")
def counter() -> str:
    """A counter that `bump` increments; subscribers hear of every change."""
    return str(COUNTER["value"])


@mcp.tool()
async def bump(ctx: Context) -> str:
    """Increments test://counter and tells its subscribers (of both eras)."""
    COUNTER["value"] += 1
    await ctx.notify_resource_updated("test://counter")
    for session in list(SUBSCRIBERS):
        try:
            await session.send_resource_updated("test://counter")
        except Exception:  # a session that has gone away
            SUBSCRIBERS.remove(session)
    return str(COUNTER["value"])


async def subscribe(ctx, params: SubscribeRequestParams) -> EmptyResult:
    if ctx.session not in SUBSCRIBERS:
        SUBSCRIBERS.append(ctx.session)
    return EmptyResult()


async def unsubscribe(ctx, params: UnsubscribeRequestParams) -> EmptyResult:
    if ctx.session in SUBSCRIBERS:
        SUBSCRIBERS.remove(ctx.session)
    return EmptyResult()


mcp._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
mcp._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)

if __name__ == "__main__":
    if STDIO:
        import time

        time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 0)
        mcp.run(transport="stdio")
    else:
        mcp.run(transport="streamable-http", host="127.0.0.1", port=port)
