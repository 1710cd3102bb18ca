// Drives the console's Activity page (/console/activity) in headless
// Chromium as a person would: the runs list (20 a page, with its tokens and
// cost chart), the next page reached with the keyboard, a run opened with
// Enter; its timeline's bars are compared with the run's events (tool
// calls, model calls, failed calls), its tokens and cost with Run.metrics,
// its trace link with its trace id; a planned run that waits for a
// clarification is followed live until it ends (no event lost or repeated);
// the conversation filter, an empty list, a missing run's error, and a
// tablet width. Run by
// TestConsolePagesInChromium (console_activity_test.go starts the runs).
// Prints "PASS console activity"; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session, tabTo } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const runId = mustEnv("ACTIVITY_RUN_ID");
const seeded = Number(mustEnv("ACTIVITY_RUNS"));
const PLANNED = "Browser test, compare Q3 and Q4 2025 revenue by region and by customer segment, ask me which segments to include, and write a report.";
const T = 30_000; // generous: the machine may be busy
const RUN_TIMEOUT = 120_000;

async function getJSON(p) {
  const r = await fetch(base + p);
  const text = await r.text();
  assert.equal(r.status, 200, `GET ${p}: ${r.status} ${text}`);
  return JSON.parse(text);
}

async function events(id) {
  const r = await fetch(`${base}/v1/runs/${encodeURIComponent(id)}/export?format=events`);
  assert.equal(r.status, 200, `events export of ${id}: ${r.status}`);
  return (await r.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
}

// expected reads from a run's events what its timeline must show.
function expected(evs) {
  const own = evs.filter((e) => !e.subagent_run_id);
  const calls = new Set(own.filter((e) => e.type === "act").map((e) => e.act.tool_call_id));
  const failed = own.filter((e) => e.type === "observe" && e.observe.success !== true).length;
  const steps = own.filter((e) => e.type === "step_start").length;
  const waits = own.filter((e) => ["clarification_asked", "decision_asked", "permission_asked", "doom_loop_detected"].includes(e.type)).length;
  return { tools: calls.size, failed, steps, waits };
}

const rowIds = (page) => page.$$eval("[data-testid=runs-table] tbody tr", (rows) => rows.map((r) => r.dataset.runId));
const dataset = (page, sel) => page.$eval(sel, (e) => ({ ...e.dataset }));

// until polls check (async) until it holds, for at most ms.
async function until(check, what, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function waitCanvas(page, sel) {
  await page.waitForSelector(`${sel} canvas`, { timeout: T });
}

await session({ height: 900, failureShot: "activity-failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()} at ${m.location().url}`); });
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`); });

  // The list: the newest 20 runs and their chart.
  await page.goto(base + "/console/activity");
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=runs-table] tbody tr").length === 20, null, { timeout: T });
  const page1 = await rowIds(page);
  const api1 = await getJSON("/v1/runs?page_size=20");
  assert.deepEqual(page1, api1.runs.map((r) => r.run_id), "page 1 is not the API's newest 20 runs, in order");
  assert.ok(!page1.includes(runId), "the oldest seeded run is on the first page");
  assert.equal(await page.getAttribute("[data-testid=runs-chart]", "data-runs"), "20");
  await waitCanvas(page, "[data-testid=runs-chart]");
  const first = api1.runs[0];
  const firstRow = await page.textContent(`tr[data-run-id="${first.run_id}"]`);
  assert.ok(firstRow.includes(first.state.replace("RUN_STATE_", "").toLowerCase().replace(/_/g, " ")), "the newest run's state");
  assert.match(firstRow, new RegExp(Number(first.metrics.total_input_tokens).toLocaleString("en-US")), "the newest run's input tokens");
  // Tokens and cost per day: the usage ledger's last 30 UTC days.
  await page.waitForSelector("[data-testid=activity-daily] [data-testid=usage-daily]", { timeout: T });
  const daily = await getJSON("/v1/usage?history_days=30");
  assert.equal(await page.getAttribute("[data-testid=activity-daily] [data-testid=usage-daily]", "data-days"), "30");
  assert.equal(await page.getAttribute("[data-testid=activity-daily] [data-testid=usage-daily]", "data-last-day"), daily.usage.history.at(-1).period, "the daily chart ends with the ledger's today");
  await page.screenshot({ path: path.join(shots, "activity-runs.png"), fullPage: true });
  log("runs list: page 1 has 20 runs");

  // Past 20, with the keyboard: Tab to "Older runs", Enter.
  await tabTo(page, "[data-testid=next-page]", "the next-page button");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => /page 2/.test(document.querySelector("[data-testid=page-number]")?.textContent ?? ""), null, { timeout: T });
  const api2 = await getJSON("/v1/runs?page_size=20&page_token=" + encodeURIComponent(api1.next_page_token));
  assert.ok(api2.runs.length >= seeded - 20, `the API's second page has ${api2.runs.length} runs`);
  await page.waitForFunction((n) => document.querySelectorAll("[data-testid=runs-table] tbody tr").length === n, api2.runs.length, { timeout: T });
  const page2 = await rowIds(page);
  assert.deepEqual(page2, api2.runs.map((r) => r.run_id), "page 2 is not the API's second page");
  assert.ok(page2.includes(runId), `the data-quality run ${runId} is not on page 2: ${page2}`);
  assert.ok(page2.every((id) => !page1.includes(id)), "page 2 repeats runs of page 1");
  assert.equal(await page.isDisabled("[data-testid=next-page]"), !api2.next_page_token, "the next page button offers a page the API has not");
  log("page 2:", page2.length, "runs");

  // Open the data-quality run with the keyboard.
  await tabTo(page, `tr[data-run-id="${runId}"] a`, "the run's link");
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => u.pathname === "/console/activity/" + runId, { timeout: T });
  await page.waitForSelector("[data-testid=timeline][data-ended=true]", { timeout: T });
  await waitCanvas(page, "[data-testid=timeline-chart]");
  await waitCanvas(page, "[data-testid=usage]");

  const { run } = await getJSON("/v1/runs/" + runId);
  const evs = await events(runId);
  const want = expected(evs);
  const tl = await dataset(page, "[data-testid=timeline]");
  log("timeline", JSON.stringify(tl), "expected", JSON.stringify(want));
  assert.ok(want.tools >= 3, `the seeded run has ${want.tools} tool calls`);
  assert.equal(Number(tl.toolBars), want.tools, "a bar per tool call");
  assert.equal(Number(tl.stepBars), want.steps, "a bar per step");
  assert.equal(Number(tl.modelBars), evs.filter((e) => e.type === "cost_update" && !e.subagent_run_id).length, "a bar per model call");
  assert.equal(Number(tl.failedTools), want.failed, "failed tool calls");
  assert.equal(Number(tl.openBars), 0, "open bars in a finished run");
  assert.equal(Number(tl.events), evs.length, "events read");

  // Tokens and cost: the figures are Run.metrics'.
  const m = run.metrics;
  const sum = await dataset(page, "[data-testid=run-summary]");
  assert.equal(Number(sum.inputTokens), Number(m.total_input_tokens), "input tokens");
  assert.equal(Number(sum.outputTokens), Number(m.total_output_tokens), "output tokens");
  assert.equal(Number(sum.costUsd), Number(m.total_cost_usd ?? 0), "cost");
  assert.equal(Number(sum.unpricedCalls), Number(m.unpriced_calls ?? 0), "unpriced calls");
  assert.equal(await page.textContent("[data-testid=fig-input]"), Number(m.total_input_tokens).toLocaleString("en-US"));
  assert.equal(await page.textContent("[data-testid=fig-output]"), Number(m.total_output_tokens).toLocaleString("en-US"));
  assert.match(await page.textContent("[data-testid=fig-cost]"), new RegExp("^\\$" + Number(m.total_cost_usd ?? 0).toFixed(4).replace(".", "\\.")));
  assert.equal(Number(await page.getAttribute("[data-testid=usage]", "data-calls")), Number(m.llm_calls), "a usage point per model call");

  // The trace link (the suite is traced) and the conversation in the chat.
  assert.ok(run.trace_id, "the run has no trace id");
  const trace = page.locator("[data-testid=trace-link]");
  assert.ok((await trace.getAttribute("href")).includes(run.trace_id), "the trace link does not name the run's trace");
  assert.equal(await trace.getAttribute("target"), "_blank");
  assert.match(await trace.getAttribute("rel"), /noopener/);
  assert.equal(await page.getAttribute("[data-testid=chat-link]", "href"), "/console/chat/" + encodeURIComponent(run.conversation_id));
  await page.screenshot({ path: path.join(shots, "activity-run.png"), fullPage: true });
  log("run", runId, "matches its events and metrics");

  // A run whose first two tool calls fail: its failed bars are marked.
  const failing = api1.runs.find((r) => r.input === "scripted test: exercise tool errors");
  assert.ok(failing, "no run with failing tool calls on page 1");
  await page.goto(base + "/console/activity/" + failing.run_id);
  await page.waitForSelector("[data-testid=timeline][data-ended=true]", { timeout: T });
  const failWant = expected(await events(failing.run_id));
  assert.ok(failWant.failed >= 2, `the run has ${failWant.failed} failed calls`);
  assert.equal(Number(await page.getAttribute("[data-testid=timeline]", "data-failed-tools")), failWant.failed, "failed tool calls");
  await page.focus(".act-bars summary");
  await page.keyboard.press("Enter");
  await page.waitForSelector(".act-bars[open]", { timeout: T });
  assert.equal(await page.locator(".act-bars tr.act-failed").count(), failWant.failed, "the failed calls in the bars' table");
  assert.match(await page.textContent(".act-bars tr.act-failed"), /failed [A-Z_]+/, "a failed bar says its error code");

  // A run followed live: a planned run that waits for a clarification.
  // Its first stream connection is cut halfway (half its events so far and
  // one of them again, as a replay would send it): the page must reconnect
  // from the cursor of the last event it got, drop the repeat, and end with
  // every event once.
  const started = await fetch(base + "/v1/runs", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ spec: { input: PLANNED } }) });
  assert.equal(started.status, 200, "starting the planned run");
  const live = (await started.json()).run;
  await until(async () => (await getJSON("/v1/runs/" + live.run_id)).run.state === "RUN_STATE_WAITING_INPUT", "the planned run waits for its clarification", RUN_TIMEOUT);
  const cursors = [];
  let cutCursor = "";
  await page.route((u) => u.pathname === `/v1/runs/${live.run_id}/events`, async (route) => {
    cursors.push(new URL(route.request().url()).searchParams.get("cursor"));
    if (cursors.length > 1) return route.continue();
    const so = await events(live.run_id);
    const cut = Math.max(2, Math.floor(so.length / 2));
    const part = [...so.slice(0, cut - 1), so[0], so[cut - 1]];
    cutCursor = so[cut - 1].cursor;
    const body = part.map((e) => `id: ${e.cursor}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
    return route.fulfill({ status: 200, headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-store" }, body });
  });
  await page.goto(base + "/console/activity/" + live.run_id);
  await page.waitForSelector("[data-testid=timeline][data-wait-bars]:not([data-wait-bars='0'])[data-open-bars]:not([data-open-bars='0'])", { timeout: RUN_TIMEOUT });
  await page.waitForSelector("[data-testid=stream-status]:text('following live')", { timeout: T });
  assert.equal(cursors[0], "earliest", "the first connection replays from the earliest event");
  assert.equal(cursors[1], cutCursor, "the reconnection does not resume from the last event received");
  const waiting = await dataset(page, "[data-testid=timeline]");
  assert.equal(waiting.ended, "false");
  const asked = (await events(live.run_id)).find((e) => e.type === "clarification_asked");
  assert.ok(asked, "the planned run asked no clarification");
  const answered = await fetch(`${base}/v1/runs/${live.run_id}/input`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ input: { input_id: asked.clarification_asked.question_id, answer: "All segments" } }) });
  assert.equal(answered.status, 200, `answering: ${answered.status} ${await answered.text()}`);
  await page.waitForSelector("[data-testid=timeline][data-ended=true]", { timeout: RUN_TIMEOUT });
  const done = await dataset(page, "[data-testid=timeline]");
  const liveEvs = await events(live.run_id);
  assert.equal(Number(done.events), liveEvs.length, "events lost or repeated while following the run");
  assert.equal(Number(done.duplicates), 1, "the repeated event was not dropped exactly once");
  assert.ok(Number(done.bars) > Number(waiting.bars), `the timeline did not grow: ${waiting.bars} → ${done.bars}`);
  const liveWant = expected(liveEvs);
  assert.equal(Number(done.toolBars), liveWant.tools, "live run: a bar per tool call");
  assert.equal(Number(done.waitBars), liveWant.waits, "live run: a bar per wait");
  assert.ok(Number(done.planBars) >= 2, "live run: the plan steps");
  assert.equal(Number(done.openBars), 0, "open bars after the run ended");
  await page.waitForSelector("[data-testid=run-state]:text('completed')", { timeout: T });
  await page.unrouteAll();
  log("live run", live.run_id, "followed to its end across a reconnection:", done.events, "events,", done.bars, "bars");

  // The conversation filter: the live run's conversation has that run only.
  await page.goto(base + "/console/activity");
  await page.waitForSelector("[data-testid=runs-table] tbody tr", { timeout: T });
  await page.waitForSelector(`[data-testid=conversation-filter] option[value="${live.conversation_id}"]`, { state: "attached", timeout: T });
  await page.selectOption("[data-testid=conversation-filter]", live.conversation_id);
  await page.waitForFunction((id) => {
    const rows = [...document.querySelectorAll("[data-testid=runs-table] tbody tr")];
    return rows.length === 1 && rows[0].dataset.runId === id;
  }, live.run_id, { timeout: T });
  assert.match(page.url(), new RegExp("conversation_id=" + live.conversation_id));

  // A conversation without runs: the empty state, from the address.
  await page.goto(base + "/console/activity?conversation_id=conv_without_runs");
  await page.waitForSelector(".activity .empty-state", { timeout: T });
  assert.match(await page.textContent(".activity .empty-state"), /no runs/);
  assert.equal(await page.inputValue("[data-testid=conversation-filter]"), "conv_without_runs");

  // A run that does not exist: its error, with the API's message.
  await page.goto(base + "/console/activity/run_does_not_exist");
  await page.waitForSelector(".activity [role=alert]", { timeout: T });
  assert.match(await page.textContent(".activity [role=alert]"), /could not be loaded: .+/);
  for (let i = problems.length - 1; i >= 0; i--) if (problems[i].includes("run_does_not_exist") || /status of 404/.test(problems[i])) problems.splice(i, 1);

  // Tablet width: the run's page lays out within 768 px.
  await page.setViewportSize({ width: 768, height: 1024 });
  await page.goto(base + "/console/activity/" + runId);
  await page.waitForSelector("[data-testid=timeline][data-ended=true]", { timeout: T });
  await waitCanvas(page, "[data-testid=timeline-chart]");
  const overflow = await page.evaluate(() => {
    const el = document.querySelector(".activity");
    return el.scrollWidth - el.clientWidth;
  });
  assert.ok(overflow <= 1, `the page overflows the tablet width by ${overflow}px`);
  await page.screenshot({ path: path.join(shots, "activity-tablet.png"), fullPage: true });

  assert.deepEqual(problems, [], "the page reported errors");
  console.log("PASS console activity");
});
