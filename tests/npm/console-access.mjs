// A tenant admin in the web console of a `serve --users` daemon puts a member in a group and
// grants the group one shared server, for crates/switchboard/tests/web_console.rs: headless
// Chromium (Debian's, driven by playwright-core) answers the page's key prompt with the admin's
// key, opens Access, saves group `eng` with member `<member>`, grants `group:eng` the server
// `<server>`, and reads back what the page lists.
//
//   node console-access.mjs <daemon-base-url> <admin-key> <member> <server> [screenshot-dir]
//
// Prints one JSON line of what the page showed. Exits non-zero, saying why, when the page does
// not show what a person would wait for.
import { launchChromium, whatTheConsoleShows } from "./browser.mjs";

const [base, key, member, server, screenshots] = process.argv.slice(2);
if (!server) {
  console.error("usage: node console-access.mjs <daemon-base-url> <admin-key> <member> <server> [screenshot-dir]");
  process.exit(2);
}
const browser = await launchChromium();
const seen = { problems: [] };
let page;
try {
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.setDefaultTimeout(30_000);
  page.on("dialog", (dialog) => (dialog.type() === "prompt" ? dialog.accept(key) : dialog.accept()));
  page.on("pageerror", (error) => seen.problems.push(`page error: ${error.message}`));
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith(base) && !url.startsWith("about:")) seen.problems.push(`request outside the daemon: ${url}`);
  });
  await page.goto(base);
  await page.waitForSelector("#live.live");
  await page.click("#show-access");
  await page.waitForSelector("#access-rule:not(:empty)");
  seen.ruleBefore = (await page.textContent("#access-rule")).trim();
  await page.fill("#group-form [name=name]", "eng");
  await page.fill("#group-form [name=members]", member);
  await page.fill("#group-form [name=description]", "engineers");
  await page.click("#group-form [type=submit]");
  await page.waitForSelector('#groups [data-group="eng"]');
  seen.group = (await page.textContent('#groups [data-group="eng"]')).trim();
  await page.fill("#grant-form [name=subject]", "group:eng");
  await page.selectOption("#grant-form [name=kind]", "server");
  await page.selectOption("#grant-form [name=server]", server);
  await page.click("#grant-form [type=submit]");
  await page.waitForSelector("#grants tbody tr");
  seen.grants = await page.$$eval("#grants tbody tr", (rows) =>
    rows.map((row) => [...row.children].slice(0, 2).map((cell) => cell.textContent)));
  seen.ruleAfter = (await page.textContent("#access-rule")).trim();
  seen.status = (await page.textContent("#access-status")).trim();
  if (screenshots) await page.screenshot({ path: `${screenshots}/access.png`, fullPage: true });
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`${error.message}\nthe console showed: ${JSON.stringify(await whatTheConsoleShows(page))}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
