// What the browser scripts share: the environment the Go tests set, the
// log line, and one headless Chromium session with its failure handling.
import { chromium } from "playwright-core";
import path from "node:path";

// mustEnv returns the environment variable name, which the Go test sets.
export function mustEnv(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

export function log(...a) { console.log(new Date().toISOString(), ...a); }

// session launches Chromium (CHROMIUM, profile in USER_DATA_DIR) with a
// 1280 x height viewport and runs body(page, problems), where problems
// collects what the page reports that the script did not expect. When body
// throws, it prints the failure and the problems and saves failureShot in
// SCREENSHOT_DIR. It closes the browser and ends the process: exit 1 on
// failure, 0 otherwise.
export async function session({ height, failureShot }, body) {
  const browser = await chromium.launchPersistentContext(mustEnv("USER_DATA_DIR"), {
    executablePath: mustEnv("CHROMIUM"),
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height },
  });
  const problems = [];
  let failed = false;
  try {
    const page = browser.pages()[0] || await browser.newPage();
    await body(page, problems);
  } catch (e) {
    failed = true;
    console.error("FAIL:", e.message);
    if (problems.length) console.error(problems.join("\n"));
    try {
      const page = browser.pages()[0];
      if (page) await page.screenshot({ path: path.join(mustEnv("SCREENSHOT_DIR"), failureShot), fullPage: true });
    } catch { /* the failure itself is what matters */ }
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
}

// tabTo presses Tab until the element matching selector has the focus (at
// most 150 presses: the longest page's way through its controls).
export async function tabTo(page, selector, what) {
  for (let i = 0; i < 150; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
    await page.keyboard.press("Tab");
  }
  throw new Error(`${what} (${selector}) cannot be reached with Tab`);
}
