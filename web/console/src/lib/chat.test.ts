import assert from "node:assert/strict";
import { test } from "node:test";
import { applyAll, applyEvent, newChat, withRunRecord, type RunEvent } from "./chat.ts";

const run: RunEvent[] = [
  { seq: 1, cursor: "c1", type: "start", start: { input: "Compare Q3 and Q4", query_complexity: "QUERY_COMPLEXITY_COMPLEX" } },
  { seq: 2, cursor: "c2", type: "work_plan", work_plan: { revision: 1, steps: [{ step_number: 1, description: "By region" }, { step_number: 2, description: "By segment" }] } },
  { seq: 3, cursor: "c3", type: "plan_step_start", plan_step_start: { step_number: 1, total_steps: 2, revision: 1 } },
  { seq: 4, cursor: "c4", type: "thought", thought: { thought: "query first" } },
  { seq: 5, cursor: "c5", type: "act", act: { tool_call_id: "t1", tool_name: "sql_query", tool_input: { query: "SELECT 1" } } },
  { seq: 6, cursor: "c6", type: "observe", observe: { tool_call_id: "t1", tool_name: "sql_query", observation: "| a | b |\n|---|---|\n| x | 1 |", success: true, duration_ms: 12.4, output_level: "OUTPUT_LEVEL_FULL", cached: true, artifact_id: "art-1" } },
  { seq: 7, cursor: "c7", type: "plan_step_end", plan_step_end: { step_number: 1, status: "PLAN_STEP_STATUS_COMPLETED", summary: "done 1" } },
  { seq: 8, cursor: "c8", type: "cost_update", cost_update: { total_input_tokens: 100, total_output_tokens: 20, total_cost_usd: 0.01, price_known: true } },
  { seq: 9, cursor: "c9", type: "text_delta", step: 3, text_delta: { delta: "## Answer\n" } },
  { seq: 10, cursor: "c10", type: "text_delta", step: 3, text_delta: { delta: "It grew." } },
  { seq: 11, cursor: "c11", type: "complete", complete: { content: "## Answer\nIt grew." } },
];

test("a run becomes bubbles, a tool card with its result, a plan and the answer", () => {
  const s = applyAll(newChat("r1"), run);
  assert.deepEqual(s.items.map((i) => i.kind), ["user", "thought", "tool", "answer"]);
  const tool = s.items[2];
  assert.ok(tool && tool.kind === "tool");
  assert.equal(tool.name, "sql_query");
  assert.match(tool.args, /SELECT 1/);
  assert.ok(tool.result);
  assert.equal(tool.result.cached, true);
  assert.equal(tool.result.outputLevel, "full");
  assert.equal(tool.result.artifactId, "art-1");
  assert.deepEqual(s.plan?.steps.map((x) => x.status), ["done", "pending"]);
  assert.equal(s.status, "completed");
  assert.equal(s.ended, true);
  assert.equal(s.cursor, "c11");
  assert.equal(s.lastSeq, 11);
  assert.equal(s.usage.inputTokens, 100);
  assert.equal(s.complexity, "QUERY_COMPLEXITY_COMPLEX");
  const answer = s.items[3];
  assert.ok(answer && answer.kind === "answer");
  assert.equal(answer.text, "## Answer\nIt grew.");
});

test("a replay after a reconnect repeats nothing", () => {
  const first = applyAll(newChat("r1"), run.slice(0, 7));
  const again = applyAll(first, run); // the server replays from an older cursor
  const once = applyAll(newChat("r1"), run);
  assert.deepEqual(again.items, once.items);
  assert.equal(again.duplicates, 7);
  assert.equal(again.applied, 11);
  // A duplicate returns the same items array: nothing re-renders.
  const dup = applyEvent(once, run[3]!);
  assert.equal(dup.items, once.items);
});

test("prompts are answered inline and the run waits meanwhile", () => {
  let s = applyAll(newChat("r2"), [
    { seq: 1, type: "start", start: { input: "q" } },
    { seq: 2, type: "clarification_asked", clarification_asked: { question_id: "q1", question: "Which period?", options: [{ label: "Q2", is_recommended: true }, { label: "Q3" }] } },
  ]);
  assert.equal(s.status, "waiting");
  const p = s.items[1];
  assert.ok(p && p.kind === "prompt");
  assert.deepEqual(p.options.map((o) => o.recommended), [true, false]);
  s = applyEvent(s, { seq: 3, type: "clarification_answered", clarification_answered: { question_id: "q1", answer: "Q3" } });
  const a = s.items[1];
  assert.ok(a && a.kind === "prompt");
  assert.equal(a.answered, true);
  assert.equal(a.answer, "Q3");
  assert.equal(s.status, "running");
  s = applyEvent(s, { seq: 4, type: "permission_asked", permission_asked: { tool_name: "rm", arguments: "{}", decision: { decision_id: "d1", options: [{ label: "allow" }] } } });
  s = applyEvent(s, { seq: 5, type: "permission_replied", permission_replied: { decision_id: "d1", reply: "allow" } });
  const perm = s.items[2];
  assert.ok(perm && perm.kind === "prompt" && perm.promptKind === "permission" && perm.answer === "allow");
});

test("sub-agent events update their card and never end the run", () => {
  const s = applyAll(newChat("r3"), [
    { seq: 1, type: "start", start: { input: "q" } },
    { seq: 2, type: "subagent_assigned", subagent_assigned: { child_run_id: "child", subagent_type: "analyst", description: "look" } },
    { seq: 3, type: "act", subagent_run_id: "child", act: { tool_name: "sql_query" } },
    { seq: 4, type: "complete", subagent_run_id: "child", complete: { content: "found" } },
  ]);
  assert.equal(s.ended, false);
  const c = s.items[1];
  assert.ok(c && c.kind === "subagent");
  assert.equal(c.status, "completed");
  assert.deepEqual(c.tools, ["sql_query"]);
  assert.equal(c.summary, "found");
});

test("a replay that starts late marks a gap and takes the plan from the run record", () => {
  let s = applyEvent(newChat("r4"), { seq: 40, type: "thought", thought: { thought: "x" } });
  assert.equal(s.gap, true);
  s = withRunRecord(s, { trace_id: "tr", plan: { revision: 2, steps: [{ step_number: 1, description: "a", status: "PLAN_STEP_STATUS_COMPLETED" }] } });
  assert.equal(s.traceId, "tr");
  assert.equal(s.plan?.revision, 2);
  assert.equal(s.plan?.steps[0]?.status, "done");
});

test("an older plan revision does not replace a newer one", () => {
  const s = applyAll(newChat("r5"), [
    { seq: 1, type: "work_plan", work_plan: { revision: 2, steps: [{ step_number: 1, description: "new" }] } },
    { seq: 2, type: "work_plan", work_plan: { revision: 1, steps: [{ step_number: 1, description: "old" }] } },
    { seq: 3, type: "plan_step_start", plan_step_start: { step_number: 3, total_steps: 3, revision: 2 } },
  ]);
  assert.equal(s.plan?.steps[0]?.description, "new");
  assert.equal(s.plan?.steps.length, 3);
  assert.equal(s.plan?.steps[2]?.status, "running");
});

test("hostile payloads do not throw", () => {
  const junk: RunEvent[] = [
    { type: "act", seq: "x" as unknown as number, act: null },
    { type: "observe", observe: 5 },
    { type: "work_plan", seq: 2, work_plan: { steps: "no" } },
    { type: "plan_step_end", seq: 3, plan_step_end: { step_number: 1e9 } },
    { type: "unknown_type", seq: 4 },
  ];
  const s = applyAll(newChat("r6"), junk);
  assert.equal(s.applied, 3);
});
