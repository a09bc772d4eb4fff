// A person using Switchboard's web console, for crates/switchboard/tests/web_console.rs: headless
// Chromium (Debian's, driven by playwright-core) opens the console of a running daemon with no
// servers, is shown a refusal, tests and adds @modelcontextprotocol/server-everything through the form, watches it connect,
// filters its tools, turns one off and on, runs a tool from the generated form (with its
// progress), runs another and watches its messages in the inspector, cancels a long one, answers the server's question in a dialog, reads
// a resource and gets a prompt, then adds the built-in human server and answers its tool's question,
// adds an MCP App server (the ext-apps basic example), runs its tool and clicks in its app,
// defines an endpoint of two of its tools and issues a key for it, approves a client's call,
// reads the call and the approval in the audit log and exports it
// after seeing its arguments, and imports a client's configuration.
//
//   node console.mjs <daemon-base-url> <server-everything-entry.js> [screenshot-dir]
//
// Prints one JSON line with what the page showed. Exits non-zero, saying why, when the page
// does not show what a person would wait for. Chromium is /usr/bin/chromium unless CHROMIUM
// names another; it starts with its network features off and the page talks to the daemon only.
import { fileURLToPath } from "node:url";
import { answerLate, launchChromium, whatTheConsoleShows } from "./browser.mjs";

const [base, everything, screenshots] = process.argv.slice(2);
if (!base || !everything) {
  console.error("usage: node console.mjs <daemon-base-url> <server-everything-entry.js> [screenshot-dir]");
  process.exit(2);
}
const browser = await launchChromium();
const seen = {};
const shot = async (page, name) => {
  if (screenshots) await page.screenshot({ path: `${screenshots}/${name}.png`, fullPage: true });
};
let page;
try {
  page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(30_000);
  const problems = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
      problems.push(`console: ${message.text()}`);
    }
  });
  // The one answer this test makes up itself (a daemon refusing while it drains) is no breakage.
  let madeUp = null;
  page.on("response", (response) => {
    // The console's own refusals (a 409 while a server restarts) are answers, not breakage.
    if (response.url() === madeUp) return;
    if (response.status() === 404 || response.status() >= 500) {
      problems.push(`${response.status()} for ${response.url()}`);
    }
  });
  page.on("request", (request) => {
    if (!request.url().startsWith(base)) problems.push(`request outside the daemon: ${request.url()}`);
  });
  // Browser notifications, recorded: the console may send one only while the person looks
  // elsewhere (the tab hidden), which the test pretends with window.__pretendHidden.
  await page.addInitScript(() => {
    window.__notes = [];
    window.Notification = class {
      static permission = "granted";
      static requestPermission() { return Promise.resolve("granted"); }
      constructor(title, options) { window.__notes.push({ title, body: options?.body }); }
    };
    Object.defineProperty(document, "hidden", { configurable: true, get: () => window.__pretendHidden === true });
  });
  await page.goto(base);
  await page.waitForSelector("#live.live");
  seen.empty = await page.isVisible("#no-servers");
  seen.formsHiddenAtFirst = (await page.isHidden("#add-form")) && (await page.isHidden("#import-form"));

  // Add the server through the form.
  await page.click("#show-add");
  await page.fill('#add-form input[name="id"]', "everything");
  await page.fill('#add-form input[name="command"]', `node ${everything}`);
  await page.fill('#add-form input[name="description"]', "The reference server");
  // A refusal in JSON-RPC's shape (what a draining daemon, or one whose store does not answer,
  // gives every route) is shown by its message.
  madeUp = `${base}/api/test-connection`;
  await page.route(madeUp, (route) => route.fulfill({
    status: 503,
    headers: { "content-type": "application/json", "retry-after": "5" },
    body: JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "Switchboard is shutting down; try again shortly" } }),
  }));
  await page.click("#test-connection");
  await page.waitForSelector("#message.error");
  seen.refused = await page.textContent("#message");
  await page.unroute(madeUp);
  await page.click("#test-connection");
  await page.waitForFunction(() => document.querySelector("#message").textContent.startsWith("Connected"));
  seen.tested = await page.textContent("#message");
  seen.storedAfterTest = (await (await fetch(`${base}/api/servers`)).json()).servers.length;
  await page.click('#add-form button[type="submit"]');
  await page.waitForSelector('[data-server="everything"] [data-state="connected"]');
  seen.message = await page.textContent("#message");
  seen.formHiddenAfterAdding = await page.isHidden("#add-form");
  seen.card = (await page.textContent('[data-server="everything"]')).replace(/\s+/g, " ").trim();
  await shot(page, "servers");

  // Its tools, filtered.
  await page.click('[data-server="everything"] [data-action="open"]');
  await page.waitForSelector('[data-tool="echo"]');
  seen.tools = await page.locator("#tools > li").count();
  await page.fill("#tool-filter", "long-running");
  seen.filtered = await page.locator("#tools > li").evaluateAll((items) => items.map((i) => i.dataset.tool));
  await page.fill("#tool-filter", "");

  // Turned off: the server restarts without it, and the list shows it off.
  await page.uncheck('[data-toggle="echo"]');
  await page.waitForSelector('li.off[data-tool="echo"]');
  seen.echoOffShown = true;
  await page.waitForSelector('[data-server="everything"] [data-state="connected"]');
  await page.check('[data-toggle="echo"]');
  await page.waitForSelector('li:not(.off)[data-tool="echo"]');
  await page.waitForSelector('[data-server="everything"] [data-state="connected"]');

  // A tool run from its generated form, its progress shown as it comes; the form opens beside
  // the tool, in view.
  await page.click('[data-try="trigger-long-running-operation"]');
  seen.tryBeside = await page.evaluate(() => {
    const form = document.querySelector("#try").getBoundingClientRect();
    const tool = document.querySelector('[data-tool="trigger-long-running-operation"]').getBoundingClientRect();
    return { inView: form.top >= 0 && form.top < innerHeight, besideTheTool: form.left >= tool.right - 1 };
  });
  await page.fill('#try-form input[name="duration"]', "2");
  await page.fill('#try-form input[name="steps"]', "4");
  await page.click("#run");
  await page.waitForFunction(() => /Running… \d+ of 4/.test(document.querySelector("#try-status").textContent));
  seen.progress = await page.textContent("#try-status");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.longResult = await page.textContent("#try-result");
  await shot(page, "try-a-tool");

  // Results as a client shows them: an image as an image, structured content as a tree,
  // resource links that open, the raw JSON behind a toggle; each run clears the last.
  await page.click('[data-try="get-tiny-image"]');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.image = await page.$eval("#try-result img.media", (img) => img.complete && img.naturalWidth > 0);
  await page.click('[data-try="get-structured-content"]');
  seen.clearedOnOpen = await page.$eval("#try-result", (result) => result.children.length === 0);
  await page.selectOption('#try-form select[name="location"]', { label: "Chicago" });
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.tree = await page.locator("#try-result .structured .tree .key").allTextContents();
  seen.rawHidden = await page.isHidden("#try-result details.raw pre");
  await page.click('[data-try="get-resource-links"]');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  await page.locator("#try-result [data-open-resource]").nth(1).click();
  await page.waitForSelector("#view-body pre");
  seen.linkOpened = await page.textContent("#view-title");

  // The daemon's ranked search, across every server, opens the tool found.
  await page.fill("#search", "add two numbers");
  await page.waitForSelector("#search-results button[data-found]");
  seen.found = await page.locator("#search-results button[data-found]").evaluateAll((items) => items.map((i) => i.dataset.found));
  await page.click('#search-results button[data-found="everything__get-sum"]');
  await page.waitForFunction(() => document.querySelector("#try-name").textContent === "get-sum");
  seen.foundOpened = await page.textContent("#try-name");
  // By keyboard alone: down into the results, Enter on the first.
  await page.fill("#search", "");
  await page.focus("#search");
  await page.keyboard.type("echo a message");
  await page.waitForSelector("#search-results button[data-found]");
  const first = await page.getAttribute("#search-results button[data-found]", "data-found");
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Enter");
  await page.waitForFunction((name) => `everything__${document.querySelector("#try-name").textContent}` === name, first);
  seen.keyboardOpened = first;

  // Connecting a client: the endpoint's URLs and entries to copy.
  await page.click("#show-connect");
  seen.mcpUrl = await page.textContent("#mcp-url");
  seen.clientEntries = await page.locator("#client-entries > li").evaluateAll((items) => items.map((i) => i.dataset.client));
  seen.cursorEntry = JSON.parse(await page.textContent('#client-entries > li[data-client^="Cursor"] pre'));
  await shot(page, "connect");
  await page.click("[data-close-connect]");

  await page.click('[data-try="echo"]');
  await page.fill('#try-form input[name="message"]', "hello from the console");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.echoResult = await page.textContent("#try-result");

  // A server's answer carrying markup and script: shown as text, nothing of it runs.
  await page.fill('#try-form input[name="message"]',
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> [click](javascript:window.__pwned=3) <a href="javascript:window.__pwned=4">a</a>');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  for (const link of await page.locator("#try-result a").all()) await link.click({ noWaitAfter: true }).catch(() => {});
  seen.hostile = await page.evaluate(() => ({
    pwned: window.__pwned ?? null,
    elements: [...document.querySelectorAll("#try-result img, #try-result script, #try-result [onerror]")].length,
    scriptLinks: [...document.querySelectorAll("#try-result a")].filter((a) => !/^(https?:|#)/.test(a.getAttribute("href") ?? "#")).length,
    shownAsText: document.querySelector("#try-result").textContent.includes('<img src=x onerror="window.__pwned=1">'),
  }));
  await page.fill('#try-form input[name="message"]', "hello from the console");

  // The inspector: the call's JSON-RPC messages, live, and filtered.
  await page.click('[data-tab="inspector"]');
  await page.waitForSelector("#traffic-status[data-following]");
  await page.click("#run");
  await page.waitForSelector('#traffic li[data-direction="sent"][data-method="tools/call"]');
  await page.waitForFunction(() => [...document.querySelectorAll('#traffic li[data-direction="received"]')]
    .some((item) => item.dataset.text.includes("echo: hello from the console")));
  await page.selectOption("#traffic-kind", "request");
  seen.inspectorRequests = await page.locator("#traffic li:not([hidden])").evaluateAll((items) => items.map((i) => i.dataset.kind));
  await page.selectOption("#traffic-kind", "");
  seen.inspectorSizes = await page.locator('#traffic li[data-kind="response"] .size').allTextContents();
  await page.locator('#traffic li[data-method="tools/call"] summary').first().click();
  seen.inspectedCall = JSON.parse(await page.locator('#traffic li[data-method="tools/call"] pre').first().textContent());
  await shot(page, "inspector");
  await page.click('[data-tab="tools"]');

  // A long call cancelled.
  await page.click('[data-try="trigger-long-running-operation"]');
  await page.fill('#try-form input[name="duration"]', "30");
  await page.fill('#try-form input[name="steps"]', "30");
  await page.click("#run");
  await page.waitForFunction(() => /Running… \d+ of 30/.test(document.querySelector("#try-status").textContent));
  await page.click("#cancel");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Cancelled.");
  seen.cancelled = true;

  // A question the server asks while its tool runs, answered in the console's dialog.
  await page.click('[data-try="trigger-elicitation-request"]');
  await page.click("#run");
  const question = page.locator("#questions .question");
  await question.waitFor();
  seen.question = await question.locator(".message").textContent();
  await question.locator('input[name="name"]').fill("Ada Lovelace");
  await question.locator('select[name="titledSingleSelectEnum"]').selectOption({ label: "Wonder Woman" });
  await question.locator('select[name="titledMultipleSelectEnum"]').selectOption([{ label: "Salmon" }, { label: "Trout" }]);
  await shot(page, "question");
  await question.locator('button[data-action="accept"]').click();
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.elicitResult = await page.textContent("#try-result");
  await page.waitForSelector("#questions-panel", { state: "hidden" });

  await page.click('[data-tab="resources"]');
  await page.waitForSelector("#resources > li");
  seen.resources = await page.locator("#resources > li").count();
  await page.locator("#resources [data-read]").first().click();
  await page.waitForSelector("#view-body pre");
  seen.resourceRead = (await page.textContent("#view-title")) !== "" && (await page.textContent("#view-body pre")).length > 0;
  // A resource template filled in (the server completing the value as it is typed), then read.
  await page.click('[data-fill="demo://resource/dynamic/text/{resourceId}"]');
  await page.fill('#view-body input[name="resourceId"]', "2");
  await page.waitForSelector('#view-body input[name="resourceId"][data-completions="1"]');
  seen.templateCompletions = await page.$$eval("#view-body datalist option", (options) => options.map((o) => o.value));
  seen.templateExpanded = await page.textContent("#view-body [data-expanded]");
  await page.click('#view-body button[type="submit"]');
  await page.waitForFunction(() => document.querySelector("#view-title").textContent === "demo://resource/dynamic/text/2");
  seen.templateRead = await page.textContent("#view-body pre");
  await page.click('[data-tab="prompts"]');
  // A prompt's arguments completed, the second narrowed by the first.
  await page.click('[data-get="completable-prompt"]');
  await page.fill('#view-body input[name="department"]', "Eng");
  await page.waitForSelector('#view-body input[name="department"][data-completions="1"]');
  seen.departments = await page.$$eval('#view-body input[name="department"] + datalist option', (options) => options.map((o) => o.value));
  await page.fill('#view-body input[name="department"]', "Engineering");
  await page.fill('#view-body input[name="name"]', "A");
  await page.waitForSelector('#view-body input[name="name"][data-completions="1"]');
  seen.leaders = await page.$$eval('#view-body input[name="name"] + datalist option', (options) => options.map((o) => o.value));
  await page.click('[data-get="args-prompt"]');
  await page.fill('#view-body input[name="city"]', "Lisbon");
  await page.click('#view-body button[type="submit"]');
  await page.waitForSelector('#view-body pre[data-role="user"]');
  seen.prompt = await page.textContent('#view-body pre[data-role="user"]');
  // A resource followed: subscribed while the console follows it, its updates shown as the
  // server sends them (server-everything sends them every 5 s once asked to).
  await page.click('[data-tab="resources"]');
  const followed = await page.getAttribute("#resources [data-follow]", "data-follow");
  await page.click(`#resources [data-follow="${followed}"]`);
  await page.waitForSelector('#view-body [data-updates="0"]');
  await page.click('[data-tab="tools"]');
  await page.click('[data-try="toggle-subscriber-updates"]');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  await page.waitForFunction(() => Number(document.querySelector("#view-body [data-updates]")?.dataset.updates ?? 0) >= 1,
    null, { timeout: 20_000 });
  seen.followedUpdates = Number(await page.getAttribute("#view-body [data-updates]", "data-updates"));
  seen.followedTitle = await page.textContent("#view-title");
  seen.followedUri = followed;
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  await page.click('[data-tab="resources"]');
  await page.click(`#resources [data-follow="${followed}"]`);
  seen.followStopped = await page.textContent(`#resources [data-follow="${followed}"]`);
  seen.activity = await page.locator('#activity > li[data-type="tool_called"]').allTextContents();
  await shot(page, "activity");

  // The built-in human server, added by URL; its tool waits for the person's answer.
  await page.click("#show-add");
  await page.fill('#add-form input[name="id"]', "human");
  await page.fill('#add-form input[name="url"]', "builtin:human");
  await page.click('#add-form button[type="submit"]');
  await page.waitForSelector('[data-server="human"] [data-state="connected"]');
  // The person opens the everything server and then this one before the first's tools have come;
  // they come only once this one's are shown, and do not take their place.
  const lateTools = await answerLate(page, "**/api/servers/everything/tools", () => true,
    () => page.waitForSelector('#tools > li[data-tool="confirm"]', { timeout: 0 }));
  await page.click('[data-server="everything"] [data-action="open"]');
  await page.click('[data-server="human"] [data-action="open"]');
  await lateTools.had;
  seen.toolsAfterLateAnswer = await page.locator("#tools > li").evaluateAll((items) => items.map((i) => i.dataset.tool));
  await page.click('[data-tab="tools"]');
  await page.click('[data-try="confirm"]');
  await page.fill('#try-form input[name="question"]', "Deploy to production?");
  await page.evaluate(() => { window.__pretendHidden = true; });
  await page.click("#run");
  const confirm = page.locator("#questions .question");
  await confirm.waitFor();
  seen.notified = await page.evaluate(() => window.__notes);
  await page.evaluate(() => { window.__pretendHidden = false; });
  seen.confirmQuestion = (await confirm.textContent()).replace(/\s+/g, " ");
  seen.titleWhileAsked = await page.title();
  await confirm.locator('button[data-action="yes"]').click();
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.confirmResult = await page.textContent("#try-result");
  seen.titleAfter = await page.title();

  // A plan to approve: shown as markdown, decisions with their descriptions, a reply and a
  // screenshot attached; the tool's result carries each, the image as an image.
  await page.click('[data-try="approve_plan"]');
  await page.fill('#try-form input[name="question"]', "Ship the release?");
  await page.fill('#try-form textarea[name="plan"]', "1. **Build** the binaries\n2. Deploy to `prod`");
  await page.click("#run");
  const plan = page.locator("#questions .question");
  await plan.waitFor();
  seen.planShown = await plan.locator(".message.markdown li strong").allTextContents();
  seen.planDecisions = await plan.locator(".radios label").allTextContents();
  await plan.locator('input[type="radio"][value="\\"Request changes\\""]').check();
  await plan.locator('textarea[name="reply"], input[name="reply"]').fill("Deploy on Monday");
  const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");
  await plan.locator('input[type="file"]').setInputFiles({ name: "screen.png", mimeType: "image/png", buffer: png });
  await page.waitForFunction(() => JSON.parse(document.querySelector('#questions input[type="file"]').dataset.value || "[]").length === 1);
  await plan.locator('button[data-action="accept"]').click();
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.planResult = JSON.parse(await page.textContent("#try-result details.raw pre"));
  seen.planImage = await page.$eval("#try-result img.media", (img) => img.complete && img.naturalWidth === 1);
  seen.history = await page.locator("#history > li").evaluateAll((items) => items.map((i) => i.dataset.ending));

  // An MCP App (the ext-apps basic example server): its view framed below the tool's result,
  // shown the result, calling the server's tool itself, messaging and logging to the console.
  const vanilla = fileURLToPath(new URL("./node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js", import.meta.url));
  await page.click("#show-add");
  await page.fill('#add-form input[name="id"]', "apps");
  await page.fill('#add-form input[name="command"]', `node ${vanilla} --stdio`);
  await page.click('#add-form button[type="submit"]');
  await page.waitForSelector('[data-server="apps"] [data-state="connected"]');
  await page.click('[data-server="apps"] [data-action="open"]');
  await page.click('[data-tab="tools"]');
  await page.click('[data-try="get-time"]');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  const view = page.frameLocator('#try-app iframe[data-app="get-time"]');
  const serverTime = view.locator("#server-time");
  const shows = async (test) => {
    for (let i = 0; i < 300; i++) {
      const text = await serverTime.textContent();
      if (test(text)) return text;
      await page.waitForTimeout(100);
    }
    throw new Error(`the app never showed it; it shows ${await serverTime.textContent()}`);
  };
  const iso = /^\d{4}-\d\d-\d\dT/;
  seen.appFirstTime = await shows((text) => iso.test(text));
  seen.viewOrigin = await serverTime.evaluate(() => self.origin);
  seen.appFrameHeight = await page.$eval('#try-app iframe', (frame) => frame.style.height);
  seen.appLoadingGone = await page.isHidden("#app-loading");
  await page.click("#app-fullscreen");
  seen.appFullscreen = await page.$eval("#try-app-panel", (panel) => {
    const box = panel.getBoundingClientRect();
    // Nothing (the sticky header) covers its way out.
    const exit = document.querySelector("#app-fullscreen").getBoundingClientRect();
    const onTop = document.elementFromPoint(exit.x + exit.width / 2, exit.y + exit.height / 2)?.id === "app-fullscreen";
    return panel.classList.contains("fullscreen") && box.width >= innerWidth - 1 && box.height >= innerHeight - 1 && onTop;
  });
  await page.keyboard.press("Escape");
  await page.click("#app-pip");
  seen.appPip = await page.$eval("#try-app-panel", (panel) => panel.classList.contains("pip") && panel.getBoundingClientRect().right <= innerWidth);
  await page.click("#app-pip");
  await view.locator("#get-time-btn").click();
  seen.appSecondTime = await shows((text) => iso.test(text) && text !== seen.appFirstTime);
  await view.locator("#message-text").fill("hello from the app");
  await view.locator("#send-message-btn").click();
  await page.waitForSelector("#app-messages li");
  seen.appMessage = await page.textContent("#app-messages li");
  await view.locator("#log-text").fill("logged by the app");
  await view.locator("#send-log-btn").click();
  await page.waitForSelector('#activity li[data-type="app_log"]');
  seen.appLog = await page.textContent('#activity li[data-type="app_log"]');
  await shot(page, "mcp-app");

  // Edit, not remove and re-add: a command line with a quoted argument, an environment value
  // kept secret, a timeout; saved again untouched, the masked secret keeps its value.
  await page.click('[data-server="everything"] [data-action="edit"]');
  await page.waitForSelector('#add-form[data-editing="everything"]:not([hidden])');
  seen.editShown = await page.inputValue('#add-form input[name="command"]');
  await page.fill('#add-form input[name="command"]', `node '${everything}' stdio "two words"`);
  await page.click("#add-value");
  await page.fill('#values li:last-child input[name="value-name"]', "NOTE_FROM_CONSOLE");
  await page.fill('#values li:last-child input[name="value-value"]', "hello there");
  await page.check('#values li:last-child input[name="value-secret"]');
  await page.fill('#add-form input[name="tool_call_ms"]', "45000");
  await page.click("#add-submit");
  await page.waitForFunction(() => document.querySelector("#message").textContent === "Saved everything.");
  seen.edited = (await (await fetch(`${base}/api/servers/everything`)).json());
  await page.waitForSelector('[data-server="everything"] [data-state="connected"]');
  await page.click('[data-server="everything"] [data-action="edit"]');
  await page.waitForSelector('#add-form[data-editing="everything"]:not([hidden])');
  seen.secretShownMasked = await page.$eval('#values input[name="value-value"]', (input) => [input.type, input.value]);
  await page.click("#add-submit");
  await page.waitForFunction(() => document.querySelector("#message").textContent === "Saved everything.");
  await page.waitForSelector('[data-server="everything"] [data-state="connected"]');
  await page.click('[data-server="everything"] [data-action="open"]');
  await page.click('[data-tab="tools"]');
  await page.click('[data-try="get-env"]');
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  const envText = JSON.parse(await page.textContent("#try-result details.raw pre")).content[0].text;
  seen.envAfterEdit = /NOTE_FROM_CONSOLE\W+hello there/.test(envText);

  // An HTTP server's OAuth client, set in the Edit form: shown again with its secret masked,
  // saved untouched (the secret kept), then removed by clearing its id.
  const added = await fetch(`${base}/api/servers`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ id: "signin", url: "http://127.0.0.1:9/mcp", disabled: true }),
  });
  seen.signinAdded = added.status;
  await page.waitForSelector('[data-server="signin"] [data-action="edit"]');
  await page.click('[data-server="signin"] [data-action="edit"]');
  await page.waitForSelector('#add-form[data-editing="signin"]:not([hidden])');
  await page.fill('#add-form input[name="oauth_client_id"]', "switchboard-console");
  await page.fill('#add-form input[name="oauth_client_secret"]', "s3cret-from-console");
  await page.fill('#add-form input[name="oauth_issuer"]', "https://auth.example.com");
  await page.selectOption('#add-form select[name="oauth_grant"]', "client-credentials");
  await page.$eval("#message", (message) => { message.textContent = ""; });
  await page.click("#add-submit");
  await page.waitForFunction(() => document.querySelector("#message").textContent === "Saved signin.");
  seen.oauthSet = (await (await fetch(`${base}/api/servers/signin`)).json()).oauth_client;
  await page.click('[data-server="signin"] [data-action="edit"]');
  await page.waitForSelector('#add-form[data-editing="signin"]:not([hidden])');
  seen.oauthShown = await page.$eval("#add-form", (form) => [form.elements.oauth_client_id.value,
    form.elements.oauth_client_secret.value, form.elements.oauth_issuer.value, form.elements.oauth_grant.value]);
  await page.$eval("#message", (message) => { message.textContent = ""; });
  await page.click("#add-submit");
  await page.waitForFunction(() => document.querySelector("#message").textContent === "Saved signin.");
  seen.oauthKept = (await (await fetch(`${base}/api/servers/signin`)).json()).oauth_client;
  await page.click('[data-server="signin"] [data-action="edit"]');
  await page.waitForSelector('#add-form[data-editing="signin"]:not([hidden])');
  await page.fill('#add-form input[name="oauth_client_id"]', "");
  await page.$eval("#message", (message) => { message.textContent = ""; });
  await page.click("#add-submit");
  await page.waitForFunction(() => document.querySelector("#message").textContent === "Saved signin.");
  seen.oauthRemoved = (await (await fetch(`${base}/api/servers/signin`)).json()).oauth_client ?? null;
  await fetch(`${base}/api/servers/signin`, { method: "DELETE" });
  await page.waitForSelector('[data-server="signin"]', { state: "detached" });

  // An import of a client's configuration: one entry taken, one skipped with the reason.
  await page.click("#show-import");
  await page.fill('#import-form textarea[name="text"]', JSON.stringify({
    mcpServers: { desk: { url: "builtin:human" }, broken: { command: "node", url: "http://127.0.0.1:1/mcp" } },
  }));
  await page.click('#import-form button[type="submit"]');
  await page.waitForSelector('[data-server="desk"] [data-state="connected"]');
  seen.imported = await page.textContent("#message");

  // An endpoint: some of the servers and tools, at its own address, and a key for it alone.
  await page.click("#show-endpoints");
  await page.waitForSelector("#endpoints-panel:not([hidden]):not([aria-busy])");
  seen.noEndpoints = await page.isVisible("#no-endpoints");
  await page.click("#new-endpoint");
  await page.waitForSelector('#endpoint-servers [data-server="everything"] [data-tool="echo"]', { state: "attached" });
  await page.fill('#endpoint-form input[name="name"]', "support");
  await page.fill('#endpoint-form input[name="description"]', "Support agents");
  await page.check('#endpoint-servers [data-include="everything"]');
  await page.click('#endpoint-servers [data-server="everything"] summary');
  await page.click('#endpoint-servers [data-server="everything"] [data-action="none"]');
  await page.check('#endpoint-servers [data-server="everything"] [data-tool="echo"]');
  await page.check('#endpoint-servers [data-server="everything"] [data-tool="get-sum"]');
  await page.click('#endpoint-form button[type="submit"]');
  await page.waitForSelector('[data-endpoint="support"]');
  seen.endpointCard = (await page.textContent('[data-endpoint="support"]')).replace(/\s+/g, " ").trim();
  seen.endpointStored = await (await fetch(`${base}/api/endpoints/support`)).json();
  await page.click('[data-endpoint="support"] [data-action="issue-key"]');
  await page.waitForSelector('[data-endpoint="support"] .key:not([hidden])');
  seen.endpointKey = await page.textContent('[data-endpoint="support"] .key code');
  // The key reaches its endpoint and nothing else.
  const withKey = (path) => fetch(`${base}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${seen.endpointKey}`, "content-type": "application/json",
      accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
      protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "console-test", version: "1" } } }),
  });
  seen.endpointKeyReaches = [(await withKey("/mcp/e/support")).status, (await withKey("/mcp")).status];
  await shot(page, "endpoints");
  await page.click('[data-endpoint="support"] [data-action="revoke"]');
  await page.waitForFunction(() => document.querySelector("#endpoint-status").textContent.startsWith("Revoked"));
  seen.keysAfterRevoking = (await (await fetch(`${base}/api/endpoints/support`)).json()).keys.length;
  await page.click("[data-close-endpoints]");

  // A call that waits for a person's approval: the question shows the exact arguments, and
  // the call goes on once approved.
  const json = { "content-type": "application/json" };
  await fetch(`${base}/api/servers/everything/tools/echo`, { method: "PATCH", headers: json, body: JSON.stringify({ approval: true }) });
  const approvedCall = fetch(`${base}/mcp`, {
    method: "POST",
    headers: { ...json, accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call", "mcp-name": "everything__echo" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: {
      name: "everything__echo", arguments: { message: "deploy to production" },
      _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } } }),
  }).then((response) => response.text());
  await page.waitForSelector('[data-question] .message pre');
  seen.approvalShows = (await page.textContent('[data-question] .message')).replace(/\s+/g, " ").trim();
  await shot(page, "approval");
  await page.click('[data-question] [data-action="accept"]');
  seen.approvedCall = await approvedCall;
  await fetch(`${base}/api/servers/everything/tools/echo`, { method: "PATCH", headers: json, body: JSON.stringify({ approval: false }) });

  // The audit log: the approval and the call it let through, filtered, and exported.
  const rowsOf = (kind) => page.waitForFunction((kind) => {
    const rows = [...document.querySelectorAll("#audit-records tbody tr")];
    return rows.length > 0 && rows.every((row) => row.dataset.kind === kind);
  }, kind);
  const rowTexts = () => page.$$eval("#audit-records tbody tr", (rows) => rows.map((row) =>
    [...row.cells].map((cell) => cell.textContent.replace(/\s+/g, " ").trim()).join(" | ")));
  await page.click("#show-audit");
  await page.waitForSelector("#audit-panel:not([hidden])");
  await page.selectOption('#audit-filters select[name="kind"]', "approval");
  await page.click('#audit-filters button[type="submit"]');
  await rowsOf("approval");
  seen.auditApprovals = await rowTexts();
  await page.selectOption('#audit-filters select[name="kind"]', "call");
  await page.fill('#audit-filters input[name="tool"]', "echo");
  await page.click('#audit-filters button[type="submit"]');
  await rowsOf("call");
  seen.auditCalls = await rowTexts();
  await shot(page, "audit");
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#audit-export")]);
  const chunks = [];
  for await (const chunk of await download.createReadStream()) chunks.push(chunk);
  const exported = Buffer.concat(chunks).toString("utf8").trim().split("\n").map((line) => JSON.parse(line));
  seen.auditExported = { name: download.suggestedFilename(), lines: exported.length, kinds: [...new Set(exported.map((r) => r.kind))], tools: [...new Set(exported.map((r) => r.tool))] };
  await page.click("[data-close-audit]");

  // A dark theme, and what survives a reload: the theme, the open server and tab, the activity.
  await page.click('[data-server="everything"] [data-action="open"]');
  await page.click('[data-tab="prompts"]');
  while ((await page.textContent("#theme")) !== "Theme: dark") await page.click("#theme");
  await page.reload();
  await page.waitForSelector("#live.live");
  await page.waitForFunction(() => document.querySelector("#detail-title").textContent !== "");
  seen.afterReload = await page.evaluate(() => ({
    theme: document.documentElement.dataset.theme,
    server: document.querySelector("#detail-title").textContent,
    tab: document.querySelector("[data-tab].active")?.dataset.tab,
    activity: document.querySelectorAll("#activity > li").length,
    history: document.querySelectorAll("#history > li").length,
    background: getComputedStyle(document.body).backgroundColor,
  }));
  await page.click('[data-tab="tools"]');
  await shot(page, "dark");

  // A phone's width: one column, nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  seen.phoneOverflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  await shot(page, "phone");
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  const now = await whatTheConsoleShows(page);
  console.error(`${error.message}\nwhat the page showed so far: ${JSON.stringify(seen)}\nwhat it shows now: ${JSON.stringify(now)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
