// Drives the dashboard in headless Chromium as a person would: start runs
// from the form, watch the timeline fill in, reload mid-run, answer a
// clarification, and check that every event is shown exactly once, in seq
// order, matching what the server retained. Run by browser_test.go, which
// starts the suite and sets BAAGENT_URL, CHROMIUM, SCREENSHOT_DIR and
// USER_DATA_DIR. Prints "PASS dashboard" at the end; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { planFixture, planLive } from "./plan.mjs";
import { log, mustEnv, session } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const DEEP_DIVE = "Give me a full deep dive of the sales data, every table and every monthly breakdown.";
const CLARIFY = "Browser test, ask me which quarters to compare.";
const RUN_TIMEOUT = 90_000;

// timeline reads what the page shows: the seqs of the timeline items and
// the delivery counters the dashboard keeps on the timeline element.
async function timeline(page) {
  return page.evaluate(() => {
    const tl = document.getElementById("timeline");
    const num = (k) => Number(tl.dataset[k] || 0);
    return {
      seqs: [...tl.querySelectorAll("li[data-seq]")].map((li) => Number(li.dataset.seq)),
      types: [...tl.querySelectorAll("li")].map((li) => li.className.replace(/^ev-/, "")),
      received: num("received"), duplicates: num("duplicates"), lastSeq: num("lastSeq"), distinct: num("distinct"),
      events: document.getElementById("u-events").textContent,
      conn: document.getElementById("conn").textContent,
      state: document.getElementById("run-state").textContent,
      answer: document.getElementById("answer-box").hidden ? "" : document.getElementById("final").textContent,
      runId: location.hash.slice(1),
    };
  });
}

// consistent checks one view: no event twice, none missing from 1 to the
// last seq, items in seq order.
function consistent(t, what) {
  assert.equal(t.duplicates, 0, `${what}: ${t.duplicates} duplicate events reached the page`);
  assert.equal(t.received, t.distinct, `${what}: received ${t.received} events but ${t.distinct} distinct`);
  assert.equal(t.distinct, t.lastSeq, `${what}: ${t.distinct} distinct events up to seq ${t.lastSeq}: some are missing`);
  assert.equal(t.events, String(t.distinct), `${what}: the Events counter shows ${t.events}`);
  for (let i = 1; i < t.seqs.length; i++) {
    assert.ok(t.seqs[i] > t.seqs[i - 1], `${what}: timeline seqs out of order or repeated: ${t.seqs.join(",")}`);
  }
  assert.ok(!t.types.includes("stream_reset"), `${what}: a stream_reset was shown for a fresh run`);
}

// serverSeqs reads the run's whole retained stream over SSE from Node, to
// compare with what the page shows.
async function serverSeqs(runId) {
  const r = await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}/events?cursor=earliest`);
  assert.equal(r.status, 200, `SSE replay of ${runId}: status ${r.status}`);
  const body = await r.text(); // the stream ends after the terminal event
  const seqs = [];
  for (const line of body.split("\n")) {
    if (!line.startsWith("data: ")) continue;
    const ev = JSON.parse(line.slice(6));
    if (ev.seq) seqs.push(Number(ev.seq));
  }
  return seqs;
}

async function startRun(page, question) {
  await page.fill("#input", question);
  const before = await page.evaluate(() => location.hash);
  await page.click("#start");
  await page.waitForFunction((h) => location.hash.length > 1 && location.hash !== h, before, { timeout: 10_000 });
  const runId = (await timeline(page)).runId;
  log("started run", runId, "for", JSON.stringify(question));
  return runId;
}

async function waitEnded(page) {
  await page.waitForFunction(() => document.getElementById("conn").textContent === "ended", null, { timeout: RUN_TIMEOUT });
  return timeline(page);
}

// reload reloads the page and waits until it shows runId again and has
// replayed at least want events.
async function reload(page, runId, want) {
  await page.reload();
  await page.waitForFunction(([id, n]) => document.getElementById("run-title").textContent === id &&
    Number(document.getElementById("timeline").dataset.distinct || 0) >= n, [runId, want], { timeout: 20_000 });
}

function isPrefix(a, b) { return a.length <= b.length && a.every((v, i) => v === b[i]); }

async function deepDive(page) {
  const runId = await startRun(page, DEEP_DIVE);
  await page.waitForFunction(() => document.querySelectorAll("#timeline li[data-seq]").length >= 3, null, { timeout: RUN_TIMEOUT });
  const before = await timeline(page);
  consistent(before, "deep dive before reload");
  const midRun = before.conn !== "ended";
  log(`deep dive: ${before.distinct} events shown (last seq ${before.lastSeq}, connection ${before.conn}); reloading${midRun ? " mid-run" : " (run already over)"}`);
  await reload(page, runId, before.distinct);
  const after = await waitEnded(page);
  consistent(after, "deep dive after reload");
  assert.ok(isPrefix(before.seqs, after.seqs), `deep dive: timeline before reload ${before.seqs} is not a prefix of after ${after.seqs}`);
  assert.match(after.answer, /Deep dive complete/, "deep dive: final answer not shown");
  assert.equal(after.types.at(-1), "complete", "deep dive: the timeline does not end with complete");
  for (const t of ["start", "act", "observe", "step_start", "step_end"]) {
    assert.ok(after.types.includes(t), `deep dive: no ${t} in the timeline (${after.types.join(",")})`);
  }
  await checkGantt(page, runId);
  const server = await serverSeqs(runId);
  assert.equal(after.lastSeq, server.at(-1), `deep dive: page ends at seq ${after.lastSeq}, server at ${server.at(-1)}`);
  assert.equal(after.distinct, server.length, `deep dive: page shows ${after.distinct} events, server retained ${server.length}`);
  await page.waitForFunction(() => document.getElementById("run-state").textContent === "completed", null, { timeout: 10_000 });
  assert.ok(await page.isDisabled("#cancel"), "deep dive: Cancel is still enabled on a completed run");
  const shot = path.join(shots, "deep-dive.png");
  await page.screenshot({ path: shot, fullPage: true });
  log(`deep dive: ${after.distinct} events, seqs 1..${after.lastSeq}, none missing or repeated across the reload; screenshot ${shot}`);
  return midRun;
}

// checkGantt checks the run's timeline chart (steps, model calls and tool
// calls as bars on one time axis) and its trace link.
async function checkGantt(page, runId) {
  const g = await page.evaluate(() => {
    const bars = (kind) => [...document.querySelectorAll("#gantt-rows .bar-" + kind)].map((b) => ({
      left: parseFloat(b.style.left), width: parseFloat(b.style.width), px: b.getBoundingClientRect().width,
      open: b.classList.contains("open"),
    }));
    const link = document.getElementById("trace-link");
    return {
      hidden: document.getElementById("gantt").hidden,
      step: bars("step"), model: bars("model"), tool: bars("tool"),
      traceId: document.getElementById("trace").dataset.traceId || "",
      href: link.hidden ? "" : link.href,
    };
  });
  assert.ok(!g.hidden, "timeline chart hidden");
  const steps = g.step.length;
  assert.ok(steps >= 2, `timeline chart: ${steps} step bars`);
  assert.equal(g.model.length, steps, `timeline chart: ${g.model.length} model bars for ${steps} steps`);
  assert.ok(g.tool.length >= 1, "timeline chart: no tool bar");
  for (const [kind, list] of Object.entries({ step: g.step, model: g.model, tool: g.tool })) {
    for (const b of list) {
      assert.ok(!b.open, `timeline chart: a ${kind} bar is still open after the run ended`);
      assert.ok(b.left >= 0 && b.left <= 100 && b.width >= 0 && b.left + b.width <= 100.01, `timeline chart: ${kind} bar at ${b.left}% width ${b.width}%`);
      assert.ok(b.px >= 1, `timeline chart: a ${kind} bar is not drawn (${b.px}px)`);
    }
  }
  // Bars follow time: each step starts after the previous one.
  for (let i = 1; i < steps; i++) assert.ok(g.step[i].left >= g.step[i - 1].left, "timeline chart: steps out of order");
  const rec = await (await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}`)).json();
  assert.match(rec.run.trace_id || "", /^[0-9a-f]{32}$/, "the run record has no trace id");
  assert.equal(g.traceId, rec.run.trace_id, "the page shows another trace id");
  assert.equal(g.href, `http://localhost:16686/trace/${rec.run.trace_id}`, "trace link");
  log(`timeline chart: ${steps} steps, ${g.model.length} model calls, ${g.tool.length} tool calls; trace ${g.traceId}`);
}

async function clarification(page) {
  const runId = await startRun(page, CLARIFY);
  await page.waitForSelector("#question:not([hidden])", { timeout: RUN_TIMEOUT });
  await page.waitForFunction(() => document.getElementById("run-state").textContent === "waiting_input", null, { timeout: 10_000 });
  const before = await timeline(page);
  consistent(before, "clarification before reload");
  assert.notEqual(before.conn, "ended", "clarification: the stream ended while the run waits");
  log(`clarification: waiting for an answer with ${before.distinct} events shown; reloading mid-run`);
  await reload(page, runId, before.distinct);
  await page.waitForSelector("#question:not([hidden])", { timeout: 10_000 });
  assert.equal(await page.textContent("#q-text"), "Should the analysis include Q3 as well as Q4?");
  const replayed = await timeline(page);
  consistent(replayed, "clarification after reload");
  assert.ok(isPrefix(before.seqs, replayed.seqs), `clarification: timeline before reload ${before.seqs} is not a prefix of after ${replayed.seqs}`);
  await page.click("#q-options button:text-is('Q3 and Q4')");
  const after = await waitEnded(page);
  consistent(after, "clarification after the answer");
  assert.ok(isPrefix(replayed.seqs, after.seqs), "clarification: events shown before the answer were replaced");
  assert.ok(after.types.includes("clarification_answered"), "clarification: no clarification_answered in the timeline");
  assert.match(after.answer, /Quarterly revenue as you asked/, "clarification: final answer not shown");
  assert.ok(await page.isHidden("#question"), "clarification: the question is still shown after the answer");
  const server = await serverSeqs(runId);
  assert.equal(after.distinct, server.length, `clarification: page shows ${after.distinct} events, server retained ${server.length}`);
  await page.waitForFunction(() => document.getElementById("run-state").textContent === "completed", null, { timeout: 10_000 });
  const shot = path.join(shots, "clarification.png");
  await page.screenshot({ path: shot, fullPage: true });
  log(`clarification: ${after.distinct} events, none missing or repeated across the reload and the answer; screenshot ${shot}`);
}

await session({ height: 900, failureShot: "failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()} at ${m.location().url}`); });
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`); });
  await page.goto(base + "/");
  await page.waitForFunction(() => document.getElementById("tenant").textContent === "tenant default", null, { timeout: 10_000 });
  await planFixture(page, mustEnv("PLAN_FIXTURE"), shots);
  const midRun = await deepDive(page);
  await clarification(page);
  const planned = await planLive(page, { startRun, waitEnded, reload, timeline, consistent, serverSeqs, base, shots });
  // The runs list shows both runs, completed.
  await page.waitForFunction(() => document.querySelectorAll("#runs li .state-COMPLETED").length >= 2, null, { timeout: 10_000 });
  assert.deepEqual(problems, [], "the page reported errors");
  log(`PASS dashboard (deep dive reloaded ${midRun ? "mid-run" : "after it ended"}; clarification reloaded mid-run; ` +
    `plan checklist from the fixture${planned ? " and live, reloaded mid-run" : ", live plan SKIPPED: this build does not plan"})`);
});
