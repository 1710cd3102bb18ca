import assert from "node:assert/strict";
import { test } from "node:test";
import { addEvents, duration, figures, MAX_BARS, newLog, timeline, traceHref, truncate, tsMs, usage } from "./activity.ts";
import { barText, timelineOption } from "./activityCharts.ts";
import type { RunEvent } from "./chat.ts";
import { rng } from "./testrand.ts";

// at makes a timestamp ms milliseconds (fractions allowed) after a fixed origin.
const T0 = Date.parse("2026-12-05T08:00:00Z");
const at = (ms: number): string => {
  const whole = Math.floor(ms);
  const d = new Date(T0 + whole).toISOString().slice(0, 19);
  const frac = String(Math.round((ms - whole) * 1e6) + whole % 1000 * 1e6).padStart(9, "0");
  return d + "." + frac + "Z";
};
let n = 0;
const ev = (type: string, ms: number, payload: Record<string, unknown> = {}, extra: Partial<RunEvent> = {}): RunEvent => ({ type, seq: ++n, ts: at(ms), [type]: payload, ...extra });

function toolRun(): RunEvent[] {
  n = 0;
  return [
    ev("start", 0, { model: "m" }),
    ev("step_start", 1, { step_number: 1 }),
    ev("cost_update", 5, { model: "m", usage: { prompt_tokens: "100", completion_tokens: "10" }, total_input_tokens: "100", total_output_tokens: "10", step_cost_usd: 0.01, total_cost_usd: 0.01, price_known: true }),
    ev("act", 6, { tool_call_id: "a", tool_name: "sql_query" }),
    ev("act", 6.5, { tool_call_id: "b", tool_name: "glob" }),
    ev("observe", 9, { tool_call_id: "b", tool_name: "glob", success: true }),
    ev("observe", 10, { tool_call_id: "a", tool_name: "sql_query", success: false, error_code: "BAD_SQL", retry_count: 2 }),
    ev("step_end", 11, { step_number: 1, success: true }),
    ev("step_start", 12, { step_number: 2 }),
    ev("cost_update", 20, { model: "m", usage: { prompt_tokens: "150", completion_tokens: "20" }, total_input_tokens: "250", total_output_tokens: "30", step_cost_usd: 0.02, total_cost_usd: 0.03, price_known: true }),
    ev("step_end", 21, { step_number: 2, success: true }),
    ev("complete", 22, {}),
  ];
}

test("timestamps keep their sub-millisecond digits", () => {
  // Epoch milliseconds as doubles keep a quarter of a microsecond.
  assert.ok(Math.abs(tsMs("2026-12-05T08:31:35.308152020Z") - tsMs("2026-12-05T08:31:35.308Z") - 0.15202) < 0.001);
  assert.equal(tsMs("2026-12-05T08:31:35Z"), Date.parse("2026-12-05T08:31:35Z"));
  assert.ok(Number.isNaN(tsMs("yesterday")));
  assert.ok(Number.isNaN(tsMs(12)));
  assert.equal(tsMs(at(6.5)) - T0, 6.5);
});

test("steps, model calls and tool calls become bars; parallel calls get their own lane", () => {
  const tl = timeline(toolRun());
  assert.deepEqual(tl.counts, { plan: 0, step: 2, model: 2, tool: 2, wait: 0 });
  assert.deepEqual(tl.lanes, ["Steps", "Model calls", "Tool calls", "Tool calls 2"]);
  const sql = tl.bars.find((b) => b.label === "sql_query");
  const glob = tl.bars.find((b) => b.label === "glob");
  assert.ok(sql && glob);
  assert.equal(sql.start, 6);
  assert.equal(sql.end, 10);
  assert.ok(sql.failed);
  assert.equal(sql.retries, 2);
  assert.equal(sql.detail, "BAD_SQL");
  assert.notEqual(sql.lane, glob.lane);
  assert.equal(tl.failedTools, 1);
  const model = tl.bars.filter((b) => b.kind === "model");
  assert.deepEqual(model.map((b) => [b.start, b.end]), [[1, 5], [12, 20]]);
  assert.equal(tl.span, 22);
  assert.ok(tl.bars.every((b) => !b.open));
  assert.match(barText(sql), /tool call sql_query · 4 ms · failed BAD_SQL · 2 retries/);
});

test("out-of-order delivery gives the same timeline", () => {
  const evs = toolRun();
  const shuffled = [evs[5], evs[0], evs[9], evs[3], evs[11], evs[1], evs[7], evs[2], evs[10], evs[4], evs[8], evs[6]] as RunEvent[];
  assert.deepEqual(timeline(shuffled), timeline(evs));
});

test("a run in progress: open bars end now, drawn open", () => {
  const evs = toolRun().slice(0, 5); // start, step 1, its model call, two acts
  const tl = timeline(evs, T0 + 50);
  const open = tl.bars.filter((b) => b.open);
  assert.deepEqual(open.map((b) => b.label).sort(), ["glob", "sql_query", "step 1"]);
  for (const b of open) assert.equal(b.end, 50);
  assert.equal(tl.span, 50);
  assert.match(barText(open[0]!), /so far/);
});

test("unmatched ends start at the first event; a finished run closes open bars at its end", () => {
  n = 0;
  const evs = [
    ev("start", 0),
    ev("observe", 4, { tool_call_id: "x", tool_name: "orphan", success: true }),
    ev("act", 5, { tool_call_id: "y", tool_name: "never_observed" }),
    ev("error", 9, { message: "boom" }),
  ];
  const tl = timeline(evs, T0 + 1e6);
  const orphan = tl.bars.find((b) => b.label === "orphan");
  const never = tl.bars.find((b) => b.label === "never_observed");
  assert.ok(orphan && never);
  assert.deepEqual([orphan.start, orphan.end, orphan.open], [0, 4, false]);
  assert.deepEqual([never.start, never.end, never.open], [5, 9, true]);
  assert.equal(tl.span, 9);
});

test("waits for human input, plan steps; sub-agents' mirrored events are left out", () => {
  n = 0;
  const evs = [
    ev("start", 0),
    ev("plan_step_start", 1, { step_number: 1, description: "region table" }),
    ev("clarification_asked", 2, { question_id: "q1", question: "which?" }),
    ev("step_start", 3, { step_number: 9 }, { subagent_run_id: "child" }),
    ev("clarification_answered", 7, { question_id: "q1", answer: "All segments" }),
    ev("decision_asked", 8, { decision_id: "d1" }),
    ev("decision_answered", 9, { decision_id: "d1", timed_out: true }),
    ev("plan_step_end", 10, { step_number: 1, success: true, summary: "done" }),
    ev("complete", 11),
  ];
  const tl = timeline(evs);
  assert.deepEqual(tl.counts, { plan: 1, step: 0, model: 0, tool: 0, wait: 2 });
  const waits = tl.bars.filter((b) => b.kind === "wait");
  assert.deepEqual(waits.map((b) => [b.label, b.start, b.end, b.detail]), [["clarification", 2, 7, "All segments"], ["decision", 8, 9, "timed out"]]);
  assert.match(barText(waits[0]!), /waiting for input \(clarification\) · 5 ms · answer: All segments/);
});

test("events without a time are counted, not drawn; no events, no bars", () => {
  assert.equal(timeline([]).bars.length, 0);
  const tl = timeline([{ type: "act", seq: 1, act: { tool_call_id: "a" } }]);
  assert.equal(tl.bars.length, 0);
  assert.equal(tl.ignored, 1);
});

test("the event log keeps each seq once, whatever order and repeats", () => {
  const evs = toolRun();
  let log = addEvents(newLog(), evs.slice(0, 6));
  log = addEvents(log, evs.slice(3, 9)); // a replay after a reconnect
  log = addEvents(log, [...evs.slice(9)].reverse());
  assert.equal(log.events.length, evs.length);
  assert.equal(log.duplicates, 3);
  assert.deepEqual(log.events.map((e) => e.seq), evs.map((e) => e.seq));
  assert.ok(log.ended);
  const same = addEvents(log, evs.slice(0, 1));
  assert.equal(same.events, log.events, "a repeat changes no events");
  assert.ok(!addEvents(newLog(), [{ type: "complete", seq: 1, subagent_run_id: "c" }]).ended, "a sub-agent's end is not the run's");
});

test("usage: cumulative tokens and cost after each model call", () => {
  const u = usage(toolRun());
  assert.deepEqual(u.map((p) => [p.call, p.inputTokens, p.outputTokens, p.costUsd, p.at]), [[1, 100, 10, 0.01, 5], [2, 250, 30, 0.03, 20]]);
  n = 0;
  const noTotals = usage([ev("cost_update", 1, { usage: { prompt_tokens: 5, completion_tokens: 1 }, step_cost_usd: 0.5 }), ev("cost_update", 2, { usage: { prompt_tokens: 7, completion_tokens: 2 } })]);
  assert.deepEqual(noTotals.map((p) => [p.inputTokens, p.outputTokens, p.costUsd, p.priced]), [[5, 1, 0.5, false], [12, 3, 0.5, false]]);
});

test("figures read Run.metrics with int64s as strings", () => {
  const f = figures({
    run_id: "r", started_at: "2026-12-05T08:31:35.288882370Z", finished_at: "2026-12-05T08:31:35.330854321Z",
    metrics: { total_input_tokens: "8716", total_output_tokens: "78", total_cost_usd: 0.25, unpriced_calls: 1, successful_calls: 1, failed_calls: 2, cost_by_model: { a: 0.05, b: 0.2 } },
  });
  assert.equal(f.inputTokens, 8716);
  assert.equal(f.outputTokens, 78);
  assert.equal(f.costUsd, 0.25);
  assert.equal(f.unpricedCalls, 1);
  assert.equal(f.toolCalls, 3);
  assert.deepEqual(f.costByModel, [["b", 0.2], ["a", 0.05]]);
  assert.ok(Math.abs(f.durationMs - 41.971951) < 0.001);
  assert.ok(Number.isNaN(duration({ run_id: "r" })));
  assert.equal(duration({ run_id: "r", started_at: "2026-12-05T08:00:00Z" }, T0 + 500), 500);
  assert.equal(figures({ run_id: "r" }).inputTokens, 0);
});

test("trace link only with a template and a trace id", () => {
  assert.equal(traceHref("http://j/trace/{trace_id}", "abc"), "http://j/trace/abc");
  assert.equal(traceHref("", "abc"), "");
  assert.equal(traceHref("http://j/trace/{trace_id}", ""), "");
  assert.equal(traceHref("javascript:alert({trace_id})", "abc"), "");
  assert.equal(traceHref("http://j/?q={trace_id}", "a&b"), "http://j/?q=a%26b");
});

test("truncate cuts by code points", () => {
  assert.equal(truncate("héllo  wörld", 7), "héllo …");
  assert.equal(truncate(undefined, 3), "");
  assert.equal(truncate("😀😀😀😀", 3), "😀😀…");
});

test("the timeline option has one data item per bar and a tooltip for each", () => {
  const tl = timeline(toolRun());
  const o = timelineOption(tl) as { series: { data: unknown[] }[]; tooltip: { formatter: (p: unknown) => string; renderMode: string } };
  assert.equal(o.series[0]?.data.length, tl.bars.length);
  assert.equal(o.tooltip.renderMode, "richText");
  assert.match(o.tooltip.formatter({ value: [0, 1, 11, 0] }), /step 1/);
});

test("random event sequences: bars stay within the axis, lanes never overlap, nothing throws", () => {
  const r = rng(29);
  const types = ["start", "step_start", "step_end", "cost_update", "act", "observe", "clarification_asked", "clarification_answered", "decision_asked", "decision_answered", "permission_asked", "permission_replied", "plan_step_start", "plan_step_end", "complete", "error", "thought"];
  const junk = [undefined, null, 3, "x", [], { tool_call_id: 5 }, { step_number: "2" }];
  for (let run = 0; run < 300; run++) {
    const evs: RunEvent[] = [];
    for (let i = 0; i < 1 + Math.floor(r() * 60); i++) {
      const type = types[Math.floor(r() * types.length)] ?? "act";
      const id = "k" + Math.floor(r() * 4);
      const payload = r() < 0.15 ? junk[Math.floor(r() * junk.length)] : { tool_call_id: id, question_id: id, decision_id: id, step_number: Math.floor(r() * 4), success: r() < 0.5, usage: { prompt_tokens: Math.floor(r() * 100) }, total_input_tokens: r() < 0.5 ? undefined : String(Math.floor(r() * 1000)) };
      const ts = r() < 0.1 ? (r() < 0.5 ? "garbage" : undefined) : at(r() * 1000);
      evs.push({ type, seq: r() < 0.1 ? "x" : Math.floor(r() * 80), ts, [type]: payload, ...(r() < 0.1 ? { subagent_run_id: "c" } : {}) } as RunEvent);
    }
    const tl = timeline(evs, T0 + 2000);
    assert.ok(tl.bars.length <= MAX_BARS);
    for (const b of tl.bars) {
      assert.ok(Number.isFinite(b.start) && Number.isFinite(b.end), JSON.stringify(b));
      assert.ok(b.start >= 0 && b.end >= b.start && b.end <= tl.span + 1e-9, JSON.stringify(b));
      assert.ok(b.lane >= 0 && b.lane < tl.lanes.length);
    }
    for (let lane = 0; lane < tl.lanes.length; lane++) {
      const mine = tl.bars.filter((b) => b.lane === lane).sort((a, b) => a.start - b.start);
      for (let i = 1; i < mine.length; i++) assert.ok(mine[i]!.start >= mine[i - 1]!.end, "overlap in lane " + tl.lanes[lane]);
    }
    const u = usage(evs);
    for (let i = 1; i < u.length; i++) assert.ok(u[i]!.inputTokens >= u[i - 1]!.inputTokens && u[i]!.costUsd >= u[i - 1]!.costUsd);
    const log = addEvents(newLog(), evs);
    assert.equal(log.events.length, log.seqs.size);
  }
});
