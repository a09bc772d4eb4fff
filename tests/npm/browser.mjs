// Headless Chromium for the browser tests: Debian's (/usr/bin/chromium unless CHROMIUM names
// another), driven by playwright-core, started with its network features off so that it opens
// nothing but the pages a test gives it.
import { chromium } from "playwright-core";

export function launchChromium() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
}

/**
 * A person on the test authorization server's pages (oidc-protected-server.mjs): signs in as
 * `login` with `password`, then answers the consent page with `decision` (`allow` or `deny`).
 * Returns the scopes the consent page asked for.
 */
export async function signInAndConsent(page, { login = "ada", password = "lovelace", decision = "allow" } = {}) {
  await page.waitForSelector('input[name="login"]');
  await page.fill('input[name="login"]', login);
  await page.fill('input[name="password"]', password);
  await Promise.all([page.waitForNavigation(), page.click('button[value="login"]')]);
  const scopes = (await page.textContent("#scopes")).trim();
  await Promise.all([page.waitForNavigation(), page.click(`button[value="${decision}"]`)]);
  return scopes;
}
