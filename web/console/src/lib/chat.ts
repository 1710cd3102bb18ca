// The chat view of one run as a pure function of its events: a reducer
// (applyEvent) that turns the run's event stream into message bubbles,
// tool-call cards, sub-agent cards, inline prompts, the work plan and the
// usage. Each event is applied once: an event whose seq was applied before
// (a replay after a reconnect or a reload) changes nothing, so the view
// never repeats an item. Pure: unit-tested with node:test.

/** One event of GET /v1/runs/{id}/events (baagent.v1.Event, JSON mapping). */
export interface RunEvent {
  run_id?: string;
  conversation_id?: string;
  seq?: number | string;
  cursor?: string;
  ts?: string;
  type: string;
  step?: number;
  trace_id?: string;
  subagent_run_id?: string;
  [payload: string]: unknown;
}

export interface Option {
  label: string;
  description: string;
  recommended: boolean;
}

export interface ToolResult {
  seq: number;
  observation: string;
  success: boolean;
  errorCode: string;
  durationMs: number;
  outputLevel: string;
  cached: boolean;
  artifactId: string;
  retryCount: number;
}

export type Item =
  | { kind: "user"; seq: number; text: string }
  | { kind: "thought"; seq: number; text: string }
  | { kind: "text"; seq: number; step: number; text: string }
  | { kind: "answer"; seq: number; text: string }
  | { kind: "tool"; seq: number; callId: string; name: string; args: string; parent: string; result: ToolResult | null }
  | { kind: "subagent"; seq: number; childRunId: string; agentType: string; description: string; status: "running" | "completed" | "failed" | "cancelled"; tools: string[]; summary: string }
  | { kind: "prompt"; seq: number; promptKind: "clarification" | "decision" | "permission"; id: string; text: string; options: Option[]; answer: string; timedOut: boolean; answered: boolean }
  | { kind: "notice"; seq: number; level: "info" | "warning" | "error"; text: string; detail: string };

export type PlanStatus = "pending" | "running" | "done" | "failed" | "skipped";

export interface PlanStep {
  n: number;
  description: string;
  expected: string;
  status: PlanStatus;
  summary: string;
  durationMs: number;
}

export interface Plan {
  revision: number;
  reason: string;
  steps: PlanStep[];
}

export type RunStatus = "queued" | "running" | "waiting" | "completed" | "failed" | "cancelled";

export interface ChatState {
  runId: string;
  seqs: Set<number>;
  lastSeq: number;
  cursor: string;
  applied: number; // distinct events applied
  duplicates: number; // events dropped as already applied
  items: Item[];
  plan: Plan | null;
  complexity: string;
  status: RunStatus;
  usage: { inputTokens: number; outputTokens: number; costUsd: number; priced: boolean };
  traceId: string;
  gap: boolean; // events before the first one applied are no longer retained
  ended: boolean;
}

export const MAX_PLAN_STEPS = 200;
export const MAX_ITEMS = 5000;
export const MAX_TEXT = 200_000;

export function newChat(runId: string): ChatState {
  return {
    runId, seqs: new Set(), lastSeq: 0, cursor: "", applied: 0, duplicates: 0, items: [], plan: null, complexity: "",
    status: "queued", usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, priced: true }, traceId: "", gap: false, ended: false,
  };
}

const str = (v: unknown): string => (typeof v === "string" ? v : v === undefined || v === null ? "" : String(v));
const num = (v: unknown): number => {
  const n = typeof v === "number" ? v : Number(v ?? 0);
  return Number.isFinite(n) ? n : 0;
};
const rec = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const clip = (s: string): string => (s.length > MAX_TEXT ? s.slice(0, MAX_TEXT) + "…" : s);

export const TERMINAL = new Set(["complete", "error", "cancelled"]);

function options(v: unknown): Option[] {
  return arr(v).slice(0, 50).map((o) => {
    const r = rec(o);
    return { label: str(r.label), description: str(r.description), recommended: r.is_recommended === true };
  });
}

const PLAN_STATUS: Record<string, PlanStatus> = {
  PLAN_STEP_STATUS_PENDING: "pending", PLAN_STEP_STATUS_IN_PROGRESS: "running", PLAN_STEP_STATUS_COMPLETED: "done",
  PLAN_STEP_STATUS_FAILED: "failed", PLAN_STEP_STATUS_SKIPPED: "skipped",
};

// planFrom reads a WorkPlan (a work_plan event's payload or Run.plan).
export function planFrom(v: unknown): Plan | null {
  const wp = rec(v);
  const steps: PlanStep[] = [];
  for (const s of arr(wp.steps).slice(0, MAX_PLAN_STEPS)) {
    const r = rec(s);
    const n = Math.trunc(num(r.step_number));
    if (n < 1 || steps.some((x) => x.n === n)) continue;
    steps.push({ n, description: str(r.description), expected: str(r.expected_output), status: PLAN_STATUS[str(r.status)] ?? "pending", summary: str(r.summary), durationMs: num(r.duration_ms) });
  }
  if (steps.length === 0) return null;
  steps.sort((a, b) => a.n - b.n);
  return { revision: Math.max(1, Math.trunc(num(wp.revision))), reason: str(wp.reason), steps };
}

function planStep(plan: Plan, n: number, total: number): PlanStep | null {
  const want = Math.min(MAX_PLAN_STEPS, Math.max(n, total));
  for (let k = 1; k <= want; k++) {
    if (!plan.steps.some((x) => x.n === k)) plan.steps.push({ n: k, description: "Step " + k, expected: "", status: "pending", summary: "", durationMs: 0 });
  }
  plan.steps.sort((a, b) => a.n - b.n);
  return plan.steps.find((x) => x.n === n) ?? null;
}

function clonePlan(p: Plan | null): Plan | null {
  return p ? { ...p, steps: p.steps.map((s) => ({ ...s })) } : null;
}

// withRunRecord fills in what the events cannot (or no longer) say from the
// run record (GET /v1/runs/{id}): the plan when the run's early events are
// gone, the trace id and the complexity.
export function withRunRecord(s: ChatState, run: Record<string, unknown>): ChatState {
  const next = { ...s };
  if (!next.traceId && run.trace_id) next.traceId = str(run.trace_id);
  if (!next.complexity && run.query_complexity) next.complexity = str(run.query_complexity);
  const recorded = planFrom(run.plan);
  if (recorded && (!next.plan || (next.gap && recorded.revision >= next.plan.revision))) next.plan = recorded;
  return next;
}

function findTool(items: Item[], callId: string): number {
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i];
    if (it && it.kind === "tool" && it.callId === callId) return i;
  }
  return -1;
}

function findSub(items: Item[], child: string): number {
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i];
    if (it && it.kind === "subagent" && it.childRunId === child) return i;
  }
  return -1;
}

function findPrompt(items: Item[], id: string): number {
  for (let i = items.length - 1; i >= 0; i--) {
    const it = items[i];
    if (it && it.kind === "prompt" && it.id === id) return i;
  }
  return -1;
}

function push(s: ChatState, it: Item): void {
  if (s.items.length < MAX_ITEMS) s.items.push(it);
}

// applyEvent returns the state after ev. An event already applied (same
// seq) returns s itself with only the duplicate count raised.
export function applyEvent(s: ChatState, ev: RunEvent): ChatState {
  const seq = Math.trunc(num(ev.seq));
  // A stream_reset is the gateway's note about the stream, not an event of
  // the run: it has no seq of its own to count.
  const counted = seq > 0 && ev.type !== "stream_reset";
  if (counted && s.seqs.has(seq)) return { ...s, duplicates: s.duplicates + 1 };
  const n: ChatState = { ...s, items: s.items.slice(), seqs: s.seqs, plan: clonePlan(s.plan), usage: { ...s.usage } };
  if (counted) {
    n.seqs = new Set(s.seqs);
    n.seqs.add(seq);
    if (n.applied === 0 && seq > 1) n.gap = true;
    n.applied++;
    n.lastSeq = Math.max(n.lastSeq, seq);
  }
  if (ev.cursor) n.cursor = ev.cursor;
  if (ev.trace_id) n.traceId = ev.trace_id;
  const p = rec(ev[ev.type]);
  if (ev.subagent_run_id) {
    subAgentEvent(n, ev, p);
    return n;
  }
  switch (ev.type) {
    case "start":
      n.status = "running";
      n.complexity = str(p.query_complexity);
      push(n, { kind: "user", seq, text: clip(str(p.input)) });
      break;
    case "thought":
      if (str(p.thought)) push(n, { kind: "thought", seq, text: clip(str(p.thought)) });
      break;
    case "text_delta": {
      const step = Math.trunc(num(ev.step));
      const last = n.items[n.items.length - 1];
      if (last && last.kind === "text" && last.step === step) {
        n.items[n.items.length - 1] = { ...last, text: clip(last.text + str(p.delta)) };
      } else {
        push(n, { kind: "text", seq, step, text: clip(str(p.delta)) });
      }
      break;
    }
    case "act": {
      const input = p.tool_input !== undefined ? JSON.stringify(p.tool_input, null, 2) : str(p.raw_arguments);
      push(n, { kind: "tool", seq, callId: str(p.tool_call_id), name: str(p.tool_name), args: clip(input), parent: str(p.parent_tool_call_id), result: null });
      break;
    }
    case "observe": {
      const result: ToolResult = {
        seq, observation: clip(str(p.observation)), success: p.success === true, errorCode: str(p.error_code), durationMs: num(p.duration_ms),
        outputLevel: str(p.output_level).replace("OUTPUT_LEVEL_", "").toLowerCase(), cached: p.cached === true, artifactId: str(p.artifact_id), retryCount: num(p.retry_count),
      };
      const i = findTool(n.items, str(p.tool_call_id));
      const it = i >= 0 ? n.items[i] : undefined;
      if (it && it.kind === "tool") n.items[i] = { ...it, result };
      else push(n, { kind: "tool", seq, callId: str(p.tool_call_id), name: str(p.tool_name), args: "", parent: str(p.parent_tool_call_id), result });
      break;
    }
    case "clarification_asked":
      n.status = "waiting";
      push(n, { kind: "prompt", seq, promptKind: "clarification", id: str(p.question_id), text: str(p.question), options: options(p.options), answer: "", timedOut: false, answered: false });
      break;
    case "decision_asked":
      n.status = "waiting";
      push(n, { kind: "prompt", seq, promptKind: "decision", id: str(p.decision_id), text: str(p.context), options: options(p.options), answer: "", timedOut: false, answered: false });
      break;
    case "permission_asked": {
      const d = rec(p.decision);
      n.status = "waiting";
      push(n, { kind: "prompt", seq, promptKind: "permission", id: str(d.decision_id), text: str(p.tool_name) + " needs your approval to run with " + (str(p.arguments) || "{}"), options: options(d.options), answer: "", timedOut: false, answered: false });
      break;
    }
    case "clarification_answered": case "decision_answered": case "permission_replied": {
      const id = str(ev.type === "clarification_answered" ? p.question_id : p.decision_id);
      const i = findPrompt(n.items, id);
      const it = i >= 0 ? n.items[i] : undefined;
      if (it && it.kind === "prompt") n.items[i] = { ...it, answered: true, answer: str(ev.type === "permission_replied" ? p.reply : p.answer), timedOut: p.timed_out === true };
      if (!n.ended) n.status = "running";
      break;
    }
    case "work_plan": {
      const plan = planFrom(p);
      if (plan && (!n.plan || plan.revision >= n.plan.revision)) n.plan = plan;
      break;
    }
    case "plan_step_start": case "plan_step_end": {
      const k = Math.trunc(num(p.step_number));
      if (k < 1 || k > MAX_PLAN_STEPS) break;
      if (ev.type === "plan_step_start" && n.plan && num(p.revision) > 0 && num(p.revision) < n.plan.revision) break;
      if (!n.plan) n.plan = { revision: Math.max(1, Math.trunc(num(p.revision))), reason: "", steps: [] };
      const st = planStep(n.plan, k, Math.trunc(num(p.total_steps)));
      if (!st) break;
      if (ev.type === "plan_step_start") {
        if (p.description) st.description = str(p.description);
        st.status = "running";
      } else {
        st.status = PLAN_STATUS[str(p.status)] ?? (p.success === false ? "failed" : "done");
        if (st.status === "pending" || st.status === "running") st.status = p.success === false ? "failed" : "done";
        if (p.summary) st.summary = str(p.summary);
        st.durationMs = num(p.duration_ms) || st.durationMs;
      }
      break;
    }
    case "warning":
      push(n, { kind: "notice", seq, level: "warning", text: str(p.code), detail: str(p.message) });
      break;
    case "skill_activated":
      push(n, { kind: "notice", seq, level: "info", text: "skill " + str(p.skill_name) + " activated", detail: str(p.reason) });
      break;
    case "context_compressed":
      push(n, { kind: "notice", seq, level: "info", text: "context compressed: " + num(p.original_message_count) + " → " + num(p.final_message_count) + " messages", detail: "" });
      break;
    case "memory_recalled": {
      const names = arr(p.entities).slice(0, 5).map((e) => str(rec(e).name)).filter(Boolean);
      push(n, { kind: "notice", seq, level: "info", text: "recalled " + arr(p.entities).length + " from memory for “" + str(p.query) + "”", detail: names.join(", ") });
      break;
    }
    case "doom_loop_detected":
      push(n, { kind: "notice", seq, level: "warning", text: "repeated call: " + str(p.tool_name) + " ×" + num(p.repeat_count), detail: "" });
      break;
    case "doom_loop_intervened":
      push(n, { kind: "notice", seq, level: "warning", text: "loop intervention on " + str(p.tool_name) + ": " + str(p.intervention).replace("DOOM_LOOP_INTERVENTION_", "").toLowerCase(), detail: "" });
      break;
    case "subagent_assigned":
      push(n, { kind: "subagent", seq, childRunId: str(p.child_run_id), agentType: str(p.subagent_type), description: clip(str(p.description) || str(p.prompt)), status: "running", tools: [], summary: "" });
      break;
    case "cost_update":
      n.usage.inputTokens = num(p.total_input_tokens);
      n.usage.outputTokens = num(p.total_output_tokens);
      n.usage.costUsd = num(p.total_cost_usd);
      if (p.price_known !== true && !(num(p.step_cost_usd) > 0)) n.usage.priced = false;
      break;
    case "complete": {
      const content = clip(str(p.content));
      // The final step's streamed text is the answer: show it once.
      const last = n.items[n.items.length - 1];
      if (last && last.kind === "text" && content && last.text.trim() === content.trim()) n.items.pop();
      push(n, { kind: "answer", seq, text: content || (last && last.kind === "text" ? last.text : "") });
      n.status = "completed";
      n.ended = true;
      break;
    }
    case "error":
      push(n, { kind: "notice", seq, level: "error", text: "run failed: " + str(p.code), detail: str(p.message) });
      n.status = "failed";
      n.ended = true;
      break;
    case "cancelled":
      push(n, { kind: "notice", seq, level: "error", text: "run cancelled", detail: str(p.reason) });
      n.status = "cancelled";
      n.ended = true;
      break;
    case "stream_reset":
      n.gap = true;
      push(n, { kind: "notice", seq: 0, level: "warning", text: "events before #" + num(p.earliest_seq) + " are no longer retained", detail: str(p.reason) });
      break;
  }
  return n;
}

function subAgentEvent(n: ChatState, ev: RunEvent, p: Record<string, unknown>): void {
  const child = str(ev.subagent_run_id);
  const i = findSub(n.items, child);
  const it = i >= 0 ? n.items[i] : undefined;
  if (!it || it.kind !== "subagent") return;
  const next = { ...it, tools: it.tools.slice() };
  switch (ev.type) {
    case "act":
      if (next.tools.length < 50) next.tools.push(str(p.tool_name));
      break;
    case "complete": next.status = "completed"; next.summary = clip(str(p.content)); break;
    case "error": next.status = "failed"; next.summary = str(p.message); break;
    case "cancelled": next.status = "cancelled"; next.summary = str(p.reason); break;
    default: return;
  }
  n.items[i] = next;
}

// applyAll applies events in order.
export function applyAll(s: ChatState, evs: RunEvent[]): ChatState {
  let cur = s;
  for (const e of evs) cur = applyEvent(cur, e);
  return cur;
}

// runStatus maps a Run's state (RUN_STATE_…) to the view's status.
export function runStatus(state: string): RunStatus {
  switch (state) {
    case "RUN_STATE_QUEUED": return "queued";
    case "RUN_STATE_WAITING_INPUT": return "waiting";
    case "RUN_STATE_COMPLETED": return "completed";
    case "RUN_STATE_FAILED": return "failed";
    case "RUN_STATE_CANCELLED": return "cancelled";
    default: return "running";
  }
}
