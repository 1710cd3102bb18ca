import assert from "node:assert/strict";
import { test } from "node:test";
import { parseInline, parseMarkdown, safeHref } from "./markdown.ts";

test("headings, lists, code and tables", () => {
  const b = parseMarkdown("## Title\n\nSome **bold** text.\n\n- a\n- b\n\n1. one\n2. two\n\n```sql\nSELECT 1\n```\n\n| a | b |\n|---|--:|\n| x | 1 |\n");
  assert.deepEqual(b.map((x) => x.t), ["h", "p", "ul", "ol", "code", "table"]);
  const t = b[5];
  assert.ok(t && t.t === "table");
  assert.deepEqual(t.align, ["", "right"]);
  assert.equal(t.rows.length, 1);
  const c = b[4];
  assert.ok(c && c.t === "code" && c.v === "SELECT 1" && c.lang === "sql");
});

test("inline marks and safe links only", () => {
  assert.deepEqual(parseInline("a `b` **c** *d*"), [
    { t: "text", v: "a " }, { t: "code", v: "b" }, { t: "text", v: " " }, { t: "strong", c: [{ t: "text", v: "c" }] }, { t: "text", v: " " }, { t: "em", c: [{ t: "text", v: "d" }] },
  ]);
  assert.deepEqual(parseInline("[x](javascript:alert(1))"), [{ t: "text", v: "x" }, { t: "text", v: ")" }]);
  assert.deepEqual(parseInline("[x](https://e.com/a)"), [{ t: "link", href: "https://e.com/a", c: [{ t: "text", v: "x" }] }]);
  assert.equal(safeHref("data:text/html,x"), null);
  assert.deepEqual(parseInline("snake_case_name"), [{ t: "text", v: "snake_case_name" }]);
});

test("HTML is text", () => {
  const b = parseMarkdown("<script>alert(1)</script>");
  assert.deepEqual(b, [{ t: "p", c: [{ t: "text", v: "<script>alert(1)</script>" }] }]);
});

test("deep nesting is bounded", () => {
  const b = parseMarkdown(">".repeat(50) + " x");
  assert.ok(b.length === 1);
  assert.ok(parseInline("**".repeat(200)).length > 0);
});

test("a fence with text after its info string, and a lone fence, end", () => {
  const b = parseMarkdown("```sql extra\nSELECT 1\n```\n```|");
  assert.equal(b[0]?.t, "code");
  assert.ok(b.length <= 2);
  assert.ok(parseMarkdown("text\n```|x").length >= 1);
});
