// What every TypeScript interop client (interop-client-v1.mjs, interop-client-v2.mjs) does with
// each upstream behind Switchboard, the same steps as tests/py/client_mcp1.py: call `echo`,
// `progress`, `sample`, `elicit`, `roots`, subscribe to the upstream's `test://counter` and call
// `bump`, and cancel a `slow` call (then ask the upstream whether it saw the cancellation). The
// steps of one upstream run one after another; upstreams run side by side. A step that fails is
// reported as `{ error }` in its place, so one run shows every failing cell.

const STEP_TIMEOUT_MS = 20_000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The fixed answers a client named `name` gives to the server's requests. */
export function answers(name) {
  return {
    sampling: () => ({
      role: "assistant",
      content: { type: "text", text: `sampled by ${name}` },
      model: "fixed",
      stopReason: "endTurn",
    }),
    elicitation: () => ({ action: "accept", content: { name } }),
    roots: () => ({ roots: [{ uri: `file:///interop/${name}`, name: "interop" }] }),
  };
}

/** `notifications/resources/updated` URIs heard so far. */
export class Updates {
  uris = [];
  waiters = [];

  record(uri) {
    this.uris.push(uri);
    for (const wake of this.waiters.splice(0)) wake();
  }

  async waitFor(uri, limitMs) {
    const deadline = Date.now() + limitMs;
    while (!this.uris.includes(uri) && Date.now() < deadline) {
      await Promise.race([new Promise((wake) => this.waiters.push(wake)), sleep(deadline - Date.now())]);
    }
    return this.uris.includes(uri);
  }
}

async function step(report, key, run) {
  let timer;
  try {
    report[key] = await Promise.race([
      run(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
      }),
    ]);
  } catch (error) {
    report[key] = { error: String(error?.stack ?? error) };
  } finally {
    clearTimeout(timer);
  }
}

const textOf = (result) => {
  if (result.isError) throw new Error(`tool error: ${JSON.stringify(result.content)}`);
  return result.content[0].text;
};

/**
 * Exercises one upstream.
 * - `call(name, args, { onprogress, signal })`: calls a tool (each SDK's own `callTool`)
 * - `subscribe(uri)`: subscribes the SDK's way; resolves to a function that unsubscribes
 */
async function exerciseOne(prefix, { call, subscribe, resources, updates }) {
  const report = {};
  const tool = (name, args = {}, options = {}) => call(`${prefix}__${name}`, args, options);

  await step(report, "echo", async () => textOf(await tool("echo", { text: "hi" })));
  await step(report, "progress", async () => {
    const seen = [];
    textOf(await tool("progress", {}, { onprogress: (p) => seen.push(p.progress) }));
    return seen;
  });
  await step(report, "sampled", async () => textOf(await tool("sample")));
  await step(report, "elicited", async () => textOf(await tool("elicit")));
  await step(report, "roots", async () => JSON.parse(textOf(await tool("roots"))));
  await step(report, "resourceUpdated", async () => {
    const uri = resources.find((r) => r.uri.endsWith(`${prefix}__counter`))?.uri;
    if (!uri) throw new Error(`no counter resource among ${JSON.stringify(resources.map((r) => r.uri))}`);
    const unsubscribe = await subscribe(uri);
    try {
      textOf(await tool("bump"));
      return await updates.waitFor(uri, 10_000);
    } finally {
      await unsubscribe();
    }
  });
  await step(report, "cancel", async () => {
    const tag = `${prefix}-${Math.random().toString(36).slice(2)}`;
    const controller = new AbortController();
    const abort = setTimeout(() => controller.abort(), 1500);
    const outcome = { cancelled: false, upstreamSawCancel: false };
    try {
      await tool("slow", { tag }, { signal: controller.signal });
    } catch (error) {
      outcome.cancelled = controller.signal.aborted;
      if (!outcome.cancelled) throw error;
    } finally {
      clearTimeout(abort);
    }
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (textOf(await tool("was_cancelled", { tag })) === "yes") {
        outcome.upstreamSawCancel = true;
        break;
      }
      await sleep(200);
    }
    return outcome;
  });
  return report;
}

/** Exercises every upstream in `prefixes` side by side; resolves to `{ prefix: report }`. */
export async function exercise(prefixes, context) {
  const reports = await Promise.all(prefixes.map((prefix) => exerciseOne(prefix, context)));
  return Object.fromEntries(prefixes.map((prefix, i) => [prefix, reports[i]]));
}
