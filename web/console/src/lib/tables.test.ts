import assert from "node:assert/strict";
import { test } from "node:test";
import { detectTable, parseNumber, splitDelimited, splitPipeRow } from "./tables.ts";

test("a Markdown table from sql_query is found with numeric cells", () => {
  const t = detectTable("| region | q3_revenue | q4_revenue |\n|---|---|---|\n| North | 1200.5 | 1300 |\n| South | 900 | NULL |\n\n(2 rows)");
  assert.ok(t);
  assert.equal(t.source, "markdown");
  assert.deepEqual(t.columns, ["region", "q3_revenue", "q4_revenue"]);
  assert.deepEqual(t.rows, [["North", 1200.5, 1300], ["South", 900, null]]);
});

test("escaped pipes stay in their cell", () => {
  assert.deepEqual(splitPipeRow("| a \\| b | c |"), ["a | b", "c"]);
});

test("a JSON array of objects, and one nested in an object", () => {
  const t = detectTable('[{"month":"2026-01","revenue":10},{"month":"2026-02","revenue":"12.5","extra":true}]');
  assert.ok(t);
  assert.equal(t.source, "json");
  assert.deepEqual(t.columns, ["month", "revenue", "extra"]);
  assert.deepEqual(t.rows[1], ["2026-02", 12.5, "true"]);
  const n = detectTable('{"rows":[{"a":1},{"a":2}],"count":2}');
  assert.ok(n);
  assert.deepEqual(n.rows, [[1], [2]]);
});

test("JSON that is not a list of objects is no table", () => {
  assert.equal(detectTable("[1,2,3]"), null);
  assert.equal(detectTable('{"a":1}'), null);
  assert.equal(detectTable("[{"), null);
});

test("CSV with quotes, and TSV", () => {
  const t = detectTable('name,amount\n"Smith, J",1,200\n');
  assert.equal(t, null, "a row with a different field count ends the block");
  const c = detectTable('name,amount\n"Smith, J","1,200"\nDoe,3\n');
  assert.ok(c);
  assert.equal(c.source, "csv");
  assert.deepEqual(c.rows, [["Smith, J", 1200], ["Doe", 3]]);
  const tsv = detectTable("a\tb\nx\t1\ny\t2");
  assert.ok(tsv);
  assert.deepEqual(tsv.columns, ["a", "b"]);
});

test("prose with commas is no table", () => {
  assert.equal(detectTable("Revenue grew, as expected.\nCosts fell, too."), null);
  assert.equal(detectTable(""), null);
});

test("numbers: thousands, currency, percent; not dates or codes", () => {
  assert.equal(parseNumber("1,234.5"), 1234.5);
  assert.equal(parseNumber("-$3.20"), -3.2);
  assert.equal(parseNumber("12%"), 12);
  assert.equal(parseNumber("2026-01-02"), null);
  assert.equal(parseNumber("A12"), null);
  assert.equal(parseNumber("1,23"), null);
});

test("an unterminated quote is no row", () => {
  assert.equal(splitDelimited('"abc,def', ","), null);
});

test("huge tables are bounded", () => {
  const rows = Array.from({ length: 2000 }, (_, i) => ({ k: "r" + i, v: i }));
  const t = detectTable(JSON.stringify(rows));
  assert.ok(t);
  assert.equal(t.rows.length, 500);
});
