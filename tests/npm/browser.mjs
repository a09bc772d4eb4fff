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
