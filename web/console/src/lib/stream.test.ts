import assert from "node:assert/strict";
import { mock, test } from "node:test";
import type { RunEvent } from "./chat.ts";
import { parseJSONL, RunStream, type StreamStatus } from "./stream.ts";

// FakeEventSource stands in for the browser's EventSource: it records the
// URLs opened and lets the test deliver named events and errors.
class FakeEventSource {
  static all: FakeEventSource[] = [];
  readonly url: string;
  closed = false;
  onopen: (() => void) | null = null;
  onerror: (() => void) | null = null;
  private listeners = new Map<string, ((m: { data: string }) => void)[]>();
  constructor(url: string) {
    this.url = url;
    FakeEventSource.all.push(this);
  }
  addEventListener(type: string, fn: (m: { data: string }) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), fn]);
  }
  close(): void {
    this.closed = true;
  }
  emit(ev: RunEvent): void {
    for (const fn of this.listeners.get(ev.type) ?? []) fn({ data: JSON.stringify(ev) });
  }
  named(type: string, data: string): void {
    for (const fn of this.listeners.get(type) ?? []) fn({ data });
  }
}

function setup(tokenNeeded: boolean) {
  FakeEventSource.all = [];
  (globalThis as unknown as { EventSource: unknown }).EventSource = FakeEventSource;
  const got: RunEvent[] = [];
  const statuses: StreamStatus[] = [];
  let tokens = 0;
  const s = new RunStream({
    runId: "run_1",
    cursor: "",
    tokenNeeded: () => tokenNeeded,
    token: async () => "tok" + ++tokens,
    onEvents: (evs) => got.push(...evs),
    onStatus: (st) => statuses.push(st),
  });
  return { s, got, statuses };
}

const tick = () => new Promise<void>((r) => setImmediate(r));

test("the stream resumes from the last cursor with a fresh token after an error", async () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    const { s, got, statuses } = setup(true);
    s.start();
    await tick();
    const first = FakeEventSource.all[0]!;
    assert.equal(first.url, "/v1/runs/run_1/events?cursor=earliest&token=tok1");
    first.onopen?.();
    first.emit({ type: "start", seq: 1, cursor: "c1" });
    first.emit({ type: "thought", seq: 2, cursor: "c2" });
    first.named("thought", "not json"); // ignored
    first.onerror?.();
    assert.ok(first.closed);
    assert.deepEqual(got.map((e) => e.seq), [1, 2], "events are flushed before reconnecting");
    mock.timers.tick(500);
    await tick();
    const second = FakeEventSource.all[1]!;
    assert.equal(second.url, "/v1/runs/run_1/events?cursor=c2&token=tok2");
    // A slow_consumer cut reconnects from the cursor too, after a longer pause.
    second.emit({ type: "act", seq: 3, cursor: "c3" });
    second.named("slow_consumer", "{}");
    mock.timers.tick(999);
    await tick();
    assert.equal(FakeEventSource.all.length, 2, "reconnected before the backoff");
    mock.timers.tick(1);
    await tick();
    const third = FakeEventSource.all[2]!;
    assert.equal(third.url, "/v1/runs/run_1/events?cursor=c3&token=tok3");
    third.onopen?.();
    third.emit({ type: "complete", seq: 4, cursor: "c4" });
    assert.ok(third.closed, "the stream is closed after the terminal event");
    assert.deepEqual(got.map((e) => e.seq), [1, 2, 3, 4]);
    assert.equal(statuses.at(-1), "ended");
    assert.ok(statuses.includes("reconnecting"));
  } finally {
    mock.timers.reset();
  }
});

test("a sub-agent's terminal event does not end the stream; close stops reconnecting", async () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  try {
    const { s, statuses } = setup(false);
    s.start();
    await tick();
    const es = FakeEventSource.all[0]!;
    assert.equal(es.url, "/v1/runs/run_1/events?cursor=earliest");
    es.emit({ type: "complete", seq: 5, subagent_run_id: "child" });
    assert.ok(!es.closed);
    es.onerror?.();
    s.close();
    mock.timers.tick(60_000);
    await tick();
    assert.equal(FakeEventSource.all.length, 1, "reconnected after close");
    assert.equal(statuses.at(-1), "closed");
  } finally {
    mock.timers.reset();
  }
});

test("an events export is read line by line, torn lines skipped", () => {
  const evs = parseJSONL('{"type":"start","seq":1}\n{"type":\n\n{"seq":3}\n{"type":"complete","seq":4}\n');
  assert.deepEqual(evs.map((e) => e.seq), [1, 4]);
});
