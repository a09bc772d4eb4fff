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
import { launchChromium, signInAndConsent } from "./browser.mjs";

const [base, mcp, screenshots] = process.argv.slice(2);
if (!base || !mcp) {
  console.error("usage: node console-sign-in.mjs <daemon-base-url> <mcp-url> [screenshot-dir]");
  process.exit(2);
}
const browser = await launchChromium();
const seen = {};
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  const problems = [];
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(base);
  await page.waitForSelector("#live.live");

  await page.click("#show-add");
  await page.fill('#add-form input[name="id"]', "secure");
  await page.fill('#add-form input[name="url"]', mcp);
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
  if (screenshots) await page.screenshot({ path: `${screenshots}/signed-in.png`, fullPage: true });
  await page.click('[data-server="secure"] [data-action="open"]');
  await page.click('[data-try="echo"]');
  await page.fill('#try-form input[name="message"]', "signed in");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#try-status").textContent === "Done.");
  seen.echo = JSON.parse(await page.textContent("#try-result")).content[0].text;

  await page.click('[data-server="secure"] [data-action="sign-out"]');
  await page.waitForSelector('[data-server="secure"] [data-state="needs-auth"]');
  seen.signedOut = await page.textContent("#message");
  seen.problems = problems;
  console.log(JSON.stringify(seen));
} catch (error) {
  console.error(`${error.message}\nwhat the pages showed so far: ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
