// Seeded random SKILL.md texts through the front-matter splitter and the
// editor's rebuild: nothing throws, what the splitter returns reads back
// the same, and a rebuilt SKILL.md keeps its name and body.
import assert from "node:assert/strict";
import { test } from "node:test";
import { buildSkillMd, frontMatterName, splitFrontMatter, yamlString } from "./skills.ts";
import { randomText, rng } from "./testrand.ts";

const PIECES = ["---", "--- ", "----", "\n", "\r\n", "\r", " ", "\t", "\uFEFF", "name:", " name:", "name: a", '"', "'", "#", ":", "x", "é", "销售", "\u0000", "- ", "[", "]", "{", "}", "\\", "true", "1.0", "\u2028"];

test("random texts through splitFrontMatter", () => {
  const r = rng(2029);
  for (let i = 0; i < 5000; i++) {
    const s = (r() < 0.5 ? "---\n" : "") + randomText(r, PIECES, Math.floor(r() * 60));
    const got = splitFrontMatter(s);
    if (!got.ok) {
      assert.ok(got.error.length > 0);
      continue;
    }
    // The body is trimmed; the front matter holds no delimiter line; putting
    // them back together splits the same way.
    assert.equal(got.body, got.body.trim(), JSON.stringify(s));
    for (const line of got.frontMatter.split("\n")) assert.notEqual(line.replace(/[ \t\r]+$/, ""), "---", JSON.stringify(s));
    const again = splitFrontMatter("---\n" + got.frontMatter + "---\n" + got.body);
    assert.deepEqual(again, got, JSON.stringify(s));
    assert.equal(typeof frontMatterName(got.frontMatter), "string");
  }
});

test("random metadata rebuilt keeps its name, description and body", () => {
  const r = rng(7);
  const word = () => randomText(r, PIECES, 1 + Math.floor(r() * 6));
  for (let i = 0; i < 2000; i++) {
    const name = "s" + Math.floor(r() * 1000);
    const description = word();
    const body = word();
    const text = buildSkillMd({ name, description, triggers: [word()], metadata: { [word()]: word() } }, body);
    const got = splitFrontMatter(text);
    assert.ok(got.ok, JSON.stringify(text));
    if (!got.ok) continue;
    assert.equal(frontMatterName(got.frontMatter), name);
    assert.equal(got.body, body.trim(), JSON.stringify(text));
    // Every line of the rebuilt front matter is one YAML line: a value
    // never breaks out of its line.
    for (const line of got.frontMatter.split("\n").filter(Boolean)) assert.match(line, /^( {2}(- )?)?[^\n]*$/);
    const quoted = yamlString(description);
    if (quoted.startsWith('"')) assert.equal(JSON.parse(quoted), description);
  }
});
