// The Patterns page's pure logic: the interaction patterns the gateway
// returns (GET /v1/patterns, docs/concepts/patterns.md), the quality gates
// computed from a pattern's fields, the edit form and the PATCH body it
// makes (only what changed), entity tags, and the API calls.
import { ApiError, api, apiCall } from "./api.ts";

// --- the API's JSON (proto names; int64 as strings; zero values omitted) ---

export interface PatternStep {
  description?: string;
  tools?: string[];
  expected_output?: string;
  corrections?: string[];
}

export interface PatternDecision {
  question?: string;
  recommended?: string;
  choices?: Record<string, number>;
}

export interface Pattern {
  id: string;
  tenant?: string;
  name?: string;
  description?: string;
  task_type?: string;
  entity_types?: string[];
  entities?: string[];
  steps?: PatternStep[];
  tool_chains?: { tools?: string[] }[];
  decisions?: PatternDecision[];
  success_factors?: { clarifications_needed?: number; critical_decisions?: string[]; common_corrections?: string[] };
  usage_count?: number;
  success_count?: number;
  failure_count?: number;
  consecutive_failures?: number;
  success_rate?: number;
  effective_success_rate?: number;
  avg_duration_ms?: string | number;
  state?: string;
  created_at?: string;
  updated_at?: string;
  last_queried_at?: string;
  last_used_at?: string;
  version?: string | number;
  shared?: boolean;
}

export interface PatternGrant {
  owner_tenant?: string;
  pattern_id?: string;
  grantee_tenant?: string;
  created_at?: string;
}

// The task types core/patterns classifies goals into, and the states.
export const TASK_TYPES = ["report", "comparison", "trend", "ranking", "breakdown", "data_quality", "lookup"] as const;
export const STATES = ["candidate", "active", "draft", "untrusted", "archived"] as const;
export type StateName = (typeof STATES)[number];

// --- the rules of docs/concepts/patterns.md#quality-gates ---

export const MIN_SUCCESSES = 3;
export const MIN_SUCCESS_RATE = 0.6;
export const DRAFT_BELOW_RATE = 0.4;
export const UNTRUSTED_AFTER_FAILURES = 5;
const DAY = 24 * 3600 * 1000;
export const QUERY_WINDOW_MS = 7 * DAY;
export const ARCHIVE_AFTER_MS = 180 * DAY;
export const DECAY_AFTER_MS = 90 * DAY;
export const DECAY_FACTOR = 0.8;

// Limits of an edit (services/gateway/patterns.go).
export const MAX_NAME_BYTES = 120;
export const MAX_DESCRIPTION_BYTES = 2048;
export const MAX_STEP_TEXT_BYTES = 500;
export const MAX_STEPS = 20;
export const MAX_TOOLS = 20;
export const MAX_TOOL_NAME_BYTES = 128;
export const MAX_CORRECTIONS = 5;
export const MAX_CORRECTION_BYTES = 1024;

// stateName is the short name of a state as the API writes it
// (PATTERN_STATE_ACTIVE → active); "" when unset or unknown.
export function stateName(s: string | undefined): StateName | "" {
  const n = (s ?? "").replace(/^PATTERN_STATE_/, "").toLowerCase();
  return (STATES as readonly string[]).includes(n) ? (n as StateName) : "";
}

// num reads a JSON number or an int64 written as a string; 0 otherwise.
export function num(v: unknown): number {
  if (typeof v === "number") return Number.isFinite(v) ? v : 0;
  if (typeof v === "string" && /^-?\d+(\.\d+)?$/.test(v.trim())) return Number(v);
  return 0;
}

// time reads an RFC 3339 time; 0 when absent or unreadable.
export function time(v: string | undefined): number {
  if (!v) return 0;
  const t = Date.parse(v);
  return Number.isFinite(t) ? t : 0;
}

// effectiveRate is the success rate retrieval reads: the API's
// effective_success_rate when it gave one, else the stored rate × 0.8 for
// every full 90 days since the last outcome or edit.
export function effectiveRate(p: Pattern, now: number): number {
  if (typeof p.effective_success_rate === "number" && Number.isFinite(p.effective_success_rate)) return p.effective_success_rate;
  const rate = num(p.success_rate);
  const updated = time(p.updated_at);
  if (!updated || now <= updated) return rate;
  return rate * Math.pow(DECAY_FACTOR, Math.floor((now - updated) / DECAY_AFTER_MS));
}

export interface Gate {
  key: string;
  label: string;
  passed: boolean;
  // What the pattern has, for the chip's title.
  detail: string;
  // demote: failing it demotes the pattern; admit: it must pass to be active.
  kind: "demote" | "admit";
}

function pct(x: number): string {
  return Math.round(x * 100) + "%";
}

function ago(ms: number): string {
  if (ms < 0) return "in the future";
  const d = Math.floor(ms / DAY);
  if (d >= 1) return d + (d === 1 ? " day ago" : " days ago");
  const h = Math.floor(ms / 3600_000);
  if (h >= 1) return h + (h === 1 ? " hour ago" : " hours ago");
  const m = Math.floor(ms / 60_000);
  return m >= 1 ? m + (m === 1 ? " minute ago" : " minutes ago") : "just now";
}

// gates evaluates the quality gates of a pattern at now, in the order the
// docs give: three that demote it (archived, untrusted, draft), then the
// three it must pass to be offered (active).
export function gates(p: Pattern, now: number): Gate[] {
  let lastUse = Math.max(time(p.last_used_at), time(p.updated_at));
  if (!lastUse) lastUse = time(p.created_at);
  const rate = effectiveRate(p, now);
  const uses = num(p.usage_count);
  const successes = num(p.success_count);
  const streak = num(p.consecutive_failures);
  const queried = time(p.last_queried_at);
  return [
    { key: "recent-use", kind: "demote", label: "used within 180 days", passed: !lastUse || now - lastUse <= ARCHIVE_AFTER_MS, detail: lastUse ? "last used or changed " + ago(now - lastUse) : "never used" },
    { key: "no-streak", kind: "demote", label: "≤ 5 failures in a row", passed: streak <= UNTRUSTED_AFTER_FAILURES, detail: streak + " failures in a row" },
    { key: "not-draft", kind: "demote", label: "success rate ≥ 40%", passed: uses === 0 || rate >= DRAFT_BELOW_RATE, detail: uses === 0 ? "no uses yet" : "success rate " + pct(rate) },
    { key: "successes", kind: "admit", label: "≥ 3 successes", passed: successes >= MIN_SUCCESSES, detail: successes + (successes === 1 ? " success" : " successes") },
    { key: "rate", kind: "admit", label: "success rate ≥ 60%", passed: rate >= MIN_SUCCESS_RATE, detail: "success rate " + pct(rate) },
    { key: "queried", kind: "admit", label: "queried within 7 days", passed: queried > 0 && now - queried <= QUERY_WINDOW_MS, detail: queried ? "queried " + ago(now - queried) : "never queried" },
  ];
}

// stateOfGates is the state the gates give: the first failed demotion
// gate, else active when every admission gate passes, else candidate.
export function stateOfGates(gs: Gate[]): StateName {
  const failed = (k: string) => gs.some((g) => g.key === k && !g.passed);
  if (failed("recent-use")) return "archived";
  if (failed("no-streak")) return "untrusted";
  if (failed("not-draft")) return "draft";
  return gs.filter((g) => g.kind === "admit").every((g) => g.passed) ? "active" : "candidate";
}

// stateReason says why a pattern is in its state, from its gates.
export function stateReason(state: StateName | "", gs: Gate[]): string {
  const failed = gs.filter((g) => !g.passed);
  switch (state) {
    case "archived":
      return "not used for 180 days: not offered";
    case "untrusted":
      return "more than 5 failures in a row: not offered until it succeeds";
    case "draft":
      return "success rate below 40%: not offered until it recovers";
    case "active":
      return "passes every gate: offered to runs";
    case "candidate":
      return failed.length ? "still learning: needs " + failed.map((g) => g.label).join(", ") : "still learning";
    default:
      return "";
  }
}

// --- list sorting ---

export type SortKey = "updated" | "name" | "uses" | "rate" | "last_used" | "version";

export function sortPatterns(ps: Pattern[], key: SortKey, desc: boolean, now: number): Pattern[] {
  const val = (p: Pattern): number | string => {
    switch (key) {
      case "name":
        return (p.name ?? "").toLowerCase();
      case "uses":
        return num(p.usage_count);
      case "rate":
        return effectiveRate(p, now);
      case "last_used":
        return time(p.last_used_at);
      case "version":
        return num(p.version);
      default:
        return time(p.updated_at);
    }
  };
  const out = ps.map((p, i) => ({ p, i, v: val(p) }));
  out.sort((a, b) => {
    const c = a.v < b.v ? -1 : a.v > b.v ? 1 : 0;
    return (desc ? -c : c) || a.i - b.i;
  });
  return out.map((x) => x.p);
}

// --- entity tags ---

// parseETag reads a pattern's version from an ETag header ("7", or 7);
// 0 for anything else (weak tags never match an If-Match).
export function parseETag(h: string | null | undefined): number {
  const s = (h ?? "").trim();
  const m = /^"(\d{1,18})"$/.exec(s) ?? /^(\d{1,18})$/.exec(s);
  if (!m) return 0;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

// ifMatch is the If-Match header of an edit at version.
export function ifMatch(version: number): string {
  return '"' + String(Math.trunc(version)) + '"';
}

// --- the edit form ---

export interface StepForm {
  description: string;
  tools: string; // tool names, separated by commas or spaces
  expected_output: string;
  corrections: string; // one per line
}

export interface EditForm {
  name: string;
  description: string;
  steps: StepForm[];
  toolChain: string; // tool names, separated by commas or spaces
}

export function formOf(p: Pattern): EditForm {
  return {
    name: p.name ?? "",
    description: p.description ?? "",
    steps: (p.steps ?? []).map((s) => ({
      description: s.description ?? "",
      tools: (s.tools ?? []).join(", "),
      expected_output: s.expected_output ?? "",
      corrections: (s.corrections ?? []).join("\n"),
    })),
    toolChain: (p.tool_chains?.[0]?.tools ?? []).join(", "),
  };
}

// parseTools splits what a user typed into tool names: separated by
// commas, spaces or new lines, empty pieces dropped, repeats kept.
export function parseTools(s: string): string[] {
  return s.split(/[\s,]+/u).filter((t) => t !== "");
}

// parseLines splits text into its non-blank lines, trimmed.
export function parseLines(s: string): string[] {
  return s.split(/\r\n|\r|\n/).map((l) => l.trim()).filter((l) => l !== "");
}

export interface PatternPatch {
  name?: string;
  description?: string;
  steps?: PatternStep[];
  tool_chain?: string[];
}

function stepOf(f: StepForm): PatternStep {
  const s: PatternStep = { description: f.description.trim() };
  const tools = parseTools(f.tools);
  if (tools.length) s.tools = tools;
  const out = f.expected_output.trim();
  if (out) s.expected_output = out;
  const corr = parseLines(f.corrections);
  if (corr.length) s.corrections = corr;
  return s;
}

function sameSteps(a: PatternStep[], b: PatternStep[]): boolean {
  const norm = (s: PatternStep) => JSON.stringify([s.description ?? "", s.tools ?? [], s.expected_output ?? "", s.corrections ?? []]);
  return a.length === b.length && a.every((s, i) => norm(s) === norm(b[i] as PatternStep));
}

// patchOf is the PATCH body of an edit: only the fields the form changed
// from the pattern as read. Steps go whole (the API replaces them all)
// when any step changed.
export function patchOf(p: Pattern, f: EditForm): PatternPatch {
  const out: PatternPatch = {};
  const name = f.name.trim();
  if (name !== (p.name ?? "")) out.name = name;
  const description = f.description.trim();
  if (description !== (p.description ?? "")) out.description = description;
  const steps = f.steps.map(stepOf);
  if (!sameSteps(steps, p.steps ?? [])) out.steps = steps;
  const chain = parseTools(f.toolChain);
  const was = p.tool_chains?.[0]?.tools ?? [];
  if (chain.join("\u0000") !== was.join("\u0000")) out.tool_chain = chain;
  return out;
}

export function isEmptyPatch(b: PatternPatch): boolean {
  return Object.keys(b).length === 0;
}

const bytes = (s: string) => new TextEncoder().encode(s).length;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

// checkPatch is what the gateway would refuse in a PATCH body, by field
// (the gateway's field names), so the form says it before sending.
export function checkPatch(b: PatternPatch): Record<string, string> {
  const e: Record<string, string> = {};
  if (b.name !== undefined) {
    if (!b.name) e["name"] = "required";
    else if (bytes(b.name) > MAX_NAME_BYTES) e["name"] = `at most ${MAX_NAME_BYTES} bytes`;
  }
  if (b.description !== undefined && bytes(b.description) > MAX_DESCRIPTION_BYTES) e["description"] = `at most ${MAX_DESCRIPTION_BYTES} bytes`;
  const tools = (field: string, ts: string[], max: number) => {
    if (ts.length > max) e[field] = `at most ${max} tools`;
    ts.forEach((t, i) => {
      if (bytes(t) > MAX_TOOL_NAME_BYTES || CONTROL.test(t)) e[`${field}[${i}]`] = `a tool name of at most ${MAX_TOOL_NAME_BYTES} bytes without control characters`;
    });
  };
  if (b.steps !== undefined) {
    if (b.steps.length === 0) e["steps"] = "a pattern keeps at least one step";
    if (b.steps.length > MAX_STEPS) e["steps"] = `at most ${MAX_STEPS} steps`;
    b.steps.forEach((s, i) => {
      const f = `steps[${i}]`;
      if (!s.description) e[f + ".description"] = "required";
      else if (bytes(s.description) > MAX_STEP_TEXT_BYTES) e[f + ".description"] = `at most ${MAX_STEP_TEXT_BYTES} bytes`;
      if (bytes(s.expected_output ?? "") > MAX_STEP_TEXT_BYTES) e[f + ".expected_output"] = `at most ${MAX_STEP_TEXT_BYTES} bytes`;
      tools(f + ".tools", s.tools ?? [], MAX_TOOLS);
      const c = s.corrections ?? [];
      if (c.length > MAX_CORRECTIONS) e[f + ".corrections"] = `at most ${MAX_CORRECTIONS} corrections`;
      c.forEach((x, j) => {
        if (bytes(x) > MAX_CORRECTION_BYTES) e[`${f}.corrections[${j}]`] = `at most ${MAX_CORRECTION_BYTES} bytes`;
      });
    });
  }
  if (b.tool_chain !== undefined) {
    if (b.tool_chain.length === 0) e["tool_chain"] = "a tool chain names at least one tool";
    tools("tool_chain", b.tool_chain, MAX_TOOLS);
  }
  return e;
}

// --- formatting ---

export function fmtRate(x: number | undefined): string {
  return typeof x === "number" && Number.isFinite(x) ? (x * 100).toFixed(0) + "%" : "–";
}

export function fmtTime(v: string | undefined): string {
  const t = time(v);
  return t ? new Date(t).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "never";
}

export function fmtDuration(ms: number): string {
  if (!ms) return "–";
  if (ms < 1000) return ms + " ms";
  if (ms < 60_000) return (ms / 1000).toFixed(1) + " s";
  return (ms / 60_000).toFixed(1) + " min";
}

// --- the API ---

const enc = encodeURIComponent;

export interface ListQuery {
  task_type?: string;
  state?: string;
  include_shared?: boolean;
  page_size?: number;
  page_token?: string;
}

// listQuery is the query string of GET /v1/patterns (only what is set).
export function listQuery(q: ListQuery): string {
  const p = new URLSearchParams();
  if (q.task_type) p.set("task_type", q.task_type);
  if (q.state) p.set("state", q.state);
  if (q.include_shared) p.set("include_shared", "true");
  if (q.page_size) p.set("page_size", String(q.page_size));
  if (q.page_token) p.set("page_token", q.page_token);
  const s = p.toString();
  return s ? "?" + s : "";
}

// isStale tells a refused edit whose version no longer holds (412).
export function isStale(e: unknown): boolean {
  return e instanceof ApiError && e.status === 412;
}

export const patternsApi = {
  list: (q: ListQuery, signal?: AbortSignal) => api<{ patterns?: Pattern[]; next_page_token?: string }>("GET", "/v1/patterns" + listQuery(q), undefined, signal),
  // get reads one pattern and the version its ETag names (the body's
  // version when the header is missing).
  get: async (id: string, signal?: AbortSignal) => {
    const { data, headers } = await apiCall<{ pattern: Pattern }>("GET", "/v1/patterns/" + enc(id), { signal });
    return { pattern: data.pattern, version: parseETag(headers.get("ETag") ?? "") || num(data.pattern?.version) };
  },
  update: async (id: string, version: number, patch: PatternPatch) => {
    const { data, headers } = await apiCall<{ pattern: Pattern }>("PATCH", "/v1/patterns/" + enc(id), { body: patch, headers: version > 0 ? { "If-Match": ifMatch(version) } : {} });
    return { pattern: data.pattern, version: parseETag(headers.get("ETag") ?? "") || num(data.pattern?.version) };
  },
  remove: (id: string) => api<unknown>("DELETE", "/v1/patterns/" + enc(id)),
  markUseless: (id: string, reason: string) => api<unknown>("POST", "/v1/patterns/" + enc(id) + "/useless", reason ? { reason } : {}),
  grants: (id: string, signal?: AbortSignal) => api<{ grants?: PatternGrant[] }>("GET", "/v1/patterns/grants?id=" + enc(id), undefined, signal),
  grant: (id: string, grantee: string) => api<{ grant?: PatternGrant }>("POST", "/v1/patterns/" + enc(id) + "/grants", { grantee_tenant: grantee }),
  revoke: (id: string, grantee: string) => api<unknown>("DELETE", "/v1/patterns/" + enc(id) + "/grants/" + enc(grantee)),
};
