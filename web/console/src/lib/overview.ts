// The tenant overview's runs and conversations: reading the runs of the
// last days page by page within a bound, bucketing them per UTC day by
// state, the latest failures, and the active conversations. Pure functions
// (the page fetcher is passed in), unit-tested with node:test.
import { api, type Conversation, type Run } from "./api.ts";
import { addDays } from "./usage.ts";

export const RUN_DAYS = 30;
export const MAX_RUNS = 1000;
export const RUN_PAGE = 200;

export interface RunPage {
  runs?: Run[];
  next_page_token?: string;
}

export interface CollectedRuns {
  runs: Run[];
  // Why the reading stopped before covering the days: "runs" when
  // MAX_RUNS runs were read (older ones in the days are left out); null
  // when every run of the days was read.
  bound: "runs" | null;
  // The oldest run read, when bound is "runs".
  oldest?: string | undefined;
  pages: number;
}

// utcDay is the UTC day (YYYY-MM-DD) of an RFC 3339 time; "" when it is
// not one.
export function utcDay(ts: unknown): string {
  if (typeof ts !== "string" || ts === "") return "";
  const t = Date.parse(ts);
  return Number.isFinite(t) ? new Date(t).toISOString().slice(0, 10) : "";
}

// firstDay is the first UTC day of the `days` days ending with today.
export function firstDay(today: string, days: number): string {
  return addDays(today, 1 - days);
}

// collectRuns reads runs, newest first, through fetchPage until a page
// reaches a run created before the first of the `days` days ending with
// today, the list ends, or maxRuns runs were read. Only runs of those
// days are returned.
export async function collectRuns(
  fetchPage: (pageToken: string) => Promise<RunPage>,
  today: string,
  days = RUN_DAYS,
  maxRuns = MAX_RUNS,
): Promise<CollectedRuns> {
  const from = firstDay(today, days);
  const out: Run[] = [];
  let token = "";
  let pages = 0;
  let read = 0;
  for (;;) {
    const page = await fetchPage(token);
    pages++;
    const runs = Array.isArray(page.runs) ? page.runs : [];
    let older = false;
    let unread = false;
    for (const r of runs) {
      if (read >= maxRuns) {
        unread = true;
        break;
      }
      read++;
      const d = utcDay(r.created_at);
      if (d !== "" && d < from) {
        older = true;
        continue;
      }
      out.push(r);
    }
    token = typeof page.next_page_token === "string" ? page.next_page_token : "";
    if (older || runs.length === 0 || (token === "" && !unread)) return { runs: out, bound: null, pages };
    // Every page holds at least one run, so this ends within maxRuns pages.
    if (read >= maxRuns) return { runs: out, bound: "runs", oldest: out.map((r) => utcDay(r.created_at)).filter(Boolean).sort()[0], pages };
  }
}

export type RunBucketState = "completed" | "failed" | "cancelled" | "other";

export const BUCKET_STATES: RunBucketState[] = ["completed", "failed", "cancelled", "other"];

export function bucketState(state: unknown): RunBucketState {
  switch (state) {
    case "RUN_STATE_COMPLETED": return "completed";
    case "RUN_STATE_FAILED": return "failed";
    case "RUN_STATE_CANCELLED": return "cancelled";
    default: return "other"; // queued, running, waiting for input
  }
}

export interface RunBuckets {
  days: string[];
  completed: number[];
  failed: number[];
  cancelled: number[];
  other: number[]; // still going (queued, running, waiting for input)
  total: number;
}

// bucketRuns counts runs per UTC day of their creation by state over the
// `days` days ending with today, every day present; runs outside the days
// or without a creation time are not counted.
export function bucketRuns(runs: readonly Run[], today: string, days = RUN_DAYS): RunBuckets {
  const n = Math.max(0, Math.floor(days));
  const list = Array.from({ length: n }, (_, i) => addDays(today, i - n + 1));
  const index = new Map(list.map((d, i) => [d, i]));
  const b: RunBuckets = { days: list, completed: new Array<number>(n).fill(0), failed: new Array<number>(n).fill(0), cancelled: new Array<number>(n).fill(0), other: new Array<number>(n).fill(0), total: 0 };
  for (const r of runs) {
    const i = index.get(utcDay(r.created_at));
    if (i === undefined) continue;
    const arr = b[bucketState(r.state)];
    arr[i] = (arr[i] ?? 0) + 1;
    b.total++;
  }
  return b;
}

export interface FailedRun {
  runId: string;
  createdAt: string;
  code: string;
  message: string;
  input: string;
  conversationId: string;
}

// recentFailures is the latest `n` failed runs, newest first, with their
// error.
export function recentFailures(runs: readonly Run[], n = 5): FailedRun[] {
  return runs
    .filter((r) => r.state === "RUN_STATE_FAILED")
    .map((r) => {
      const e = (r.error ?? {}) as { code?: unknown; message?: unknown };
      return {
        runId: r.run_id,
        createdAt: typeof r.created_at === "string" ? r.created_at : "",
        code: typeof e.code === "string" ? e.code : "",
        message: typeof e.message === "string" ? e.message : "",
        input: typeof r.input === "string" ? r.input : "",
        conversationId: r.conversation_id ?? "",
      };
    })
    .sort((a, b) => (Date.parse(b.createdAt) || 0) - (Date.parse(a.createdAt) || 0))
    .slice(0, Math.max(0, n));
}

export interface ActiveConversations {
  count: number;
  // More conversations exist than were read: count is a lower bound.
  more: boolean;
  recent: Conversation[];
}

// activeConversations counts the active conversations of a page (newest
// activity first) and keeps the latest `n`.
export function activeConversations(convs: readonly Conversation[], more: boolean, n = 5): ActiveConversations {
  const active = convs.filter((c) => c.state === "CONVERSATION_STATE_ACTIVE");
  const at = (c: Conversation) => Date.parse(c.last_activity_at ?? c.created_at ?? "") || 0;
  return { count: active.length, more, recent: [...active].sort((a, b) => at(b) - at(a)).slice(0, Math.max(0, n)) };
}

export function runsOption(b: RunBuckets): Record<string, unknown> {
  const series = [
    { name: "Completed", data: b.completed, color: "#1d8a4e" },
    { name: "Failed", data: b.failed, color: "#c0392b" },
    { name: "Cancelled", data: b.cancelled, color: "#98a2b3" },
    { name: "In progress", data: b.other, color: "#2f6fde" },
  ];
  return {
    animation: false,
    grid: { left: 48, right: 24, top: 40, bottom: 36 },
    legend: { top: 0, data: series.map((s) => s.name) },
    tooltip: { trigger: "axis", renderMode: "richText", axisPointer: { type: "shadow" } },
    xAxis: { type: "category", data: b.days.map((d) => d.slice(5)), axisLabel: { hideOverlap: true } },
    yAxis: { type: "value", name: "runs", minInterval: 1, min: 0 },
    series: series.map((s) => ({ name: s.name, type: "bar", stack: "runs", data: s.data, itemStyle: { color: s.color } })),
  };
}

export const CONVERSATION_PAGE = 500;

// The API calls of the page.
export const overviewApi = {
  runsPage: (pageToken: string, signal?: AbortSignal) =>
    api<RunPage>("GET", "/v1/runs?page_size=" + RUN_PAGE + (pageToken ? "&page_token=" + encodeURIComponent(pageToken) : ""), undefined, signal),
  conversations: (signal?: AbortSignal) =>
    api<{ conversations?: Conversation[]; next_page_token?: string }>("GET", "/v1/conversations?page_size=" + CONVERSATION_PAGE, undefined, signal),
};
