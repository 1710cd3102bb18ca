import assert from "node:assert/strict";
import { test } from "node:test";
import {
  buildSkillMd, filterRows, frontMatterName, layerOf, nameFromFile, parseEtag, parseSkillPath, preconditionHeaders,
  resolveLayers, skillMdName, skillPath, splitFrontMatter, stateText, uploadType, validProject, validSkillName,
  writeErrorText, yamlString, type SkillMetadata,
} from "./skills.ts";

const sys = (name: string, extra: Partial<SkillMetadata> = {}): SkillMetadata => ({ name, scope: "SKILL_SCOPE_SYSTEM", source: "SKILL_SOURCE_FILES", ...extra });
const ten = (name: string, extra: Partial<SkillMetadata> = {}): SkillMetadata => ({ name, scope: "SKILL_SCOPE_TENANT", source: "SKILL_SOURCE_STORE", ...extra });
const prj = (name: string, extra: Partial<SkillMetadata> = {}): SkillMetadata => ({ name, scope: "SKILL_SCOPE_PROJECT", source: "SKILL_SOURCE_STORE", ...extra });

test("layerOf reads enum names and short names", () => {
  assert.equal(layerOf("SKILL_SCOPE_SYSTEM"), "system");
  assert.equal(layerOf("tenant"), "tenant");
  assert.equal(layerOf("SKILL_SCOPE_UNSPECIFIED"), "");
  assert.equal(layerOf(undefined), "");
});

test("resolveLayers: the most specific layer wins, overridden ones say by which", () => {
  const rows = resolveLayers([prj("a"), ten("a"), sys("a", { is_overridden: true }), sys("b"), ten("c")]);
  assert.deepEqual(rows.map((r) => [r.layer, r.meta.name, r.state, r.overriddenBy, r.winner]), [
    ["system", "a", "overridden", "project", "project"],
    ["system", "b", "active", "", "system"],
    ["tenant", "a", "overridden", "project", "project"],
    ["tenant", "c", "active", "", "tenant"],
    ["project", "a", "active", "", "project"],
  ]);
  assert.equal(stateText(rows[0]!), "overridden by the project skill");
});

test("resolveLayers: a disabled system skill never wins; an override without replacement wins nothing", () => {
  const rows = resolveLayers([sys("d", { is_disabled: true }), sys("o", { is_overridden: true })]);
  assert.deepEqual(rows.map((r) => [r.meta.name, r.state, r.winner]), [["d", "disabled", ""], ["o", "overridden", ""]]);
  assert.equal(stateText(rows[1]!), "overridden (no replacement loaded)");
  // Disabled and overridden by a tenant skill: the tenant one wins; the
  // system one shows disabled.
  const both = resolveLayers([sys("x", { is_disabled: true, is_overridden: true }), ten("x")]);
  assert.deepEqual(both.map((r) => [r.layer, r.state, r.winner]), [["system", "disabled", "tenant"], ["tenant", "active", "tenant"]]);
});

test("resolveLayers skips entries without a layer or name", () => {
  assert.deepEqual(resolveLayers([{ name: "" , scope: "SKILL_SCOPE_SYSTEM" }, { name: "n" }]), []);
});

test("filterRows matches every word in name, description and warnings", () => {
  const rows = resolveLayers([sys("sales-analysis", { description: "Revenue by region" }), ten("brief", { warnings: ["unknown key foo"] })]);
  assert.deepEqual(filterRows(rows, "").length, 2);
  assert.deepEqual(filterRows(rows, "REVENUE region").map((r) => r.meta.name), ["sales-analysis"]);
  assert.deepEqual(filterRows(rows, "foo").map((r) => r.meta.name), ["brief"]);
  assert.deepEqual(filterRows(rows, "revenue foo"), []);
});

test("uploadType by file name", () => {
  assert.equal(uploadType("SKILL.md")?.contentType, "text/markdown");
  assert.equal(uploadType("b.TAR.GZ")?.contentType, "application/gzip");
  assert.equal(uploadType("b.tgz")?.contentType, "application/gzip");
  assert.equal(uploadType("b.tar")?.contentType, "application/x-tar");
  assert.equal(uploadType("b.zip")?.contentType, "application/zip");
  assert.equal(uploadType("b.gz"), null);
  assert.equal(uploadType("notes.txt"), null);
  assert.equal(uploadType(".md"), null);
  assert.equal(nameFromFile("board-brief.tar.gz"), "board-brief");
  assert.equal(nameFromFile("Board-Brief.zip"), "board-brief");
  assert.equal(nameFromFile("my skill.zip"), "");
  assert.equal(nameFromFile("SKILL.md"), "");
});

test("names and projects", () => {
  assert.ok(validSkillName("a-b-1"));
  for (const bad of ["", "A", "a--b", "-a", "a-", "a_b", "x".repeat(65)]) assert.ok(!validSkillName(bad), bad);
  assert.ok(validProject("north_1-A"));
  for (const bad of ["", "a/b", "a b", "x".repeat(129)]) assert.ok(!validProject(bad), bad);
});

test("splitFrontMatter follows the skills service", () => {
  assert.deepEqual(splitFrontMatter("---\nname: a\n---\n\n# Body\n\n"), { ok: true, frontMatter: "name: a\n", body: "# Body" });
  assert.deepEqual(splitFrontMatter("\uFEFF---\r\nname: a\r\n--- \t\r\nbody\r\n"), { ok: true, frontMatter: "name: a\r\n", body: "body" });
  assert.deepEqual(splitFrontMatter("---\n---"), { ok: true, frontMatter: "", body: "" });
  assert.equal(splitFrontMatter("# no front matter").ok, false);
  assert.equal(splitFrontMatter("---").ok, false);
  assert.equal(splitFrontMatter("---\nname: a\n").ok, false);
  assert.equal(splitFrontMatter(" ---\n---\n").ok, false);
  assert.equal(splitFrontMatter("----\n---\n").ok, false);
});

test("frontMatterName reads plain and quoted names", () => {
  assert.equal(frontMatterName("description: x\nname: a-b\n"), "a-b");
  assert.equal(frontMatterName('name: "a-b"\n'), "a-b");
  assert.equal(frontMatterName("name: 'it''s'\n"), "it's");
  assert.equal(frontMatterName("name: a # comment\n"), "a");
  assert.equal(frontMatterName("  name: nested\n"), "");
  assert.equal(frontMatterName("names: x\n"), "");
  assert.equal(skillMdName("---\nname: s\n---\nbody"), "s");
  assert.equal(skillMdName("name: s"), "");
});

test("yamlString quotes what would read back otherwise", () => {
  assert.equal(yamlString("sales-analysis"), "sales-analysis");
  assert.equal(yamlString("Analyse sales, by region"), "Analyse sales, by region");
  for (const s of ["true", "No", "1.0", "-x", "a: b", "a #b", "x ", "", "[a]", "é", 'say "hi"', "line\nnext"]) {
    assert.equal(yamlString(s), JSON.stringify(s), s);
  }
});

test("buildSkillMd rebuilds a SKILL.md the splitter reads back", () => {
  const meta: SkillMetadata = {
    name: "sales-analysis", description: "Analyse sales: revenue, growth.", license: "Apache-2.0", version: "1.0.0",
    allowed_tools: ["sql_query", "file_read"], triggers: ["sales", "销售"], metadata: { owner: "analytics", domain: "bi" },
    extra: { audience: '"analysts"', "allowed-tools": "ignored" }, disable_model_invocation: true, model: "m",
  };
  const text = buildSkillMd(meta, "\n# Sales\n\nSteps.\n\n");
  assert.equal(text, [
    "---", "name: sales-analysis", 'description: "Analyse sales: revenue, growth."', "license: Apache-2.0", 'version: "1.0.0"',
    "model: m", "disable-model-invocation: true", "allowed-tools: [sql_query, file_read]", "triggers:", "  - sales", '  - "销售"',
    "metadata:", "  domain: bi", "  owner: analytics", 'audience: "analysts"', "---", "", "# Sales\n\nSteps.\n",
  ].join("\n"));
  const s = splitFrontMatter(text);
  assert.ok(s.ok);
  if (s.ok) {
    assert.equal(s.body, "# Sales\n\nSteps.");
    assert.equal(frontMatterName(s.frontMatter), "sales-analysis");
  }
});

test("entity tags and preconditions", () => {
  assert.equal(parseEtag('"12"'), "12");
  assert.equal(parseEtag("12"), "12");
  assert.equal(parseEtag('W/"12"'), "");
  assert.equal(parseEtag(null), "");
  assert.equal(parseEtag('"a"b"'), "");
  assert.deepEqual(preconditionHeaders({ create: true }), { "If-None-Match": "*" });
  assert.deepEqual(preconditionHeaders({ ifMatch: "7" }), { "If-Match": '"7"' });
  assert.deepEqual(preconditionHeaders({ ifMatch: "" }), {});
  assert.deepEqual(preconditionHeaders(null), {});
});

test("writeErrorText by status", () => {
  assert.match(writeErrorText(412, "not at revision 3", "Could not save x"), /changed since you opened it.*reload/);
  assert.match(writeErrorText(413, "too big", "Could not upload"), /larger than the gateway accepts/);
  assert.equal(writeErrorText(400, "project: bad", "Could not upload"), "Could not upload: project: bad");
});

test("skill routes round-trip", () => {
  assert.equal(skillPath("tenant", "a-b"), "/skills/tenant/a-b");
  assert.deepEqual(parseSkillPath(skillPath("system", "x y", true)), { layer: "system", name: "x y", edit: true });
  assert.deepEqual(parseSkillPath("/skills/project/a/"), { layer: "project", name: "a", edit: false });
  assert.equal(parseSkillPath("/skills"), null);
  assert.equal(parseSkillPath("/skills/other/a"), null);
  assert.equal(parseSkillPath("/skills/tenant/%E0"), null);
});
