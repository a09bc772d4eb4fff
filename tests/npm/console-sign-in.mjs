// A person signing in from Switchboard's web console, for
// crates/switchboard/tests/real_authorization_server.rs: headless Chromium (Debian's, driven by
// playwright-core) adds an OAuth-protected MCP server through the console's form, sees it wait
// for a sign-in, presses Sign in, signs in and consents on the real authorization server's
// pages in the window that opens, sees the card turn connected live, calls a tool of the server,
// then signs out and sees it wait for a sign-in again.
//
//   node console-sign-in.mjs <daemon-base-url> <mcp-url> [screenshot-dir]
//
// Prints one JSON line with what the pages showed. Exits non-zero, saying why, when a page does
// not show what a person would wait for. Chromium is /usr/bin/chromium unless CHROMIUM names
// another; it starts with its network features off.
import { answerLate, launchChromium, signInAndConsent, whatTheConsoleShows } from "./browser.mjs";

const [base, mcp, screenshots] = process.argv.slice(2);
if (!base || !mcp) {
  console.error("usage: node console-sign-in.mjs <daemon-base-url> <mcp-url> [screenshot-dir]");
  process.exit(2);
}

const browser = await launchChromium();
const seen = {};
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(30_000);
  const problems = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(base);
  await page.waitForSelector("#live.live");

  await page.click("#show-add");
  await page.fill('#add-form input[name="id"]', "secure");
  await page.fill('#add-form input[name="url"]', mcp);
  // The first reading of the server list after the add answers only once the console shows the
  // server connected: a console that showed that late answer would show a state it has left.
  let added = false;
  page.on("request", (request) => { added ||= request.method() === "POST" && request.url().endsWith("/api/servers"); });
  const lateReading = {};
  const lateAnswer = await answerLate(page, "**/api/servers", (request) => added && request.method() === "GET", async (body) => {
    lateReading.state = JSON.parse(body).servers?.find((s) => s.id === "secure")?.status?.state ?? "none";
    await page.waitForSelector('[data-server="secure"] [data-state="connected"]', { timeout: 0 });
  });
  await page.click('#add-form button[type="submit"]');
  await page.waitForSelector('[data-server="secure"] [data-state="needs-auth"]');
  seen.waiting = true;

  // Sign in: the authorization server's own pages, in the window the console opens.
  const [popup] = await Promise.all([
    page.waitForEvent("popup"),
    page.click('[data-server="secure"] [data-action="sign-in"]'),
  ]);
  popup.setDefaultTimeout(30_000);
  await popup.waitForSelector('input[name="login"]');
  seen.signInPage = new URL(popup.url()).origin;
  seen.consentScopes = await signInAndConsent(popup);
  await popup.waitForLoadState("load");
  seen.callbackPage = new URL(popup.url()).origin;
  seen.callbackText = (await popup.textContent("body")).trim();

  // The console shows it connected, live, and its tools work.
  await page.waitForSelector('[data-server="secure"] [data-state="connected"]');
  await lateAnswer.had;
  lateReading.shownAfter = await page.getAttribute('[data-server="secure"] [data-state]', "data-state");
  seen.lateReading = lateReading;
  if (screenshots) await page.screenshot({ path: `${screenshots}/signed-in.png`, fullPage: true });
  await page.click('[data-server="secure"] [data-action="open"]');
  await page.click('[data-try="echo"]');
  await page.fill('#try-form input[name="message"]', "signed in");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.echo = JSON.parse(await page.textContent("#try-result details.raw pre")).content[0].text;

  await page.click('[data-server="secure"] [data-action="sign-out"]');
  await page.waitForSelector('[data-server="secure"] [data-state="needs-auth"]');
  seen.signedOut = await page.textContent("#message");
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  const now = await whatTheConsoleShows(page);
  console.error(`${error.message}\nwhat the pages showed so far: ${JSON.stringify(seen)}\nwhat the console shows now: ${JSON.stringify(now)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
