// A person in the web console grants a scope a call was refused for, for
// crates/switchboard/tests/oauth_end_to_end.rs: headless Chromium (Debian's, driven by
// playwright-core) opens the console of a daemon whose server `<id>` says `needs scope`, presses
// that card's Sign in, follows the window it opens through the authorization server (the test
// fixture's, which redirects at once) back to the daemon's callback page, and waits for the card
// to stop asking for the scope.
//
//   node console-scope.mjs <daemon-base-url> <server-id>
//
// Prints one JSON line: the card before and after, and what the callback page said. Exits
// non-zero, saying why, when the page does not show what a person would wait for.
import { launchChromium, whatTheConsoleShows } from "./browser.mjs";

const [base, id] = process.argv.slice(2);
if (!base || !id) {
  console.error("usage: node console-scope.mjs <daemon-base-url> <server-id>");
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
  const card = `#servers > li[data-server="${id}"]`;
  const cardText = () => page.$eval(card, (element) => element.innerText.replace(/\s+/g, " "));
  await page.waitForFunction((selector) => document.querySelector(selector)?.innerText.includes("needs scope"), card);
  seen.before = await cardText();
  const [popup] = await Promise.all([
    page.waitForEvent("popup"),
    page.click(`${card} [data-action="sign-in"]`),
  ]);
  await popup.waitForURL(/\/oauth\/callback/);
  await popup.waitForLoadState();
  seen.callback = (await popup.textContent("body")).replace(/\s+/g, " ").trim();
  await page.waitForFunction((selector) => !document.querySelector(selector)?.innerText.includes("needs scope"), card);
  seen.after = await cardText();
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`${error.message}\nthe console showed: ${JSON.stringify(await whatTheConsoleShows(page))}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
