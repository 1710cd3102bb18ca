// Seeded random inputs through the parsers and the reducer: none may throw,
// and what they make stays within its bounds. (The Go side's parsers are
// fuzzed with go test -fuzz; these are their TypeScript counterparts.)
import assert from "node:assert/strict";
import { test } from "node:test";
import { planChart } from "./chart.ts";
import { applyEvent, MAX_ITEMS, newChat, type RunEvent } from "./chat.ts";
import { parseMarkdown } from "./markdown.ts";
import { detectTable, MAX_COLUMNS, MAX_ROWS } from "./tables.ts";
import { randomText, rng } from "./testrand.ts";

const PIECES = ["|", "---", ":--", "\n", ",", "\t", '"', "*", "**", "_", "`", "```", "[", "]", "(", ")", "https://x", "javascript:", "#", "> ", "- ", "1. ", "\\", "{", "}", "[{", '"a":', "1", "-2.5", "1,234", "2025-Q3", "NULL", "x", " ", "é", "\u0000"];

test("random text through table detection, chart choice and Markdown", () => {
  const r = rng(29);
  for (let i = 0; i < 3000; i++) {
    const s = randomText(r, PIECES, Math.floor(r() * 120));
    const t = detectTable(s);
    if (t) {
      assert.ok(t.columns.length <= MAX_COLUMNS && t.rows.length <= MAX_ROWS, s);
      for (const row of t.rows) for (const c of row) assert.ok(c === null || typeof c === "string" || Number.isFinite(c), s);
      const p = planChart(t);
      if (p) {
        assert.ok(p.kinds.includes(p.kind) && p.series.length > 0 && !p.series.includes(p.category), s);
      }
    }
    assert.ok(Array.isArray(parseMarkdown(s)), s);
  }
});

test("random event sequences through the reducer", () => {
  const r = rng(7);
  const types = ["start", "thought", "text_delta", "act", "observe", "work_plan", "plan_step_start", "plan_step_end", "clarification_asked", "clarification_answered", "subagent_assigned", "complete", "error", "stream_reset", "cost_update", "warning"];
  for (let run = 0; run < 200; run++) {
    let s = newChat("r");
    const seen = new Set<number>();
    for (let i = 0; i < 60; i++) {
      const type = types[Math.floor(r() * types.length)] ?? "thought";
      const seq = 1 + Math.floor(r() * 40);
      const junk = r() < 0.5 ? randomText(r, PIECES, 5) : { tool_call_id: "t" + Math.floor(r() * 3), step_number: Math.floor(r() * 5) - 1, steps: [{ step_number: 1 }], question_id: "q", delta: "d", options: [{ label: randomText(r, PIECES, 2) }] };
      const ev: RunEvent = { type, seq, step: Math.floor(r() * 3), [type]: junk };
      if (r() < 0.2) ev.subagent_run_id = "child";
      s = applyEvent(s, ev);
      if (type !== "stream_reset") seen.add(seq);
    }
    assert.ok(s.items.length <= MAX_ITEMS);
    assert.equal(s.applied, seen.size, "each seq is applied once");
  }
});
