import assert from "node:assert/strict";
import { test } from "node:test";
import type { Run } from "./api.ts";
import { activeConversations, bucketRuns, collectRuns, firstDay, recentFailures, runsOption, utcDay, type RunPage } from "./overview.ts";
import { rng } from "./testrand.ts";

const run = (id: string, created: string, state = "RUN_STATE_COMPLETED", extra: Partial<Run> = {}): Run => ({ run_id: id, created_at: created, state, ...extra });

// pager serves runs (newest first) in pages of size, counting the calls.
function pager(runs: Run[], size: number) {
  const calls: string[] = [];
  const fetch = async (token: string): Promise<RunPage> => {
    calls.push(token);
    const from = token ? Number(token) : 0;
    const next = from + size;
    return { runs: runs.slice(from, next), next_page_token: next < runs.length ? String(next) : "" };
  };
  return { fetch, calls };
}

test("days are UTC: a run late in the evening west of Greenwich is on the next UTC day", () => {
  assert.equal(utcDay("2026-12-04T23:30:00-05:00"), "2026-12-05");
  assert.equal(utcDay("2026-12-05T00:00:00Z"), "2026-12-05");
  assert.equal(utcDay("not a time"), "");
  assert.equal(utcDay(undefined), "");
  assert.equal(firstDay("2026-12-05", 30), "2026-11-06");
});

test("runs are bucketed per UTC day by state, every day present, outside runs left out", () => {
  const b = bucketRuns([
    run("a", "2026-12-05T10:00:00Z"),
    run("b", "2026-12-05T11:00:00Z", "RUN_STATE_FAILED"),
    run("c", "2026-12-04T23:59:59Z", "RUN_STATE_CANCELLED"),
    run("d", "2026-12-03T01:00:00+02:00", "RUN_STATE_RUNNING"), // 2026-12-02 UTC
    run("e", "2026-11-01T00:00:00Z"), // before the 30 days
    run("f", "", "RUN_STATE_FAILED"), // no time
  ], "2026-12-05", 30);
  assert.equal(b.days.length, 30);
  assert.equal(b.days[29], "2026-12-05");
  assert.equal(b.total, 4);
  assert.equal(b.completed[29], 1);
  assert.equal(b.failed[29], 1);
  assert.equal(b.cancelled[28], 1);
  assert.equal(b.other[26], 1);
  assert.equal(b.completed.reduce((x, v) => x + v, 0), 1);
  const o = runsOption(b) as { series: { data: number[]; stack: string }[]; tooltip: { renderMode: string } };
  assert.equal(o.series.length, 4);
  assert.ok(o.series.every((s) => s.data.length === 30 && s.stack === "runs"));
  assert.equal(o.tooltip.renderMode, "richText");
});

test("random runs: every counted run is in its own day and state, none twice", () => {
  const r = rng(29);
  const states = ["RUN_STATE_COMPLETED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED", "RUN_STATE_RUNNING", "RUN_STATE_QUEUED", "", "junk"];
  const today = "2026-03-02";
  const from = Date.parse(firstDay(today, 30) + "T00:00:00Z");
  const end = Date.parse(today + "T00:00:00Z") + 86_400_000;
  for (let k = 0; k < 200; k++) {
    const runs: Run[] = [];
    let inside = 0;
    for (let i = 0; i < 50; i++) {
      const t = from - 5 * 86_400_000 + Math.floor(r() * 40 * 86_400_000);
      const offset = Math.floor(r() * 25) - 12;
      const sign = offset < 0 ? "-" : "+";
      const local = new Date(t + offset * 3_600_000).toISOString().slice(0, 19) + sign + String(Math.abs(offset)).padStart(2, "0") + ":00";
      runs.push(run("r" + i, r() < 0.05 ? "garbage" : local, states[Math.floor(r() * states.length)] ?? ""));
      if (runs[i]?.created_at !== "garbage" && t >= from && t < end) inside++;
    }
    const b = bucketRuns(runs, today, 30);
    assert.equal(b.total, inside);
    const sum = [b.completed, b.failed, b.cancelled, b.other].flat().reduce((x, v) => x + v, 0);
    assert.equal(sum, b.total);
    assert.ok([b.completed, b.failed, b.cancelled, b.other].every((a) => a.length === 30 && a.every((v) => Number.isInteger(v) && v >= 0)));
  }
});

test("runs are read page by page until one reaches past the days", async () => {
  const runs: Run[] = [];
  // Ten runs a day from today back 40 days, newest first.
  for (let d = 0; d < 40; d++) for (let i = 0; i < 10; i++) runs.push(run(`r${d}-${i}`, new Date(Date.parse("2026-12-05T20:00:00Z") - d * 86_400_000 - i * 60_000).toISOString()));
  const p = pager(runs, 50);
  const got = await collectRuns(p.fetch, "2026-12-05", 30, 1000);
  assert.equal(got.bound, null);
  assert.equal(got.runs.length, 300, "only the 30 days' runs");
  assert.equal(p.calls.length, 7, "stops at the page that reached past the first day");
  assert.equal(bucketRuns(got.runs, "2026-12-05", 30).total, 300);
});

test("the runs bound: at most maxRuns are read, and the page says so", async () => {
  const runs: Run[] = [];
  for (let i = 0; i < 2500; i++) runs.push(run("r" + i, new Date(Date.parse("2026-12-05T20:00:00Z") - i * 600_000).toISOString()));
  const p = pager(runs, 200);
  const got = await collectRuns(p.fetch, "2026-12-05", 30, 1000);
  assert.equal(got.bound, "runs");
  assert.equal(got.runs.length, 1000);
  assert.equal(p.calls.length, 5);
  assert.equal(got.oldest, utcDay(runs[999]?.created_at));
  // A page larger than the bound: cut inside it.
  const big = await collectRuns(pager(runs, 1500).fetch, "2026-12-05", 30, 1000);
  assert.equal(big.bound, "runs");
  assert.equal(big.runs.length, 1000);
  // Exactly maxRuns runs and no more: everything was read.
  const exact = await collectRuns(pager(runs.slice(0, 1000), 200).fetch, "2026-12-05", 30, 1000);
  assert.equal(exact.bound, null);
  // An empty list.
  const none = await collectRuns(pager([], 200).fetch, "2026-12-05");
  assert.deepEqual([none.runs.length, none.bound, none.pages], [0, null, 1]);
});

test("the latest failures, newest first, with their error", () => {
  const f = recentFailures([
    run("a", "2026-12-05T10:00:00Z", "RUN_STATE_FAILED", { error: { code: "BUDGET_EXCEEDED", message: "max_steps_per_run" }, input: "q1" }),
    run("b", "2026-12-05T12:00:00Z", "RUN_STATE_FAILED", { error: { code: "MODEL_ERROR" } }),
    run("c", "2026-12-05T13:00:00Z"),
    run("d", "2026-12-04T13:00:00Z", "RUN_STATE_FAILED", { error: "junk" as unknown as object }),
  ], 2);
  assert.deepEqual(f.map((x) => [x.runId, x.code, x.message]), [["b", "MODEL_ERROR", ""], ["a", "BUDGET_EXCEEDED", "max_steps_per_run"]]);
});

test("active conversations are counted and the latest kept", () => {
  const a = activeConversations([
    { conversation_id: "1", state: "CONVERSATION_STATE_ACTIVE", last_activity_at: "2026-12-01T00:00:00Z" },
    { conversation_id: "2", state: "CONVERSATION_STATE_ENDED", last_activity_at: "2026-12-05T00:00:00Z" },
    { conversation_id: "3", state: "CONVERSATION_STATE_ACTIVE", last_activity_at: "2026-12-04T00:00:00Z" },
    { conversation_id: "4", state: "CONVERSATION_STATE_ACTIVE", created_at: "2026-12-03T00:00:00Z" },
  ], false, 2);
  assert.equal(a.count, 3);
  assert.deepEqual(a.recent.map((c) => c.conversation_id), ["3", "4"]);
  assert.equal(activeConversations([], true).more, true);
});
