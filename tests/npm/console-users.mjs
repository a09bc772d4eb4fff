// Two people of one tenant using the web console of a `serve --users` daemon, for
// crates/switchboard/tests/real_authorization_server.rs: headless Chromium (Debian's, driven by
// playwright-core), one browser context each (as two people's browsers are). Each opens the
// console, is asked for their API key by the page, and sees whose workspace it is. The tenant
// shares a stdio server (`tool`, whose `whoami` tool says its FIXTURE_MARK) and an
// OAuth-protected one (`secure`). Ana sets her own FIXTURE_MARK in the server's "My settings"
// tab and her `whoami` says it while Bob's still says the tenant's; she forgets it again, and
// adds a stdio server of her own from the command the operator approved (the page offers no
// command field to her), with her own value. Ana
// signs in to `secure` on the real authorization server's pages in the window the console
// opens; her card turns connected while Bob's still waits for his own sign-in.
//
//   node console-users.mjs <daemon-base-url> <ana-key> <bob-key> [screenshot-dir]
//
// Prints one JSON line with what the pages showed. Exits non-zero, saying why, when a page
// does not show what a person would wait for.
import { launchChromium, signInAndConsent, whatTheConsoleShows } from "./browser.mjs";

const [base, anaKey, bobKey, screenshots] = process.argv.slice(2);
if (!bobKey) {
  console.error("usage: node console-users.mjs <daemon-base-url> <ana-key> <bob-key> [screenshot-dir]");
  process.exit(2);
}
const browser = await launchChromium();
const seen = { problems: [] };

/** A person's console: their own browser context, answering the page's key prompt with `key`. */
async function open(name, key) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  seen[`${name}Prompts`] = 0;
  page.on("dialog", (dialog) => {
    if (dialog.type() === "prompt") {
      seen[`${name}Prompts`] += 1;
      dialog.accept(key);
    } else {
      dialog.dismiss();
    }
  });
  page.on("pageerror", (error) => seen.problems.push(`${name}: page error: ${error.message}`));
  page.on("request", (request) => {
    const url = request.url();
    if (!url.startsWith(base) && !url.startsWith("about:")) seen.problems.push(`${name}: request outside the daemon: ${url}`);
  });
  await page.goto(base);
  await page.waitForSelector("#live.live");
  seen[`${name}Who`] = (await page.textContent("#who")).trim();
  return page;
}

const card = (server) => `[data-server="${server}"]`;

/** Runs `whoami` of the open server from the try form until it starts with `mark`. */
async function whoamiUntil(page, mark) {
  let said = "";
  for (let attempt = 0; attempt < 50; attempt++) {
    await page.click('[data-tab="tools"]');
    await page.click('[data-try="whoami"]');
    await page.click("#run");
    await page.waitForFunction(() => !document.querySelector("#try-status").textContent.startsWith("Running"));
    // The result's raw JSON, behind its toggle; none when the call failed.
    const raw = await page.$("#try-result details.raw pre");
    said = raw ? JSON.parse(await raw.textContent()).content?.[0]?.text ?? "" : await page.textContent("#try-status");
    if (said.startsWith(mark)) return said;
    await page.waitForTimeout(200);
  }
  throw new Error(`whoami never said ${mark}: ${said}`);
}

let ana;
let bob;
try {
  ana = await open("ana", anaKey);
  await ana.waitForSelector(`${card("tool")} [data-state="connected"]`);
  seen.anaToolOwner = await ana.getAttribute(`${card("tool")} [data-owner]`, "data-owner");
  seen.anaToolActions = await ana.$$eval(`${card("tool")} [data-action]`, (buttons) => buttons.map((b) => b.dataset.action));

  // Her own value for the shared server, in its "My settings" tab.
  await ana.click(`${card("tool")} [data-action="open"]`);
  await ana.click('[data-tab="settings"]');
  await ana.waitForSelector('#settings-values [data-setting] input[name="name"]');
  seen.settingsKind = (await ana.textContent("#settings-kind")).trim();
  await ana.fill('#settings-values [data-setting] input[name="name"]', "FIXTURE_MARK");
  await ana.fill('#settings-values [data-setting] input[name="value"]', "ana");
  await ana.click('#settings-form button[type="submit"]');
  await ana.waitForFunction(() => document.querySelector("#message").textContent.startsWith("Saved"));
  seen.saved = await ana.textContent("#message");
  seen.anaWhoami = await whoamiUntil(ana, "ana");
  if (screenshots) await ana.screenshot({ path: `${screenshots}/users-ana.png`, fullPage: true });

  bob = await open("bob", bobKey);
  await bob.waitForSelector(`${card("tool")} [data-state="connected"]`);
  await bob.click(`${card("tool")} [data-action="open"]`);
  seen.bobWhoami = await whoamiUntil(bob, "shared");
  await bob.click('[data-tab="settings"]');
  await bob.waitForSelector('#settings-values [data-setting] input[name="name"]');
  seen.bobSettings = await bob.$$eval('#settings-values input', (inputs) => inputs.map((i) => i.value));

  await ana.click('[data-tab="settings"]');
  await ana.click("#settings-forget");
  await ana.waitForFunction(() => document.querySelector("#message").textContent.startsWith("Forgot"));
  seen.forgot = await ana.textContent("#message");
  seen.anaWhoamiAfter = await whoamiUntil(ana, "shared");

  // Her own stdio server: no command of her own to give, she picks the operator's approved
  // command and gives it her own value.
  await ana.click("#show-add");
  seen.anaCommandFieldHidden = await ana.isHidden("#command-field");
  await ana.fill('#add-form input[name="id"]', "mine");
  await ana.selectOption('#add-form select[name="approved"]', "fixture");
  await ana.fill('#approved-choices [data-env="FIXTURE_MARK"]', "anas-own");
  await ana.click('#add-form button[type="submit"]');
  await ana.waitForSelector(`${card("mine")} [data-state="connected"]`);
  await ana.click(`${card("mine")} [data-action="open"]`);
  seen.anaOwnWhoami = await whoamiUntil(ana, "anas-own");

  // Ana signs in to the shared OAuth server as herself.
  await ana.waitForSelector(`${card("secure")} [data-state="needs-auth"]`);
  const [popup] = await Promise.all([
    ana.waitForEvent("popup"),
    ana.click(`${card("secure")} [data-action="sign-in"]`),
  ]);
  popup.setDefaultTimeout(30_000);
  await signInAndConsent(popup);
  await popup.waitForLoadState("load");
  seen.callbackText = (await popup.textContent("body")).trim();
  await ana.waitForSelector(`${card("secure")} [data-state="connected"]`);
  await bob.reload();
  await bob.waitForSelector("#live.live");
  await bob.waitForSelector(`${card("secure")} [data-state]`);
  seen.bobSecureState = await bob.getAttribute(`${card("secure")} [data-state]`, "data-state");
  console.log(JSON.stringify(seen));
} catch (error) {
  const now = { ana: await whatTheConsoleShows(ana), bob: await whatTheConsoleShows(bob) };
  console.error(`${error.message}\nwhat the pages showed so far: ${JSON.stringify(seen)}\nwhat the consoles show now: ${JSON.stringify(now)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
