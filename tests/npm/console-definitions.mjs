// A person in the web console sees that a tool's definition changed under the same name (a
// "rug pull"), held back from clients, with what changed, and accepts it, for
// crates/switchboard/tests/web_console.rs: headless Chromium (Debian's, driven by
// playwright-core) opens the server `<id>`, reads the changed tool's card (each field as
// approved and as now), and presses Accept; then sets the server's guards in its edit form, and
// the tool's search notes under its row.
//
//   node console-definitions.mjs <daemon-base-url> <server-id> <tool> [screenshot-dir]
//
// Prints one JSON line of what the page showed before and after. Exits non-zero, saying why,
// when the page does not show what a person would wait for.
import { launchChromium, whatTheConsoleShows } from "./browser.mjs";

const [base, id, tool, screenshots] = process.argv.slice(2);
if (!base || !id || !tool) {
  console.error("usage: node console-definitions.mjs <daemon-base-url> <server-id> <tool> [screenshot-dir]");
  process.exit(2);
}
const browser = await launchChromium();
const seen = {};
let page;
try {
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30_000);
  const problems = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(base);
  await page.waitForSelector("#live.live");
  await page.click(`#servers > li[data-server="${id}"] [data-action="open"]`);
  const change = `[data-definition-change="${tool}"]`;
  await page.waitForSelector(change);
  seen.change = (await page.textContent(`${change} .name`)).trim();
  seen.badge = (await page.textContent(`${change} .badge`)).trim();
  seen.fields = await page.$$eval(`${change} .diff`, (diffs) => diffs.map((diff) => ({
    field: diff.dataset.field,
    was: diff.querySelector(".was").textContent,
    now: diff.querySelector(".now").textContent,
  })));
  await page.waitForSelector(`#tools > li[data-tool="${tool}"] [data-held]`);
  seen.markedHeld = await page.$$eval("#tools > li", (items) =>
    items.filter((item) => item.querySelector("[data-held]")).map((item) => item.dataset.tool));
  if (screenshots) await page.screenshot({ path: `${screenshots}/definition-changed.png`, fullPage: true });
  await page.click(`${change} [data-action="accept-definition"]`);
  await page.waitForSelector(change, { state: "detached" });
  await page.waitForSelector(`#tools > li[data-tool="${tool}"] [data-held]`, { state: "detached" });
  seen.message = await page.textContent("#message");
  // The server's guards, in its edit form: what it holds shown, masking and a webhook set.
  await page.click(`#servers > li[data-server="${id}"] [data-action="edit"]`);
  await page.waitForSelector("#add-form:not([hidden])");
  seen.definitionChangesShown = await page.inputValue("#add-form [name=definition_changes]");
  await page.check('#add-form [name=redact_arguments][value="secrets"]');
  await page.check('#add-form [name=redact_results][value="personal"]');
  await page.fill("#add-form [name=webhook_url]", "http://127.0.0.1:9/check");
  await page.fill("#add-form [name=webhook_timeout_ms]", "2500");
  await page.selectOption("#add-form [name=webhook_on_failure]", "allow");
  await page.click("#add-submit");
  await page.waitForFunction((id) => document.querySelector("#message").textContent === `Saved ${id}.`, id);
  if (screenshots) {
    await page.click(`#servers > li[data-server="${id}"] [data-action="edit"]`);
    await page.waitForSelector("#add-form:not([hidden])");
    await page.locator("#call-guards").screenshot({ path: `${screenshots}/guards.png` });
  }
  // The tool's search notes, under its row in the tool list.
  await page.click(`#tools > li[data-tool="${tool}"] [data-notes]`);
  await page.fill(`#tools > li[data-tool="${tool}"] form.search-notes textarea`, "tally; total up the figures");
  if (screenshots) await page.locator(`#tools > li[data-tool="${tool}"]`).screenshot({ path: `${screenshots}/search-notes.png` });
  await page.click(`#tools > li[data-tool="${tool}"] form.search-notes [type=submit]`);
  await page.waitForFunction((tool) =>
    document.querySelector("#message").textContent === `Search notes of ${tool} saved.`, tool);
  seen.notesButton = (await page.textContent(`#tools > li[data-tool="${tool}"] [data-notes]`)).trim();
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`${error.message}\nthe console showed: ${JSON.stringify(await whatTheConsoleShows(page))}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
