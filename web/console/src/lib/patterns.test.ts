import assert from "node:assert/strict";
import { test } from "node:test";
import {
  checkPatch, effectiveRate, formOf, gates, ifMatch, isEmptyPatch, listQuery, num, parseETag, parseTools, patchOf,
  sortPatterns, stateName, stateOfGates, stateReason, type Pattern,
} from "./patterns.ts";

const NOW = Date.parse("2026-06-01T12:00:00Z");
const DAY = 24 * 3600 * 1000;
const iso = (ms: number) => new Date(ms).toISOString();

// learned: a pattern as the API returns one after three successful runs.
const learned: Pattern = {
  id: "pt_01", name: "ranking of product", description: "", task_type: "ranking",
  steps: [{ description: "sql_query", tools: ["sql_query"] }],
  tool_chains: [{ tools: ["sql_query"] }],
  usage_count: 3, success_count: 3, success_rate: 1, effective_success_rate: 1,
  state: "PATTERN_STATE_ACTIVE", version: "4",
  created_at: iso(NOW - 2 * DAY), updated_at: iso(NOW - DAY), last_used_at: iso(NOW - DAY), last_queried_at: iso(NOW - DAY),
};

const passed = (p: Pattern) => Object.fromEntries(gates(p, NOW).map((g) => [g.key, g.passed]));

test("an active pattern passes every gate", () => {
  const gs = gates(learned, NOW);
  assert.equal(gs.length, 6);
  assert.ok(gs.every((g) => g.passed), JSON.stringify(gs));
  assert.equal(stateOfGates(gs), "active");
  assert.equal(stateReason("active", gs), "passes every gate: offered to runs");
});

test("a pattern with two successes is a candidate that needs a third", () => {
  const p = { ...learned, usage_count: 2, success_count: 2 };
  assert.equal(passed(p)["successes"], false);
  const gs = gates(p, NOW);
  assert.equal(stateOfGates(gs), "candidate");
  assert.match(stateReason("candidate", gs), /needs ≥ 3 successes/);
});

test("never queried or queried over 7 days ago keeps it a candidate", () => {
  const { last_queried_at: _, ...never } = learned;
  assert.equal(passed(never)["queried"], false);
  assert.equal(stateOfGates(gates(never, NOW)), "candidate");
  const old = { ...learned, last_queried_at: iso(NOW - 8 * DAY) };
  assert.equal(stateOfGates(gates(old, NOW)), "candidate");
  const edge = { ...learned, last_queried_at: iso(NOW - 7 * DAY) };
  assert.equal(stateOfGates(gates(edge, NOW)), "active");
});

test("demotion gates win in order: archived, untrusted, draft", () => {
  const old = iso(NOW - 181 * DAY);
  const archived = { ...learned, last_used_at: old, updated_at: old, consecutive_failures: 9, effective_success_rate: 0.1 };
  assert.equal(stateOfGates(gates(archived, NOW)), "archived");
  const untrusted = { ...learned, consecutive_failures: 6, effective_success_rate: 0.1 };
  assert.equal(stateOfGates(gates(untrusted, NOW)), "untrusted");
  assert.equal(stateOfGates(gates({ ...learned, consecutive_failures: 5 }, NOW)), "active");
  const draft = { ...learned, effective_success_rate: 0.39 };
  assert.equal(stateOfGates(gates(draft, NOW)), "draft");
  assert.equal(stateOfGates(gates({ ...learned, effective_success_rate: 0.4 }, NOW)), "candidate", "0.4 is not draft but below 0.6");
  assert.equal(stateOfGates(gates({ ...learned, effective_success_rate: 0.6 }, NOW)), "active");
});

test("a pattern without uses is not draft", () => {
  const p: Pattern = { id: "x", usage_count: 0, success_rate: 0, created_at: iso(NOW) };
  assert.equal(passed(p)["not-draft"], true);
  assert.equal(stateOfGates(gates(p, NOW)), "candidate");
});

test("an edit counts as a use for the archive gate; creation when nothing else", () => {
  const p = { ...learned, last_used_at: iso(NOW - 200 * DAY), updated_at: iso(NOW - DAY) };
  assert.equal(passed(p)["recent-use"], true);
  const q: Pattern = { id: "y", created_at: iso(NOW - 181 * DAY) };
  assert.equal(passed(q)["recent-use"], false);
});

test("the effective rate decays 0.8 per full 90 days when the API gives none", () => {
  const p: Pattern = { id: "z", success_rate: 1, updated_at: iso(NOW - 181 * DAY) };
  assert.ok(Math.abs(effectiveRate(p, NOW) - 0.64) < 1e-9);
  assert.equal(effectiveRate({ ...p, updated_at: iso(NOW - 89 * DAY) }, NOW), 1);
  assert.equal(effectiveRate({ ...p, effective_success_rate: 0.5 }, NOW), 0.5);
});

test("state names and int64 strings", () => {
  assert.equal(stateName("PATTERN_STATE_UNTRUSTED"), "untrusted");
  assert.equal(stateName("PATTERN_STATE_UNSPECIFIED"), "");
  assert.equal(stateName(undefined), "");
  assert.equal(num("12"), 12);
  assert.equal(num(7), 7);
  assert.equal(num("x"), 0);
  assert.equal(num(NaN), 0);
});

test("ETags and If-Match", () => {
  assert.equal(parseETag('"7"'), 7);
  assert.equal(parseETag("7"), 7);
  assert.equal(parseETag(' "12" '), 12);
  assert.equal(parseETag('W/"7"'), 0);
  assert.equal(parseETag('"0"'), 0);
  assert.equal(parseETag('"-1"'), 0);
  assert.equal(parseETag(""), 0);
  assert.equal(parseETag(null), 0);
  assert.equal(parseETag('"7", "8"'), 0);
  assert.equal(ifMatch(7), '"7"');
  assert.equal(parseETag(ifMatch(123)), 123);
});

test("an untouched form makes an empty patch", () => {
  const b = patchOf(learned, formOf(learned));
  assert.deepEqual(b, {});
  assert.ok(isEmptyPatch(b));
});

test("the patch holds only what changed", () => {
  const f = formOf(learned);
  f.name = "  Top products of a month  ";
  assert.deepEqual(patchOf(learned, f), { name: "Top products of a month" });
  const g = formOf(learned);
  g.toolChain = "sql_query, chart";
  assert.deepEqual(patchOf(learned, g), { tool_chain: ["sql_query", "chart"] });
  const h = formOf(learned);
  h.description = "Ranks a month's products";
  assert.deepEqual(patchOf(learned, h), { description: "Ranks a month's products" });
});

test("a changed step sends every step", () => {
  const p: Pattern = { ...learned, steps: [{ description: "a", tools: ["t1"] }, { description: "b", corrections: ["fix"] }] };
  const f = formOf(p);
  assert.equal(f.steps[1]?.corrections, "fix");
  (f.steps[0] as { expected_output: string }).expected_output = "a table";
  assert.deepEqual(patchOf(p, f), { steps: [{ description: "a", tools: ["t1"], expected_output: "a table" }, { description: "b", corrections: ["fix"] }] });
  const g = formOf(p);
  g.steps.pop();
  assert.deepEqual(patchOf(p, g).steps, [{ description: "a", tools: ["t1"] }]);
});

test("tool lists and corrections are parsed from what a person types", () => {
  assert.deepEqual(parseTools(" sql_query,chart  python\n,, "), ["sql_query", "chart", "python"]);
  assert.deepEqual(parseTools(""), []);
  const p: Pattern = { ...learned, steps: [{ description: "a" }] };
  const f = formOf(p);
  (f.steps[0] as { corrections: string }).corrections = "one\n\n  two  \r\n";
  assert.deepEqual(patchOf(p, f).steps, [{ description: "a", corrections: ["one", "two"] }]);
});

test("checkPatch refuses what the gateway refuses", () => {
  assert.deepEqual(checkPatch({ name: "ok" }), {});
  assert.equal(checkPatch({ name: "" })["name"], "required");
  assert.match(checkPatch({ name: "é".repeat(61) })["name"] ?? "", /120 bytes/);
  assert.ok(checkPatch({ description: "x".repeat(2049) })["description"]);
  assert.ok(checkPatch({ steps: [] })["steps"]);
  assert.ok(checkPatch({ steps: [{ description: "" }] })["steps[0].description"]);
  assert.ok(checkPatch({ steps: Array.from({ length: 21 }, () => ({ description: "s" })) })["steps"]);
  assert.ok(checkPatch({ tool_chain: [] })["tool_chain"]);
  assert.ok(checkPatch({ tool_chain: Array.from({ length: 21 }, () => "t") })["tool_chain"]);
  assert.ok(checkPatch({ tool_chain: ["a\u0001"] })["tool_chain[0]"]);
  assert.ok(checkPatch({ steps: [{ description: "s", corrections: ["1", "2", "3", "4", "5", "6"] }] })["steps[0].corrections"]);
});

test("sorting by a column keeps ties in the API's order", () => {
  const a = { ...learned, id: "a", name: "b", usage_count: 3, version: "2" };
  const b = { ...learned, id: "b", name: "a", usage_count: 9, version: "10" };
  const c = { ...learned, id: "c", name: "c", usage_count: 3, version: "1" };
  assert.deepEqual(sortPatterns([a, b, c], "uses", true, NOW).map((p) => p.id), ["b", "a", "c"]);
  assert.deepEqual(sortPatterns([a, b, c], "uses", false, NOW).map((p) => p.id), ["a", "c", "b"]);
  assert.deepEqual(sortPatterns([a, b, c], "name", false, NOW).map((p) => p.id), ["b", "a", "c"]);
  assert.deepEqual(sortPatterns([a, b, c], "version", true, NOW).map((p) => p.id), ["b", "a", "c"], "versions compare as numbers, not strings");
});

test("the list query holds only what is set", () => {
  assert.equal(listQuery({}), "");
  assert.equal(listQuery({ state: "active", include_shared: true, page_token: "a b", task_type: "" }), "?state=active&include_shared=true&page_token=a+b");
});
