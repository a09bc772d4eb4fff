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

/**
 * What a console page shows at this moment (its message and its server cards), for a test's
 * failure report; a page that cannot be read says why instead.
 */
export async function whatTheConsoleShows(page) {
  if (!page) return "no page yet";
  return page.evaluate(() => ({
    message: document.querySelector("#message")?.textContent,
    cards: [...document.querySelectorAll("#servers > li")].map((card) => card.innerText.replace(/\s+/g, " ")),
  })).catch((error) => `unreadable: ${error.message}`);
}

/**
 * Holds the answer to the first request for `url` that `picks(request)` chooses, until
 * `until(body)` settles, then lets it go: the page's readings answering out of order, as they do
 * on a busy machine. Once the route is in place, gives `had`: a promise that settles once the
 * page has had that late answer and drawn what it does with it.
 */
export async function answerLate(page, url, picks, until) {
  let picked = false;
  let had;
  const late = new Promise((resolve) => { had = resolve; });
  await page.route(url, async (route) => {
    const request = route.request();
    if (picked || !picks(request)) return route.continue();
    picked = true;
    const response = await route.fetch();
    const body = await response.text();
    await until(body);
    await route.fulfill({ response, body });
    await (await request.response())?.finished();
    await page.evaluate(() => new Promise((drawn) => requestAnimationFrame(() => requestAnimationFrame(drawn))));
    had();
  });
  return { had: late };
}
