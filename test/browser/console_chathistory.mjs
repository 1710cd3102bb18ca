// Drives the console's Agent chat on a conversation with more runs than it
// shows at first: the newest 20 are shown, "Show earlier runs" (pressed
// with the keyboard) brings the older ones, oldest first, each once. Run by
// console_pages_test.go (seedChatHistory sets CONVERSATION_ID and
// RUN_COUNT). Prints "PASS console chathistory"; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const conv = mustEnv("CONVERSATION_ID");
const runCount = Number(mustEnv("RUN_COUNT"));

// The server's list of the conversation's runs, oldest first.
async function serverRuns() {
  const ids = [];
  let token = "";
  do {
    const r = await fetch(`${base}/v1/runs?page_size=100&conversation_id=${encodeURIComponent(conv)}` + (token ? "&page_token=" + encodeURIComponent(token) : ""));
    assert.equal(r.status, 200);
    const d = await r.json();
    for (const run of d.runs ?? []) ids.push(run.run_id);
    token = d.next_page_token ?? "";
  } while (token);
  return ids.reverse();
}

const shown = (page) => page.$$eval("article.run", (els) => els.map((e) => e.dataset.runId));

await session({ height: 900, failureShot: "chat-history-failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  const all = await serverRuns();
  assert.equal(all.length, runCount, "the server lists every seeded run");

  await page.goto(`${base}/console/chat/${encodeURIComponent(conv)}`);
  await page.waitForSelector("article.run", { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelectorAll("article.run").length === 20, null, { timeout: 30_000 });
  assert.deepEqual(await shown(page), all.slice(-20), "the newest 20 runs, oldest first");

  // The earlier runs, by keyboard: focus the button and press Enter.
  const earlier = page.getByTestId("earlier-runs");
  await earlier.focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction((n) => document.querySelectorAll("article.run").length === n, runCount, { timeout: 30_000 });
  assert.deepEqual(await shown(page), all, "every run once, oldest first");
  await page.waitForSelector("[data-testid=earlier-runs]", { state: "detached", timeout: 10_000 });
  // The older runs' events are loaded too: each shows its answer.
  await page.waitForFunction((id) => document.querySelector(`article.run[data-run-id="${id}"] .bubble.answer`) !== null, all[0], { timeout: 30_000 });
  await page.screenshot({ path: path.join(shots, "chat-history.png") });

  // At a tablet's width the navigation stays one line, every page in view.
  await page.setViewportSize({ width: 768, height: 900 });
  await page.waitForFunction(() => document.querySelector(".topbar").getBoundingClientRect().height <= 44, null, { timeout: 10_000 });
  const links = await page.$$eval(".topbar nav a", (as) => as.map((a) => { const r = a.getBoundingClientRect(); return { text: a.textContent, left: r.left, right: r.right }; }));
  assert.equal(links.length, 6, "six pages in the navigation");
  for (const l of links) assert.ok(l.left >= 0 && l.right <= 768, `${l.text} is out of view at 768 px: ${l.left}–${l.right}`);
  assert.deepEqual(problems, []);
  log("PASS console chathistory (20 newest, then the earlier runs by keyboard, each once; the navigation on one line at 768 px)");
});
