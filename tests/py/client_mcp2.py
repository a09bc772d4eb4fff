"""A client on the official Python SDK 2.x (`mcp.Client`), pointed at Switchboard by the interop
matrix (crates/switchboard/tests/interop_matrix.rs):

    python client_mcp2.py <prefixes> http <url>          # Streamable HTTP, mode "auto"
                                                          # (2026-07-28 where offered)
    python client_mcp2.py <prefixes> http-legacy <url>   # Streamable HTTP, the 2025 handshake
    python client_mcp2.py <prefixes> sse <url>           # HTTP+SSE (/sse)
    python client_mcp2.py <prefixes> stdio <command> [args...]   # mode "auto"

The same steps and report as client_mcp1.py. The 2.x client answers `input_required` results
with the same callbacks it answers server requests with, cancels a call whose task is
cancelled (it sends `notifications/cancelled`, or drops the exchange at 2026-07-28), and
subscribes with `subscriptions/listen` at 2026-07-28 and `resources/subscribe` before.
"""

import json
import sys
import uuid
import warnings

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated

warnings.simplefilter("ignore")  # the deprecation warnings of sampling, roots and subscribe

NAME = "python-mcp2"
ROOT = f"file:///interop/{NAME}"
STEP_TIMEOUT = 20


async def sampling(context, params):
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"sampled by {NAME}"),
        model="fixed",
        stop_reason="endTurn",
    )


async def elicitation(context, params):
    return types.ElicitResult(action="accept", content={"name": NAME})


async def list_roots(context):
    return types.ListRootsResult(roots=[types.Root(uri=ROOT, name="interop")])


class Updates:
    """Resource URIs of the `notifications/resources/updated` heard on a 2025-era connection."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.changed = anyio.Event()

    async def handle(self, message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.changed.set()
            self.changed = anyio.Event()

    async def wait_for(self, uri: str, limit: float) -> bool:
        with anyio.move_on_after(limit):
            while uri not in self.uris:
                await self.changed.wait()
        return uri in self.uris


def text_of(result: types.CallToolResult) -> str:
    if result.is_error:
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


async def exercise(client: Client, modern: bool, prefix: str, resources, updates: Updates) -> dict:
    report: dict = {}

    async def call(tool: str, arguments: dict | None = None, **options) -> types.CallToolResult:
        return await client.call_tool(f"{prefix}__{tool}", arguments or {}, **options)

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
        uri = next((str(r.uri) for r in resources if str(r.uri).endswith(f"{prefix}__counter")), None)
        if uri is None:
            raise RuntimeError(f"no counter resource among {[str(r.uri) for r in resources]}")
        if modern:
            async with client.listen(resource_subscriptions=[uri]) as events:
                text_of(await call("bump"))
                with anyio.move_on_after(10):
                    async for event in events:
                        if isinstance(event, ResourceUpdated) and event.uri == uri:
                            return True
                return False
        await client.subscribe_resource(uri)
        try:
            text_of(await call("bump"))
            return await updates.wait_for(uri, 10)
        finally:
            await client.unsubscribe_resource(uri)

    async def cancel():
        tag = uuid.uuid4().hex
        outcome = {"cancelled": False, "upstreamSawCancel": False}
        with anyio.move_on_after(1.5) as scope:
            await call("slow", {"tag": tag})
        outcome["cancelled"] = scope.cancelled_caught
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


async def main() -> None:
    prefixes = sys.argv[1].split(",")
    mode, target, rest = sys.argv[2], sys.argv[3], sys.argv[4:]
    if mode in ("http", "http-legacy"):
        server = streamable_http_client(target)
    elif mode == "sse":
        server = sse_client(target)
    else:
        server = StdioServerParameters(command=target, args=rest)
    updates = Updates()
    async with Client(
        server,
        mode="auto" if mode in ("http", "stdio") else "legacy",
        sampling_callback=sampling,
        elicitation_callback=elicitation,
        list_roots_callback=list_roots,
        message_handler=updates.handle,
        client_info=types.Implementation(name=NAME, version="2.3.0"),
    ) as client:
        modern = client.protocol_version >= "2026-07-28"
        report = {"client": NAME, "protocolVersion": client.protocol_version, "upstreams": {}}
        resources = (await client.list_resources()).resources
        report["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)

        async def one(prefix: str) -> None:
            report["upstreams"][prefix] = await exercise(client, modern, prefix, resources, updates)

        async with anyio.create_task_group() as group:
            for prefix in prefixes:
                group.start_soon(one, prefix)
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    anyio.run(main)
