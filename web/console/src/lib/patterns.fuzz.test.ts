// Seeded random input through what the Patterns page parses: what a person
// types in the edit form (tool lists, corrections, names), entity tags,
// and random API patterns through the gates. Nothing may throw; the PATCH
// body holds only changed fields and round-trips through the form.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkPatch, formOf, gates, parseETag, parseLines, parseTools, patchOf, stateOfGates, STATES, type Pattern } from "./patterns.ts";
import { randomText, rng } from "./testrand.ts";

const PIECES = [",", " ", "\n", "\r\n", "\t", "sql_query", "chart", "é", "工具", "\u0000", "\u007f", '"', "W/", "7", "-1", "0", "99999999999999999999", "x".repeat(130), ";", "\u2028", ",,", "  "];

test("random typing through the tool and line parsers", () => {
  const r = rng(29);
  for (let i = 0; i < 3000; i++) {
    const s = randomText(r, PIECES, Math.floor(r() * 40));
    const tools = parseTools(s);
    for (const t of tools) {
      assert.ok(t.length > 0 && !/[\s,]/u.test(t), JSON.stringify([s, t]));
    }
    // Joining what was parsed and parsing again gives the same tools.
    assert.deepEqual(parseTools(tools.join(", ")), tools);
    for (const l of parseLines(s)) assert.ok(l === l.trim() && l !== "" && !/[\r\n]/.test(l), JSON.stringify(s));
  }
});

test("random entity tags never give a version that is not a positive safe integer", () => {
  const r = rng(7);
  for (let i = 0; i < 3000; i++) {
    const v = parseETag(randomText(r, PIECES, Math.floor(r() * 6)));
    assert.ok(v === 0 || (Number.isSafeInteger(v) && v > 0), String(v));
  }
});

function randomPattern(r: () => number): Pattern {
  const maybe = <T>(v: T): T | undefined => (r() < 0.3 ? undefined : v);
  const date = () => (r() < 0.2 ? randomText(r, PIECES, 2) : new Date(Date.UTC(2026, 0, 1) + Math.floor((r() - 0.5) * 400) * 86400000).toISOString());
  const p: Pattern = { id: "pt_" + i++ };
  const set = <K extends keyof Pattern>(k: K, v: Pattern[K] | undefined) => {
    if (v !== undefined) p[k] = v;
  };
  set("name", maybe(randomText(r, PIECES, 4)));
  set("description", maybe(randomText(r, PIECES, 6)));
  set("steps", maybe(Array.from({ length: Math.floor(r() * 4) }, () => ({ description: randomText(r, PIECES, 3), tools: parseTools(randomText(r, PIECES, 4)), corrections: parseLines(randomText(r, PIECES, 4)) }))));
  set("tool_chains", maybe([{ tools: parseTools(randomText(r, PIECES, 5)) }]));
  set("usage_count", maybe(Math.floor(r() * 10)));
  set("success_count", maybe(Math.floor(r() * 10)));
  set("consecutive_failures", maybe(Math.floor(r() * 10)));
  set("success_rate", maybe(r()));
  set("effective_success_rate", maybe(r() < 0.1 ? NaN : r()));
  set("updated_at", maybe(date()));
  set("created_at", maybe(date()));
  set("last_used_at", maybe(date()));
  set("last_queried_at", maybe(date()));
  return p;
}
let i = 0;

test("random patterns through the gates and the edit form", () => {
  const r = rng(11);
  const now = Date.UTC(2026, 0, 1);
  for (let n = 0; n < 2000; n++) {
    const p = randomPattern(r);
    const gs = gates(p, now);
    assert.equal(gs.length, 6);
    assert.ok((STATES as readonly string[]).includes(stateOfGates(gs)));
    // The untouched form changes nothing, whatever the pattern holds
    // (steps the API gave with blanks aside: the form trims them).
    const f = formOf(p);
    const b = patchOf(p, f);
    for (const k of Object.keys(b)) assert.ok(["name", "description", "steps", "tool_chain"].includes(k), k);
    if (b.name !== undefined) assert.notEqual(b.name, p.name);
    if (b.tool_chain !== undefined) assert.notDeepEqual(b.tool_chain, p.tool_chains?.[0]?.tools ?? []);
    // A typed edit is parsed and checked without throwing, and the
    // checked body's every key names a field of the edit.
    f.name = randomText(r, PIECES, 3);
    f.toolChain = randomText(r, PIECES, 5);
    const step = f.steps[0];
    if (step) step.tools = randomText(r, PIECES, 5);
    const e = checkPatch(patchOf(p, f));
    for (const k of Object.keys(e)) assert.match(k, /^(name|description|steps|tool_chain)/);
  }
});
