"""A client on the official Python SDK 1.x (`mcp.ClientSession`), pointed at Switchboard by the
interop matrix (crates/switchboard/tests/interop_matrix.rs):

    python client_mcp1.py <prefixes> http <url>        # Streamable HTTP (/mcp)
    python client_mcp1.py <prefixes> sse <url>         # HTTP+SSE (/sse)
    python client_mcp1.py <prefixes> stdio <command> [args...]

`<prefixes>` is a comma-separated list of the upstreams' prefixes. The client declares sampling,
elicitation and roots and answers them with fixed values naming itself; for every upstream it
calls `echo`, `progress`, `sample`, `elicit`, `roots`, subscribes to its `test://counter` and
calls `bump`, and cancels a `slow` call (then asks the upstream whether it saw the cancellation).
It prints one JSON line; a feature that failed is reported as `{"error": ...}` in its place.

The 1.x client has no API that cancels a request at the server (cancelling the caller's task
only stops waiting), so the cancellation is sent as the spec says, as `notifications/cancelled`
for the call's request id.
"""

import json
import sys
import uuid

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.context import RequestContext

NAME = "python-mcp1"
ROOT = f"file:///interop/{NAME}"
STEP_TIMEOUT = 20


async def sampling(context: RequestContext, params: types.CreateMessageRequestParams):
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled by {NAME}"),
        model="fixed",
        stopReason="endTurn",
    )


async def elicitation(context: RequestContext, params: types.ElicitRequestParams):
    return types.ElicitResult(action="accept", content={"name": NAME})


async def list_roots(context: RequestContext):
    return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="interop")])


class Updates:
    """Resource URIs of the `notifications/resources/updated` heard so far."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.changed = anyio.Event()

    async def handle(self, message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            self.uris.append(str(message.root.params.uri))
            self.changed.set()
            self.changed = anyio.Event()

    async def wait_for(self, uri: str, limit: float) -> bool:
        with anyio.move_on_after(limit):
            while uri not in self.uris:
                await self.changed.wait()
        return uri in self.uris


def text_of(result: types.CallToolResult) -> str:
    if result.isError:
        raise RuntimeError(f"tool error: {result.content}")
    return result.content[0].text


async def feature(report: dict, key: str, run) -> None:
    """Runs one feature within STEP_TIMEOUT; its value, or its error, goes into `report`."""
    try:
        with anyio.fail_after(STEP_TIMEOUT):
            report[key] = await run()
    except BaseException as error:  # noqa: BLE001 - every failure is reported, none hidden
        if isinstance(error, anyio.get_cancelled_exc_class()):
            raise
        report[key] = {"error": f"{type(error).__name__}: {error}"}


async def exercise(session: ClientSession, prefix: str, resources, updates: Updates) -> dict:
    report: dict = {}

    async def call(tool: str, arguments: dict | None = None, **options) -> types.CallToolResult:
        return await session.call_tool(f"{prefix}__{tool}", arguments or {}, **options)

    async def echo():
        return text_of(await call("echo", {"text": "hi"}))

    async def progress():
        seen = []

        async def on_progress(value, total, message):
            seen.append(value)

        text_of(await call("progress", progress_callback=on_progress))
        return seen

    async def sample():
        return text_of(await call("sample"))

    async def elicit():
        return text_of(await call("elicit"))

    async def roots():
        return json.loads(text_of(await call("roots")))

    async def subscription():
        uri = next(
            (str(r.uri) for r in resources if str(r.uri).endswith(f"{prefix}__counter")),
            None,
        )
        if uri is None:
            raise RuntimeError(f"no counter resource among {[str(r.uri) for r in resources]}")
        await session.subscribe_resource(uri)
        try:
            text_of(await call("bump"))
            return await updates.wait_for(uri, 10)
        finally:
            await session.unsubscribe_resource(uri)

    async def cancel():
        tag = uuid.uuid4().hex
        outcome = {"cancelled": False}
        request_id = session._request_id  # the id the next request gets (no public accessor)

        async def slow():
            await call("slow", {"tag": tag})
            outcome["cancelled"] = False

        with anyio.move_on_after(1.5) as scope:
            await slow()
        if scope.cancelled_caught:
            await session.send_notification(
                types.ClientNotification(
                    types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=request_id, reason="interop")
                    )
                )
            )
            outcome["cancelled"] = True
        outcome["upstreamSawCancel"] = False
        with anyio.move_on_after(10):
            while text_of(await call("was_cancelled", {"tag": tag})) != "yes":
                await anyio.sleep(0.2)
            outcome["upstreamSawCancel"] = True
        return outcome

    await feature(report, "echo", echo)
    await feature(report, "progress", progress)
    await feature(report, "sampled", sample)
    await feature(report, "elicited", elicit)
    await feature(report, "roots", roots)
    await feature(report, "resourceUpdated", subscription)
    await feature(report, "cancel", cancel)
    return report


async def run(prefixes: list[str], streams) -> dict:
    read, write = streams[0], streams[1]
    updates = Updates()
    async with ClientSession(
        read,
        write,
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=list_roots,
        message_handler=updates.handle,
        client_info=types.Implementation(name=NAME, version="1.0.0"),
    ) as session:
        initialized = await session.initialize()
        report = {"client": NAME, "protocolVersion": initialized.protocolVersion, "upstreams": {}}
        resources = (await session.list_resources()).resources
        tools = {tool.name for tool in (await session.list_tools()).tools}
        report["tools"] = sorted(tools)

        async def one(prefix: str) -> None:
            report["upstreams"][prefix] = await exercise(session, prefix, resources, updates)

        async with anyio.create_task_group() as group:
            for prefix in prefixes:
                group.start_soon(one, prefix)
        return report


async def main() -> None:
    prefixes = sys.argv[1].split(",")
    mode, target, rest = sys.argv[2], sys.argv[3], sys.argv[4:]
    if mode == "http":
        transport = streamablehttp_client(target)
    elif mode == "sse":
        transport = sse_client(target)
    else:
        transport = stdio_client(StdioServerParameters(command=target, args=rest))
    async with transport as streams:
        report = await run(prefixes, streams)
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main)
