// Headless Chromium for the browser tests (agui_browser.mjs, dashboard_browser.mjs): Debian's
// (scripts/setup-js.sh installs it; CHROMIUM_PATH overrides), driven by playwright-core.
import { existsSync } from "node:fs";

import { chromium } from "playwright-core";

export async function launchChromium() {
  const executablePath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
  if (!existsSync(executablePath)) throw new Error(`Chromium not found at ${executablePath}: run scripts/setup-js.sh`);
  return chromium.launch({
    executablePath,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
  });
}
