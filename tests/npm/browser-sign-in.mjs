// A person at a browser, for crates/switchboard/tests/real_authorization_server.rs: opens the
// authorization URL Switchboard printed in headless Chromium (Debian's, driven by
// playwright-core), signs in on the authorization server's own page, answers its consent page,
// and follows the redirect to wherever it leads (Switchboard's loopback callback).
//
//   node browser-sign-in.mjs <authorization-url> [allow|deny]
//
// Prints one JSON line: {"consentScopes", "finalUrl", "finalText"}. Exits non-zero, saying why,
// when a page it expects does not come. Chromium is /usr/bin/chromium unless CHROMIUM names
// another; it is started with its network features off so it opens nothing but the pages given.
import { launchChromium, signInAndConsent } from "./browser.mjs";

const [authorizationUrl, decision = "allow"] = process.argv.slice(2);
if (!authorizationUrl) {
  console.error("usage: node browser-sign-in.mjs <authorization-url> [allow|deny]");
  process.exit(2);
}
const browser = await launchChromium();
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(20_000);
  await page.goto(authorizationUrl);
  const consentScopes = await signInAndConsent(page, { decision });
  await page.waitForLoadState("load");
  console.log(JSON.stringify({
    consentScopes,
    finalUrl: page.url(),
    finalText: (await page.textContent("body")).trim(),
  }));
} finally {
  await browser.close();
}
