// The Activity page's pure logic: a run's events as bars on a time axis
// (plan steps, ReAct steps, model calls, tool calls, waits for human
// input), the cumulative tokens and cost of its model calls, and the run
// record's figures (tokens, cost, duration). No DOM: unit-tested with
// node:test.

import type { Run } from "./api.ts";
import type { RunEvent } from "./chat.ts";

export type BarKind = "plan" | "step" | "model" | "tool" | "wait";

export interface Bar {
  kind: BarKind;
  key: string; // what pairs its start and end (e.g. "tool:<call id>")
  label: string; // what it was ("sql_query", "step 2", "clarification")
  lane: number; // index into Timeline.lanes
  start: number; // ms since the timeline's origin
  end: number; // ms since the origin; for an open bar, "now"
  open: boolean; // no end event yet (the run is still going, or it ended without one)
  failed: boolean;
  retries: number; // tool calls: retries made
  detail: string; // error code, answer, …
}

export interface Timeline {
  t0: number; // epoch ms of the origin (the earliest event)
  span: number; // ms from the origin to the latest end
  lanes: string[];
  bars: Bar[];
  counts: Record<BarKind, number>;
  failedTools: number;
  ignored: number; // events without a usable timestamp
}

export const MAX_BARS = 5000;

const str = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : String(v));
const num = (v: unknown): number => {
  const n = typeof v === "number" ? v : Number(v ?? 0);
  return Number.isFinite(n) ? n : 0;
};
const rec = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

// tsMs reads an RFC 3339 timestamp as epoch milliseconds with its
// sub-millisecond digits kept (Date.parse drops them, and a scripted run's
// tool calls last a tenth of a millisecond). NaN when it is not one.
export function tsMs(ts: unknown): number {
  if (typeof ts !== "string") return NaN;
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$/.exec(ts);
  if (!m) return NaN;
  const base = Date.parse((m[1] ?? "") + (m[3] ?? ""));
  if (!Number.isFinite(base)) return NaN;
  const frac = m[2] ? Number("0." + m[2]) * 1000 : 0;
  return base + frac;
}

export const seqOf = (ev: RunEvent): number => Math.trunc(num(ev.seq));

// The events of one run, each once by seq, in seq order: the export and a
// live stream (which may replay after a reconnect) both feed it.
export interface EventLog {
  seqs: Set<number>;
  events: RunEvent[];
  duplicates: number;
  ended: boolean; // the run's own terminal event is in
}

export function newLog(): EventLog {
  return { seqs: new Set(), events: [], duplicates: 0, ended: false };
}

const TERMINAL = new Set(["complete", "error", "cancelled"]);

export function addEvents(log: EventLog, evs: RunEvent[]): EventLog {
  let next: EventLog | null = null;
  for (const ev of evs) {
    if (!ev || typeof ev.type !== "string" || ev.type === "stream_reset") continue;
    const seq = seqOf(ev);
    const cur: EventLog = next ?? log;
    if (seq <= 0 || cur.seqs.has(seq)) {
      next = { ...cur, duplicates: cur.duplicates + 1 };
      continue;
    }
    if (!next) next = { ...log, seqs: new Set(log.seqs), events: log.events.slice() };
    next.seqs.add(seq);
    next.events.push(ev);
    if (TERMINAL.has(ev.type) && !ev.subagent_run_id) next.ended = true;
  }
  if (!next) return log;
  next.events.sort((a, b) => seqOf(a) - seqOf(b));
  return next;
}

const LANE_NAMES: Record<BarKind, string> = { plan: "Plan steps", step: "Steps", model: "Model calls", tool: "Tool calls", wait: "Waiting for input" };
const ORDER: BarKind[] = ["plan", "step", "model", "tool", "wait"];

// The questions a run asks and the event that answers each, by the field
// naming the question.
const WAIT_OPEN: Record<string, { idField: string; label: string }> = {
  clarification_asked: { idField: "question_id", label: "clarification" },
  decision_asked: { idField: "decision_id", label: "decision" },
  permission_asked: { idField: "tool_call_id", label: "permission" },
  doom_loop_detected: { idField: "decision_id", label: "repeated call" },
};
const WAIT_CLOSE: Record<string, string> = {
  clarification_answered: "question_id",
  decision_answered: "decision_id",
  permission_replied: "tool_call_id",
  doom_loop_intervened: "decision_id",
};

interface Raw {
  kind: BarKind;
  key: string;
  label: string;
  start: number; // epoch ms, NaN when only the end was seen
  end: number; // epoch ms, NaN while open
  failed: boolean;
  retries: number;
  detail: string;
}

// timeline turns a run's events into bars. Events are taken in seq order
// (whatever order they came in); a start without its end is an open bar
// that ends at now (the run is still going) or, once the run has ended, at
// its last event; an end without its start begins at the first event.
// Events mirrored from a sub-agent (subagent_run_id) are left out: the
// delegation is the parent's `task` tool call.
export function timeline(events: RunEvent[], now = Date.now()): Timeline {
  const evs = events.filter((e) => e && typeof e.type === "string" && !e.subagent_run_id).slice().sort((a, b) => seqOf(a) - seqOf(b));
  const raws: Raw[] = [];
  const open = new Map<string, Raw>();
  let t0 = Infinity;
  let tLast = -Infinity;
  let ignored = 0;
  let ended = false;
  const begin = (t: number, kind: BarKind, key: string, label: string) => {
    const prev = open.get(key);
    if (prev) prev.end = t; // a second start closes the first
    if (raws.length >= MAX_BARS) return;
    const r: Raw = { kind, key, label, start: t, end: NaN, failed: false, retries: 0, detail: "" };
    raws.push(r);
    open.set(key, r);
  };
  const finish = (t: number, kind: BarKind, key: string, label: string, upd?: (r: Raw) => void) => {
    let r = open.get(key);
    if (r) open.delete(key);
    else {
      if (raws.length >= MAX_BARS) return;
      r = { kind, key, label, start: NaN, end: NaN, failed: false, retries: 0, detail: "" };
      raws.push(r);
    }
    r.end = t;
    upd?.(r);
  };
  for (const ev of evs) {
    const t = tsMs(ev.ts);
    if (!Number.isFinite(t)) {
      ignored++;
      continue;
    }
    t0 = Math.min(t0, t);
    tLast = Math.max(tLast, t);
    const p = rec(ev[ev.type]);
    switch (ev.type) {
      case "plan_step_start":
        begin(t, "plan", "plan:" + num(p.step_number), "plan step " + num(p.step_number) + (str(p.description) ? ": " + str(p.description) : ""));
        break;
      case "plan_step_end":
        finish(t, "plan", "plan:" + num(p.step_number), "plan step " + num(p.step_number), (r) => {
          r.failed = p.success === false && str(p.status) !== "PLAN_STEP_STATUS_COMPLETED";
          r.detail = str(p.summary);
        });
        break;
      case "step_start":
        begin(t, "step", "step:" + num(p.step_number), "step " + num(p.step_number));
        begin(t, "model", "model", "model call, step " + num(p.step_number));
        break;
      case "cost_update":
        if (open.has("model")) finish(t, "model", "model", "model call", (r) => {
          r.detail = str(p.model);
        });
        break;
      case "act": {
        if (open.has("model")) finish(t, "model", "model", "model call");
        const id = str(p.tool_call_id) || "seq" + seqOf(ev);
        begin(t, "tool", "tool:" + id, str(p.tool_name) || "tool");
        break;
      }
      case "observe": {
        const id = str(p.tool_call_id) || "seq" + seqOf(ev);
        finish(t, "tool", "tool:" + id, str(p.tool_name) || "tool", (r) => {
          r.failed = p.success !== true;
          r.retries = Math.max(0, Math.trunc(num(p.retry_count)));
          r.detail = str(p.error_code) || (p.cached === true ? "cached" : "");
        });
        break;
      }
      case "step_end":
        if (open.has("model")) finish(t, "model", "model", "model call");
        finish(t, "step", "step:" + num(p.step_number), "step " + num(p.step_number), (r) => {
          r.failed = p.success === false;
        });
        break;
      case "complete":
      case "error":
      case "cancelled":
        ended = true;
        break;
      default: {
        const w = WAIT_OPEN[ev.type];
        if (w) {
          begin(t, "wait", "wait:" + str(p[w.idField]), w.label);
          break;
        }
        const idField = WAIT_CLOSE[ev.type];
        if (idField) {
          finish(t, "wait", "wait:" + str(p[idField]), "answer", (r) => {
            r.detail = p.timed_out === true ? "timed out" : str(p.answer ?? p.reply ?? p.choice);
          });
        }
      }
    }
  }
  if (!Number.isFinite(t0)) {
    return { t0: 0, span: 0, lanes: [], bars: [], counts: { plan: 0, step: 0, model: 0, tool: 0, wait: 0 }, failedTools: 0, ignored };
  }
  // Open bars end now while the run goes on, at its last event once it ended.
  const stop = ended ? tLast : Math.max(tLast, Number.isFinite(now) ? now : tLast);
  const bars: Omit<Bar, "lane">[] = raws.map((r) => {
    const start = Number.isFinite(r.start) ? r.start : t0;
    const isOpen = !Number.isFinite(r.end);
    const end = isOpen ? stop : Math.max(start, r.end);
    return { kind: r.kind, key: r.key, label: r.label, start: start - t0, end: end - t0, open: isOpen, failed: r.failed, retries: r.retries, detail: r.detail };
  });
  return layout(bars, t0, Math.max(0, stop - t0), ignored);
}

// layout puts the bars in lanes, one kind per lane in a fixed order; bars
// of one kind that overlap in time (parallel tool calls) go to extra lanes
// of that kind, so no two bars of a lane overlap.
function layout(bars: Omit<Bar, "lane">[], t0: number, span: number, ignored: number): Timeline {
  const lanes: string[] = [];
  const out: Bar[] = [];
  const counts: Record<BarKind, number> = { plan: 0, step: 0, model: 0, tool: 0, wait: 0 };
  let failedTools = 0;
  for (const kind of ORDER) {
    const mine = bars.filter((b) => b.kind === kind).sort((a, b) => a.start - b.start || a.end - b.end);
    if (mine.length === 0) continue;
    const ends: number[] = []; // per sub-lane, where its last bar ends
    const first = lanes.length;
    for (const b of mine) {
      let i = ends.findIndex((e) => e <= b.start);
      if (i < 0) {
        i = ends.length;
        ends.push(0);
        lanes.push(LANE_NAMES[kind] + (i > 0 ? " " + (i + 1) : ""));
      }
      ends[i] = Math.max(b.end, b.start + 1e-6);
      out.push({ ...b, lane: first + i });
      counts[kind]++;
      if (kind === "tool" && b.failed) failedTools++;
    }
  }
  return { t0, span: Math.max(span, ...out.map((b) => b.end)), lanes, bars: out, counts, failedTools, ignored };
}

// A point of the run's usage after one model call (a cost_update event).
export interface UsagePoint {
  call: number; // 1, 2, … in order
  seq: number;
  at: number; // ms since the first event of the run, NaN without a time
  model: string;
  inputTokens: number; // cumulative over the run
  outputTokens: number;
  costUsd: number; // cumulative, priced calls only
  stepCostUsd: number;
  priced: boolean;
}

// usage reads the run's cost_update events: the totals they carry are the
// run's so far; a missing total is summed from the calls.
export function usage(events: RunEvent[]): UsagePoint[] {
  const evs = events.filter((e) => e && e.type === "cost_update" && !e.subagent_run_id).slice().sort((a, b) => seqOf(a) - seqOf(b));
  const first = events.reduce((m, e) => {
    const t = e && !e.subagent_run_id ? tsMs(e.ts) : NaN;
    return Number.isFinite(t) ? Math.min(m, t) : m;
  }, Infinity);
  const out: UsagePoint[] = [];
  let inT = 0;
  let outT = 0;
  let cost = 0;
  for (const ev of evs) {
    const p = rec(ev.cost_update);
    const u = rec(p.usage);
    const callIn = num(u.prompt_tokens);
    const callOut = num(u.completion_tokens);
    inT = p.total_input_tokens !== undefined ? Math.max(inT, num(p.total_input_tokens)) : inT + callIn;
    outT = p.total_output_tokens !== undefined ? Math.max(outT, num(p.total_output_tokens)) : outT + callOut;
    const step = num(p.step_cost_usd);
    cost = p.total_cost_usd !== undefined ? Math.max(cost, num(p.total_cost_usd)) : cost + step;
    const t = tsMs(ev.ts);
    out.push({
      call: out.length + 1, seq: seqOf(ev), at: Number.isFinite(t) && Number.isFinite(first) ? t - first : NaN, model: str(p.model),
      inputTokens: inT, outputTokens: outT, costUsd: cost, stepCostUsd: step, priced: p.price_known === true,
    });
  }
  return out;
}

// The figures of a run record (Run.metrics; int64s arrive as strings).
export interface RunFigures {
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  unpricedCalls: number;
  llmCalls: number;
  toolCalls: number; // successful + failed
  failedCalls: number;
  costByModel: [string, number][]; // biggest first
  durationMs: number; // NaN when not known
}

export function figures(run: Run): RunFigures {
  const m = rec(run.metrics);
  const byModel = Object.entries(rec(m.cost_by_model)).map(([k, v]): [string, number] => [k, num(v)]).sort((a, b) => b[1] - a[1]);
  return {
    inputTokens: num(m.total_input_tokens),
    outputTokens: num(m.total_output_tokens),
    costUsd: num(m.total_cost_usd),
    unpricedCalls: num(m.unpriced_calls),
    llmCalls: num(m.llm_calls),
    toolCalls: num(m.successful_calls) + num(m.failed_calls),
    failedCalls: num(m.failed_calls),
    costByModel: byModel,
    durationMs: duration(run),
  };
}

// duration is how long the run ran: started → finished, or the metrics'
// total while it has no finish time; NaN when neither is known.
export function duration(run: Run, now = NaN): number {
  const s = tsMs(run.started_at);
  const f = tsMs(run.finished_at);
  if (Number.isFinite(s) && Number.isFinite(f)) return Math.max(0, f - s);
  const m = rec(run.metrics);
  if (m.total_duration_ms !== undefined) return num(m.total_duration_ms);
  if (Number.isFinite(s) && Number.isFinite(now)) return Math.max(0, now - s);
  return NaN;
}

export const ENDED_STATES = new Set(["RUN_STATE_COMPLETED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED"]);

export function isEnded(run: Run): boolean {
  return ENDED_STATES.has(str(run.state));
}

// stateName is a RunState for people: "completed", "waiting input".
export function stateName(state: unknown): string {
  const s = str(state).replace(/^RUN_STATE_/, "").toLowerCase().replace(/_/g, " ");
  return s === "unspecified" || s === "" ? "unknown" : s;
}

// stateClass maps a RunState onto the console's pill classes.
export function stateClass(state: unknown): string {
  switch (str(state)) {
    case "RUN_STATE_COMPLETED": return "st-completed";
    case "RUN_STATE_FAILED": return "st-failed";
    case "RUN_STATE_CANCELLED": return "st-cancelled";
    case "RUN_STATE_WAITING_INPUT": return "st-waiting";
    case "RUN_STATE_RUNNING": return "st-running";
    default: return "st-queued";
  }
}

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return "—";
  if (ms === 0) return "0 ms";
  if (ms < 1) return ms.toFixed(2) + " ms";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60_000) return (ms / 1000).toFixed(ms < 10_000 ? 2 : 1) + " s";
  const m = Math.floor(ms / 60_000);
  return m + " min " + Math.round((ms % 60_000) / 1000) + " s";
}

// fmtTime shows an RFC 3339 time in the reader's locale.
export function fmtTime(ts: unknown): string {
  if (typeof ts !== "string" || !ts) return "—";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toLocaleString();
}

export function fmtUsd(v: number): string {
  return "$" + (Number.isFinite(v) ? v : 0).toFixed(4);
}

export function fmtInt(v: number): string {
  return Math.round(Number.isFinite(v) ? v : 0).toLocaleString("en-US");
}

// truncate cuts text for a table cell (by code points, whitespace folded).
export function truncate(s: unknown, n: number): string {
  const t = str(s).replace(/\s+/g, " ").trim();
  const cps = Array.from(t);
  return cps.length > n ? cps.slice(0, Math.max(0, n - 1)).join("") + "…" : t;
}

// traceHref fills the gateway's trace link template with the run's trace
// id; "" when either is missing or the result is not an http(s) URL.
export function traceHref(template: string, traceId: unknown): string {
  const id = str(traceId);
  if (!template || !id || !template.includes("{trace_id}")) return "";
  const href = template.split("{trace_id}").join(encodeURIComponent(id));
  return /^https?:\/\//i.test(href) ? href : "";
}
