// The dashboard's work-plan checklist, in two parts:
//
// planFixture feeds a recorded event sequence (written by
// planfixture_test.go in the gateway's SSE encoding) to the page's own event
// dispatch, onEvent, and checks the checklist after each event that matters,
// under duplicates and a full replay, from Run.plan, at tablet width and by
// keyboard. It needs nothing from the orchestrator.
//
// planLive asks a complex question whose scripted scenario plans and pauses
// on a clarification inside plan step 2, and checks the checklist from the
// real streams: it appears, ticks off live, survives a reload mid-run and a
// full replay. It needs an orchestrator that classifies and plans; with one
// that does not, it says so and cancels its run.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { log } from "./session.mjs";

export const PLAN_QUESTION = "Browser test, compare Q3 and Q4 2025 revenue by region and by customer segment, ask me which segments to include, and write a report.";

// checklist reads the plan panel as a person (or a screen reader) sees it.
export async function checklist(page) {
  return page.evaluate(() => {
    const box = document.getElementById("plan");
    const badge = document.getElementById("complexity");
    const items = [...document.querySelectorAll("#plan-steps > li")];
    return {
      shown: !box.hidden,
      source: box.dataset.source || "",
      revision: Number(box.dataset.revision || 0),
      revisionPill: document.getElementById("plan-revision").hidden ? "" : document.getElementById("plan-revision").textContent,
      reason: document.getElementById("plan-reason").hidden ? "" : document.getElementById("plan-reason").textContent,
      progress: document.getElementById("plan-progress").textContent,
      complexity: badge.hidden ? "" : badge.textContent,
      marks: items.map((li) => li.querySelector(".plan-mark").textContent).join(""),
      statuses: items.map((li) => li.dataset.status),
      steps: items.map((li) => Number(li.dataset.step)),
      descriptions: items.map((li) => li.querySelector(".plan-desc").textContent),
      current: items.filter((li) => li.getAttribute("aria-current") === "step").map((li) => Number(li.dataset.step)),
      warnings: [...document.querySelectorAll("#warning-list li")].map((li) => li.textContent),
      html: box.outerHTML + document.getElementById("warnings").outerHTML + badge.outerHTML,
    };
  });
}

// feed resets the run view and dispatches events through onEvent, as the
// EventSource listeners do.
async function feed(page, events, { reset = false } = {}) {
  await page.evaluate(([evs, fresh]) => {
    if (fresh) {
      if (state.es) { state.es.close(); state.es = null; }
      state.runId = "run_plan_fixture";
      resetTimeline();
      document.getElementById("run-head").hidden = false;
      document.getElementById("run-title").textContent = state.runId;
    }
    for (const ev of evs) onEvent(JSON.parse(JSON.stringify(ev)));
  }, [events, reset]);
}

async function counters(page) {
  return page.evaluate(() => {
    const d = document.getElementById("timeline").dataset;
    return { received: Number(d.received), duplicates: Number(d.duplicates), distinct: Number(d.distinct) };
  });
}

export async function planFixture(page, fixturePath, shots) {
  const events = JSON.parse(fs.readFileSync(fixturePath, "utf8"));
  const bySeq = (n) => events.find((e) => Number(e.seq) === n);
  const upTo = (n) => events.filter((e) => Number(e.seq) <= n);
  const seqOf = (type, k = 1) => Number(events.filter((e) => e.type === type)[k - 1].seq);
  assert.ok(events.length >= 10 && bySeq(1).type === "start", "plan fixture: unexpected shape");

  // Step by step, as the events arrive.
  await feed(page, upTo(1), { reset: true });
  let c = await checklist(page);
  assert.equal(c.complexity, "complex", "fixture: complexity badge after start");
  assert.ok(!c.shown, "fixture: plan shown before any work_plan");

  const plan1 = seqOf("work_plan", 1);
  await feed(page, events.slice(1, plan1));
  c = await checklist(page);
  assert.ok(c.shown, "fixture: no plan after work_plan");
  assert.equal(c.marks, "\u2610\u2610\u2610", "fixture: revision 1 is three pending steps");
  assert.equal(c.revisionPill, "", "fixture: a revision pill on revision 1");
  assert.match(c.progress, /^0 of 3 steps done$/, "fixture: progress after work_plan");

  const start1 = seqOf("plan_step_start", 1);
  await feed(page, events.slice(plan1, start1));
  c = await checklist(page);
  assert.equal(c.marks, "\u25B6\u2610\u2610", "fixture: step 1 running");
  assert.deepEqual(c.current, [1], "fixture: aria-current on step 1");
  assert.match(c.progress, /step 1 running: Revenue by region/, "fixture: progress names the running step");

  const end1 = seqOf("plan_step_end", 1);
  await feed(page, events.slice(start1, end1));
  c = await checklist(page);
  assert.equal(c.marks, "\u2713\u2610\u2610", "fixture: step 1 ticked off");
  assert.deepEqual(c.current, [], "fixture: no current step between steps");
  assert.match(c.progress, /^1 of 3 steps done$/);

  const plan2 = seqOf("work_plan", 2);
  await feed(page, events.slice(end1, plan2));
  c = await checklist(page);
  assert.equal(c.revision, 2, "fixture: revision 2 shown");
  assert.equal(c.revisionPill, "revision 2");
  assert.match(c.reason, /^Revised: the regions diverge/, "fixture: the revision's reason");
  assert.equal(c.marks, "\u2713\u2610\u2610\u2610", "fixture: revision 2 replaces the plan (four steps, step 1 done)");
  assert.match(c.descriptions[1], /customer segment/);

  const end2 = seqOf("plan_step_end", 2);
  await feed(page, events.slice(plan2, end2));
  c = await checklist(page);
  assert.equal(c.marks, "\u2713\u2717\u2610\u2610", "fixture: step 2 failed");
  assert.equal(c.statuses[1], "failed");

  await feed(page, events.slice(end2));
  const full = await checklist(page);
  assert.equal(full.marks, "\u2713\u2717\u2713\u2717", "fixture: final marks");
  assert.deepEqual(full.statuses, ["done", "failed", "done", "skipped"]);
  assert.equal(full.progress, "2 of 4 steps done, 1 failed, 1 skipped");
  assert.equal(full.warnings.length, 1, "fixture: one warning");
  assert.match(full.warnings[0], /PLAN_OUT_OF_STEPS.*step limit/);
  const types = await page.evaluate(() => [...document.querySelectorAll("#timeline li")].map((li) => li.className));
  for (const t of ["ev-work_plan", "ev-plan_step_start", "ev-plan_step_end", "ev-warning"]) {
    assert.ok(types.includes(t), `fixture: no ${t} in the timeline`);
  }
  log(`plan fixture: ${events.length} events; checklist ${full.marks} (${full.progress}), revision ${full.revision}`);

  // A full replay over the same view: every event a duplicate, nothing
  // doubled or changed.
  await feed(page, events);
  let again = await checklist(page);
  let n = await counters(page);
  assert.equal(n.duplicates, events.length, "fixture: the replayed events were not all counted as duplicates");
  assert.equal(n.distinct, events.length);
  assert.equal(again.html, full.html, "fixture: a full replay changed the plan panel");

  // Each event twice in a row from a fresh view, and a replay in reverse
  // after it: the same panel as one clean pass.
  await feed(page, events.flatMap((e) => [e, e]), { reset: true });
  await feed(page, [...events].reverse());
  again = await checklist(page);
  n = await counters(page);
  assert.equal(n.duplicates, 2 * events.length, "fixture: duplicates in a doubled replay");
  assert.equal(again.html, full.html, "fixture: a replay with duplicates built another panel");

  // The run record's plan (Run.plan), as selectRun hands it over.
  const rev2 = JSON.parse(JSON.stringify(bySeq(plan2).work_plan));
  rev2.steps.forEach((s, i) => { s.status = ["PLAN_STEP_STATUS_COMPLETED", "PLAN_STEP_STATUS_FAILED", "PLAN_STEP_STATUS_COMPLETED", "PLAN_STEP_STATUS_SKIPPED"][i]; });
  const record = { query_complexity: "QUERY_COMPLEXITY_COMPLEX", complexity_signals: ["long"], plan: rev2 };
  const fromRecord = (run) => page.evaluate((r) => planFromRun(r), run);
  const tail = events.filter((e) => Number(e.seq) > end2); // the early events are gone

  // The record before a full replay: never shown (it is ahead of the
  // replay), so the checklist never jumps back; the events build it.
  await feed(page, [], { reset: true });
  await fromRecord(record);
  c = await checklist(page);
  assert.ok(!c.shown, "record: Run.plan shown while the events can rebuild the plan");
  assert.equal(c.complexity, "complex", "record: no complexity from the run record");
  await feed(page, events);
  assert.equal((await checklist(page)).html, full.html, "record: a record before a full replay changed the panel");

  // The record, then a replay whose start is gone: the record fills in.
  await feed(page, [], { reset: true });
  await fromRecord(record);
  await feed(page, tail);
  c = await checklist(page);
  assert.equal(c.source, "run", "record: a replay without its start did not use Run.plan");
  assert.equal(c.marks, full.marks, "record then tail");
  assert.deepEqual(c.descriptions, full.descriptions);

  // The tail first (placeholders for the steps it does not describe), then
  // the record: its descriptions, and no step moved back.
  await feed(page, tail, { reset: true });
  c = await checklist(page);
  assert.equal(c.marks, "\u2610\u2610\u2713\u2717", "tail alone");
  assert.equal(c.descriptions[0], "1. Step 1");
  const behind = JSON.parse(JSON.stringify(record));
  behind.plan.steps[2].status = "PLAN_STEP_STATUS_IN_PROGRESS"; // a snapshot older than the tail
  await fromRecord(behind);
  c = await checklist(page);
  assert.equal(c.marks, full.marks, "tail then an older record: a step moved back");
  assert.deepEqual(c.descriptions, full.descriptions);

  // A finished run whose events say nothing of a plan: the record's.
  await feed(page, [bySeq(1), events.at(-1)], { reset: true });
  await fromRecord(record);
  c = await checklist(page);
  assert.equal(c.source, "run");
  assert.equal(c.marks, full.marks, "finished run: Run.plan not shown");

  // Hostile or malformed plan events: no page error, bounded.
  await feed(page, [
    { seq: "1000", type: "work_plan", work_plan: { revision: 99, steps: [{ step_number: -1 }, { step_number: 1e9 }, { description: "no number" }] } },
    { seq: "1001", type: "plan_step_start", plan_step_start: { step_number: 5000000 } },
    { seq: "1002", type: "plan_step_end" },
    { seq: "1003", type: "warning" },
    { seq: "1004", type: "work_plan", work_plan: { revision: 100, steps: Array.from({ length: 500 }, (_, i) => ({ step_number: i + 1, description: "<img src=x onerror=alert(1)>" })) } },
  ]);
  c = await checklist(page);
  assert.equal(c.steps.length, 200, "fixture: a 500-step plan is not cut at 200 steps");
  assert.equal(c.descriptions[0], "1. <img src=x onerror=alert(1)>", "fixture: a description is not shown as text");

  // Random event sequences (a seeded generator, so a failure repeats):
  // no page error, at most 200 steps, and the same panel whether the
  // sequence arrives once or with earlier events delivered again in between.
  const out = await page.evaluate(() => {
    let seed = 23;
    const rnd = (n) => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n; };
    const statuses = ["PLAN_STEP_STATUS_PENDING", "PLAN_STEP_STATUS_IN_PROGRESS", "PLAN_STEP_STATUS_COMPLETED",
      "PLAN_STEP_STATUS_FAILED", "PLAN_STEP_STATUS_SKIPPED", "BOGUS", 7, null];
    const pick = (a) => a[rnd(a.length)];
    const num = () => pick([0, 1, 2, 3, 5, -1, 250, 1e12, "3", "x", null, 2.5]);
    const gen = (n) => Array.from({ length: n }, (_, i) => {
      const type = pick(["work_plan", "plan_step_start", "plan_step_end", "warning", "start", "stream_reset", "act"]);
      const steps = Array.from({ length: rnd(6) }, () => ({ step_number: num(), description: pick(["a", "", "<b>x</b>", null]), status: pick(statuses) }));
      const payload = { revision: num(), step_number: num(), total_steps: num(), status: pick(statuses), success: rnd(2) === 1,
        steps, reason: pick(["", "r"]), message: "m", code: "C", query_complexity: pick(["QUERY_COMPLEXITY_COMPLEX", "", 3]) };
      return { seq: String(i + 1), type, [type]: rnd(8) === 0 ? null : payload };
    });
    const html = () => ["plan", "warnings", "complexity"].map((id) => document.getElementById(id).outerHTML).join("");
    const fresh = () => { state.runId = "run_plan_random"; resetTimeline(); };
    const results = [];
    for (let round = 0; round < 20; round++) {
      const evs = gen(1 + rnd(80));
      fresh();
      for (const ev of evs) onEvent(structuredClone(ev));
      const once = html();
      fresh();
      for (let i = 0; i < evs.length; i++) {
        onEvent(structuredClone(evs[i]));
        if (rnd(3) === 0) onEvent(structuredClone(evs[rnd(i + 1)])); // an earlier event again
      }
      results.push({ same: html() === once, steps: document.querySelectorAll("#plan-steps > li").length });
    }
    return results;
  });
  assert.ok(out.every((r) => r.same), `random sequences: a redelivered event changed the panel in rounds ${out.map((r, i) => r.same ? "" : i).filter(String)}`);
  assert.ok(out.every((r) => r.steps <= 200), "random sequences: more than 200 steps shown");
  log(`plan fixture: ${out.length} random sequences, each the same with redeliveries`);

  // Back to the fixture for the looks: tablet width, keyboard, a11y.
  await feed(page, events, { reset: true });
  await page.setViewportSize({ width: 768, height: 1024 });
  try {
    const fit = await page.evaluate(() => {
      const box = document.getElementById("plan").getBoundingClientRect();
      const items = [...document.querySelectorAll("#plan-steps > li summary")].map((s) => s.getBoundingClientRect());
      return {
        pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
        left: box.left, right: box.right,
        itemsInside: items.every((r) => r.left >= box.left - 0.5 && r.right <= box.right + 0.5 && r.height >= 16),
      };
    });
    assert.ok(fit.pageWidth <= fit.viewport, `tablet: the page scrolls sideways (${fit.pageWidth}px in ${fit.viewport}px)`);
    assert.ok(fit.left >= 0 && fit.right <= fit.viewport, `tablet: the plan panel spans ${fit.left}-${fit.right}px`);
    assert.ok(fit.itemsInside, "tablet: a checklist item overflows the panel or is squashed");
    await page.locator("#plan").scrollIntoViewIfNeeded();
    const shot = path.join(shots, "plan-tablet.png");
    await page.screenshot({ path: shot, fullPage: true });
    log(`plan fixture at tablet width: panel ${Math.round(fit.left)}-${Math.round(fit.right)}px of ${fit.viewport}px; screenshot ${shot}`);
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
  }

  // Keyboard: Tab reaches the steps, Enter opens one.
  await page.evaluate(() => { document.activeElement && document.activeElement.blur(); document.getElementById("cancel").focus(); });
  let reached = false;
  for (let i = 0; i < 60 && !reached; i++) {
    await page.keyboard.press("Tab");
    reached = await page.evaluate(() => !!document.activeElement.closest("#plan-steps summary"));
  }
  assert.ok(reached, "keyboard: Tab never reaches a plan step");
  await page.keyboard.press("Enter");
  const opened = await page.evaluate(() => {
    const d = document.activeElement.closest("details");
    return { open: d.open, text: d.querySelector("dl").textContent };
  });
  assert.ok(opened.open, "keyboard: Enter does not open the step");
  assert.match(opened.text, /Expected.*a table per region and half/, "keyboard: the opened step does not show its expected output");
  // An open step stays open while events redraw the panel.
  await feed(page, events);
  assert.ok(await page.evaluate(() => document.querySelector("#plan-steps details").open), "an open step closed on redraw");

  const a11y = await page.evaluate(() => ({
    list: document.getElementById("plan-steps").tagName,
    items: [...document.getElementById("plan-steps").children].every((c) => c.tagName === "LI"),
    live: document.getElementById("plan-progress").getAttribute("aria-live"),
    role: document.getElementById("plan-progress").getAttribute("role"),
    marksHidden: [...document.querySelectorAll(".plan-mark")].every((m) => m.getAttribute("aria-hidden") === "true"),
    statusText: [...document.querySelectorAll(".plan-status")].map((s) => s.textContent),
    labelled: document.getElementById("plan").getAttribute("aria-labelledby"),
    warningsLive: document.getElementById("warning-list").getAttribute("aria-live"),
  }));
  assert.equal(a11y.list, "OL", "a11y: the checklist is not an ordered list");
  assert.ok(a11y.items, "a11y: the checklist has non-item children");
  assert.equal(a11y.live, "polite"); assert.equal(a11y.role, "status");
  assert.ok(a11y.marksHidden, "a11y: the check marks are read out");
  assert.deepEqual(a11y.statusText, ["done", "failed", "done", "skipped"], "a11y: steps do not say their status in words");
  assert.equal(a11y.labelled, "plan-title"); assert.equal(a11y.warningsLive, "polite");
  log("plan fixture: replay with duplicates, Run.plan, hostile events, tablet width, keyboard and a11y checks passed");
}

// recordTicks keeps, in window.__planTicks, each distinct state the
// checklist's marks go through from now on (until the page is reloaded).
async function recordTicks(page) {
  await page.evaluate(() => {
    if (window.__planObserver) window.__planObserver.disconnect();
    const ol = document.getElementById("plan-steps");
    const marks = () => [...ol.querySelectorAll(".plan-mark")].map((m) => m.textContent).join("");
    window.__planTicks = [marks()].filter(Boolean);
    window.__planObserver = new MutationObserver(() => {
      const m = marks();
      if (m && m !== window.__planTicks.at(-1)) window.__planTicks.push(m);
    });
    window.__planObserver.observe(ol, { subtree: true, childList: true, characterData: true });
  });
}

// neverBack fails when a step's mark goes back (done to running, running
// to pending) from one drawn state to the next.
const RANK = { "\u2610": 0, "\u25B6": 1, "\u2713": 2, "\u2717": 2 };
function neverBack(ticks, what) {
  for (let i = 1; i < ticks.length; i++) {
    const a = [...ticks[i - 1]], b = [...ticks[i]];
    if (a.length !== b.length) continue; // a revision
    assert.ok(a.every((m, k) => RANK[b[k]] >= RANK[m]), `plan live ${what}: the checklist moved back: ${ticks.join(" → ")}`);
  }
}

function isSubsequence(want, got) {
  let i = 0;
  for (const g of got) if (i < want.length && g === want[i]) i++;
  return i === want.length;
}

// planLive runs the planned scenario through the suite. It returns true
// when the orchestrator planned (and every check ran), false when it does
// not plan yet.
export async function planLive(page, { startRun, waitEnded, reload, timeline, consistent, serverSeqs, base, shots }) {
  await recordTicks(page);
  const runId = await startRun(page, PLAN_QUESTION);
  await page.waitForFunction(() => [...document.querySelectorAll("#timeline li")].some((li) => li.className === "ev-start"), null, { timeout: 30_000 });
  const complexity = (await checklist(page)).complexity;
  if (!complexity) {
    log("SKIP plan live: the orchestrator of this build reports no query complexity and does not plan; cancelling the run");
    // From here, not from the page: the run may already have ended, and a
    // refused cancel must not count as a page problem.
    const r = await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}/cancel`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ reason: "browser test: this build does not plan" }),
    });
    log(`plan live: cancel answered ${r.status}`);
    await page.waitForFunction(() => document.getElementById("conn").textContent === "ended", null, { timeout: 30_000 });
    return false;
  }
  assert.equal(complexity, "complex", "plan live: the question is not judged complex");
  // The run pauses in step 2 on the clarification: step 1 ticked off, step
  // 2 running, the run not over.
  await page.waitForSelector("#question:not([hidden])", { timeout: 60_000 });
  let c = await checklist(page);
  const mid = await timeline(page);
  assert.notEqual(mid.conn, "ended", "plan live: the stream ended while the run waits");
  assert.ok(c.shown, "plan live: no checklist");
  assert.equal(c.marks, "\u2713\u25B6", `plan live: mid-run checklist ${c.marks} (${c.progress})`);
  assert.deepEqual(c.current, [2]);
  consistent(mid, "plan live mid-run");
  // Each event is its own task, so the page drew every state in between:
  // the checklist ticked off as the run went, not only at the end.
  const ticks = await page.evaluate(() => window.__planTicks);
  // (The orchestrator publishes the plan with step 1 already started, so
  // the all-pending state may never be drawn.)
  assert.ok(isSubsequence(["\u25B6\u2610", "\u2713\u2610", "\u2713\u25B6"], ticks),
    `plan live: the checklist did not tick off step by step: ${ticks.join(" → ")}`);
  log(`plan live: mid-run ${c.marks} "${c.progress}"; reloading`);
  await reload(page, runId, mid.distinct);
  await page.waitForSelector("#question:not([hidden])", { timeout: 10_000 });
  const after = await checklist(page);
  assert.equal(after.marks, c.marks, "plan live: the checklist changed across the reload");
  assert.equal(after.html, c.html, "plan live: the reloaded plan panel differs");
  consistent(await timeline(page), "plan live after reload");
  await recordTicks(page);
  await page.click("#q-options button:text-is('All segments')");
  const end = await waitEnded(page);
  consistent(end, "plan live at the end");
  c = await checklist(page);
  assert.equal(c.marks, "\u2713\u2713", `plan live: final checklist ${c.marks}`);
  assert.equal(c.progress, "2 of 2 steps done");
  const lastTicks = await page.evaluate(() => window.__planTicks);
  neverBack(ticks, "before the reload");
  neverBack(lastTicks, "after the reload");
  assert.ok(isSubsequence(["\u2713\u25B6", "\u2713\u2713"], lastTicks), `plan live: after the answer ${lastTicks.join(" → ")}`);
  log(`plan live: ticks ${ticks.join(" → ")} | reload | ${lastTicks.join(" → ")}`);
  assert.match(end.answer, /Plan checklist report/);
  // The run record's plan says the same.
  const rec = await (await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}`)).json();
  assert.equal(rec.run.query_complexity, "QUERY_COMPLEXITY_COMPLEX");
  assert.deepEqual((rec.run.plan.steps || []).map((s) => s.status), ["PLAN_STEP_STATUS_COMPLETED", "PLAN_STEP_STATUS_COMPLETED"]);
  // A full replay (reload after the end) builds the same panel, once.
  await reload(page, runId, end.distinct);
  await page.waitForFunction(() => document.getElementById("conn").textContent === "ended", null, { timeout: 20_000 });
  const replay = await checklist(page);
  consistent(await timeline(page), "plan live replay");
  assert.equal(replay.html, c.html, "plan live: the replayed plan panel differs");
  const server = await serverSeqs(runId);
  assert.equal((await timeline(page)).distinct, server.length);
  const shot = path.join(shots, "plan-live.png");
  await page.screenshot({ path: shot, fullPage: true });
  await page.setViewportSize({ width: 768, height: 1024 });
  try {
    const fit = await page.evaluate(() => ({
      pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
      right: document.getElementById("plan").getBoundingClientRect().right,
    }));
    assert.ok(fit.pageWidth <= fit.viewport && fit.right <= fit.viewport, `plan live at tablet width: page ${fit.pageWidth}px, panel to ${fit.right}px in ${fit.viewport}px`);
    await page.screenshot({ path: path.join(shots, "plan-live-tablet.png") });
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 });
  }
  log(`plan live: ${c.marks} "${c.progress}", same after a mid-run reload and a full replay; screenshot ${shot}`);
  await planRevisionLive(page, { startRun, waitEnded, timeline, consistent });
  return true;
}

// REVISION_QUESTION is the shipped scenario plan-revision
// (examples/scenarios): a two-step plan revised to three steps after
// step 1, with a reason.
export const REVISION_QUESTION = "Analyse 2025 revenue by region and by product category, compare the two halves of the year, and write a report.";

async function planRevisionLive(page, { startRun, waitEnded, timeline, consistent }) {
  await recordTicks(page);
  await startRun(page, REVISION_QUESTION);
  const end = await waitEnded(page);
  consistent(end, "plan revision");
  const c = await checklist(page);
  const ticks = await page.evaluate(() => window.__planTicks);
  assert.equal(c.revision, 2, `plan revision: revision ${c.revision} shown (ticks ${ticks.join(" → ")})`);
  assert.equal(c.revisionPill, "revision 2");
  assert.match(c.reason, /^Revised: \S/, "plan revision: the reason is not shown");
  assert.equal(c.marks, "\u2713\u2713\u2713", `plan revision: final checklist ${c.marks}`);
  assert.ok(isSubsequence(["\u25B6\u2610", "\u2713\u2610\u2610", "\u2713\u2713\u2713"], ticks),
    `plan revision: the two-step plan was not replaced by the three-step one: ${ticks.join(" → ")}`);
  assert.ok(end.types.filter((t) => t === "work_plan").length >= 2, "plan revision: fewer than two work_plan events in the timeline");
  log(`plan revision: ${ticks.join(" → ")}; ${c.reason}`);
}
