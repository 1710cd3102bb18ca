// A run's live event stream over SSE (GET /v1/runs/{id}/events). With API
// keys a short-lived stream token goes in the URL (EventSource cannot send
// headers), fetched afresh for every connection. When the connection drops
// the stream reconnects itself from the cursor of the last event it passed
// on, with a backoff, so nothing is lost; the reducer drops any event seen
// twice (by seq), so nothing is repeated.

import type { RunEvent } from "./chat.ts";

// Every event type the gateway sends (baagent.v1.Event's payloads):
// EventSource hands named events only to listeners of that name.
export const EVENT_TYPES = [
  "start", "thought", "thought_delta", "text_delta", "act", "observe", "skill_activated", "skill_ended",
  "context_compressed", "clarification_asked", "clarification_answered", "decision_asked", "decision_answered",
  "permission_asked", "permission_replied", "doom_loop_detected", "doom_loop_intervened", "cost_update",
  "step_start", "step_end", "complete", "error", "cancelled", "stream_reset", "work_plan", "plan_step_start",
  "plan_step_end", "warning", "subagent_assigned", "memory_recalled", "pattern_matched",
];

export type StreamStatus = "connecting" | "live" | "reconnecting" | "ended" | "closed";

export interface StreamOptions {
  runId: string;
  cursor: string; // "" or "earliest" replays everything retained
  tokenNeeded: () => boolean;
  token: () => Promise<string>;
  onEvents: (evs: RunEvent[]) => void;
  onStatus: (s: StreamStatus, detail?: string) => void;
}

const MIN_BACKOFF = 500;
const MAX_BACKOFF = 10_000;

export class RunStream {
  private es: EventSource | null = null;
  private cursor: string;
  private closed = false;
  private backoff = MIN_BACKOFF;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private batch: RunEvent[] = [];
  private flushTimer: ReturnType<typeof setTimeout> | null = null;
  readonly opts: StreamOptions;

  constructor(opts: StreamOptions) {
    this.opts = opts;
    this.cursor = opts.cursor || "earliest";
  }

  start(): void {
    void this.connect();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.flush();
    this.es?.close();
    this.es = null;
    this.opts.onStatus("closed");
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    this.opts.onStatus(this.backoff === MIN_BACKOFF ? "connecting" : "reconnecting");
    let url = "/v1/runs/" + encodeURIComponent(this.opts.runId) + "/events?cursor=" + encodeURIComponent(this.cursor);
    try {
      if (this.opts.tokenNeeded()) url += "&token=" + encodeURIComponent(await this.opts.token());
    } catch (e) {
      this.retry(e instanceof Error ? e.message : "stream token refused");
      return;
    }
    if (this.closed) return;
    const es = new EventSource(url);
    this.es = es;
    es.onopen = () => {
      this.backoff = MIN_BACKOFF;
      this.opts.onStatus("live");
    };
    const on = (m: MessageEvent<string>) => {
      let ev: RunEvent;
      try {
        ev = JSON.parse(m.data) as RunEvent;
      } catch {
        return;
      }
      if (typeof ev !== "object" || ev === null || typeof ev.type !== "string") return;
      if (ev.cursor) this.cursor = ev.cursor;
      this.batch.push(ev);
      if (!this.flushTimer) this.flushTimer = setTimeout(() => this.flush(), 16);
      if (!ev.subagent_run_id && (ev.type === "complete" || ev.type === "error" || ev.type === "cancelled")) {
        this.flush();
        this.closed = true;
        es.close();
        this.es = null;
        this.opts.onStatus("ended");
      }
    };
    for (const t of EVENT_TYPES) es.addEventListener(t, on as EventListener);
    // The gateway cuts a consumer that falls behind; it resumes from its cursor.
    es.addEventListener("slow_consumer", () => this.retry("catching up"));
    es.onerror = () => this.retry("connection lost");
  }

  private retry(detail: string): void {
    if (this.closed) return;
    this.es?.close();
    this.es = null;
    this.flush();
    this.opts.onStatus("reconnecting", detail);
    if (this.timer) clearTimeout(this.timer);
    const wait = this.backoff;
    this.backoff = Math.min(MAX_BACKOFF, this.backoff * 2);
    this.timer = setTimeout(() => void this.connect(), wait);
  }

  private flush(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.batch.length === 0) return;
    const evs = this.batch;
    this.batch = [];
    this.opts.onEvents(evs);
  }
}

// parseJSONL reads an events export (one event per line).
export function parseJSONL(text: string): RunEvent[] {
  const out: RunEvent[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      const ev = JSON.parse(line) as RunEvent;
      if (ev && typeof ev === "object" && typeof ev.type === "string") out.push(ev);
    } catch {
      // a torn line: skipped
    }
  }
  return out;
}
