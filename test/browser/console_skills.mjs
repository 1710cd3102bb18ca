// Drives the console's Skills page (/console/skills) in headless Chromium
// against the suite's real skills service and store, as a person would:
// list the system skills and filter them; upload a SKILL.md for the tenant
// (its warning shown; a second create-only upload refused with 412, a
// "replace" accepted at the listed revision; a malformed one's 400); edit
// it (the revision changes; a save over a revision changed behind the
// editor's back is refused with 412 and shown); disable and enable a
// system skill with the keyboard only; override a system skill from its
// SKILL.md; delete the tenant skills (the confirmation answered with the
// keyboard). Every step is checked through the API too. Then the list at
// tablet width. Run by console_pages_test.go (BAAGENT_URL, CHROMIUM,
// SCREENSHOT_DIR, USER_DATA_DIR; DISABLE_SKILL and OVERRIDE_SKILL from
// seedSkills). Prints "PASS console skills"; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session, tabTo } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const DISABLE = mustEnv("DISABLE_SKILL");
const OVERRIDE = mustEnv("OVERRIDE_SKILL");
const NAME = "console-skill";
const PROJECT = "console-proj";
const DETAIL = "sales-analysis";
const SKILL_MD = `---\nname: ${NAME}\ndescription: Uploaded by the console's browser test.\naudience: analysts\n---\n# Console skill\n\nSay hello.\n`;
const WAIT = 30_000;

// apiCall calls the gateway from Node (no keys: the suite is loopback).
async function apiCall(method, p, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) init.body = body;
  if (method !== "GET" && !init.headers["Content-Type"]) init.headers["Content-Type"] = "application/json";
  const r = await fetch(base + p, init);
  const text = await r.text();
  return { status: r.status, etag: r.headers.get("etag"), data: text ? JSON.parse(text) : {} };
}

async function listed(scope) {
  const r = await apiCall("GET", "/v1/skills?scope=" + scope);
  assert.equal(r.status, 200, `GET /v1/skills?scope=${scope}: ${r.status}`);
  return r.data.skills || [];
}

// cards reads the cards of one layer section.
async function cards(page, layer) {
  return page.evaluate((l) => [...document.querySelectorAll(`[data-testid=layer-${l}] [data-testid=skill]`)].map((c) => ({
    name: c.dataset.name, state: c.dataset.state, by: c.dataset.overriddenBy, revision: c.dataset.revision,
    text: c.textContent,
  })), layer);
}

function card(layer, name) { return `[data-testid=layer-${layer}] [data-testid=skill][data-name="${name}"]`; }

async function openList(page) {
  await page.goto(base + "/console/skills");
  await page.waitForSelector(`[data-testid=skills-status][data-status=ready]`, { timeout: WAIT });
}

// outcome waits for a result line (of the upload form or of the page)
// matching re and returns it.
async function outcome(page, re) {
  const h = await page.waitForFunction((src) => {
    const el = [...document.querySelectorAll("[data-testid=skill-outcome]")].find((e) => new RegExp(src).test(e.textContent));
    return el ? { text: el.textContent, kind: el.dataset.kind } : false;
  }, re.source, { timeout: WAIT });
  return h.jsonValue();
}

const expected = new Set(); // "METHOD path status" the script provokes
await session({ height: 1000, failureShot: "skills-failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) problems.push(`console error: ${m.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() < 400) return;
    const key = `${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`;
    if (!expected.has(key)) problems.push(`HTTP ${key}`);
  });

  // The system skills, as the API lists them.
  await openList(page);
  const system = (await listed("system")).map((s) => s.name).sort();
  assert.ok(system.includes(DISABLE) && system.includes(OVERRIDE), `system skills: ${system}`);
  await page.waitForSelector(card("system", DISABLE), { timeout: WAIT });
  const shown = await cards(page, "system");
  assert.deepEqual(shown.map((c) => c.name).sort(), system, "the system section does not list the API's system skills");
  assert.ok(shown.every((c) => c.state === "active"), `system skills should start active: ${JSON.stringify(shown)}`);
  assert.equal(await page.$(card("tenant", NAME)), null, `${NAME} is listed before the upload`);
  await page.fill("[data-testid=filter]", "quality");
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=layer-system] [data-testid=skill]").length === 1, null, { timeout: WAIT });
  assert.deepEqual((await cards(page, "system")).map((c) => c.name), [DISABLE], "the filter");
  await page.fill("[data-testid=filter]", "");
  log(`system skills listed: ${system.join(", ")}`);

  // Upload a SKILL.md for the tenant: created (If-None-Match: *), with the
  // warning for its unknown key; a second create-only upload is refused.
  await page.click("[data-testid=show-upload]");
  await page.setInputFiles("[data-testid=upload-file]", { name: "SKILL.md", mimeType: "text/markdown", buffer: Buffer.from(SKILL_MD) });
  await page.waitForFunction((n) => document.querySelector("[data-testid=upload-name]").value === n, NAME, { timeout: WAIT });
  await page.click("[data-testid=upload-submit]");
  const up = await outcome(page, /Uploaded|Could not/);
  assert.match(up.text, new RegExp(`^Uploaded tenant skill ${NAME} \\(revision [^)]+\\)`), `upload: ${up.text}`);
  assert.match(await page.textContent("[data-testid=upload-warnings]"), /audience/, "the upload's warning is not shown");
  let got = await apiCall("GET", `/v1/skills/${NAME}?level=2`);
  assert.equal(got.status, 200, "the uploaded skill cannot be read");
  const rev0 = got.data.metadata.revision;
  assert.equal(got.etag, `"${rev0}"`, "ETag and revision differ");
  await page.waitForSelector(`${card("tenant", NAME)}[data-revision="${rev0}"][data-state=active]`, { timeout: WAIT });
  assert.ok((await listed("tenant")).some((s) => s.name === NAME), "the API's tenant listing lacks the upload");
  expected.add(`PUT /v1/skills/${NAME} 412`);
  await page.setInputFiles("[data-testid=upload-file]", { name: "SKILL.md", mimeType: "text/markdown", buffer: Buffer.from(SKILL_MD) });
  await page.waitForFunction((n) => document.querySelector("[data-testid=upload-name]").value === n, NAME, { timeout: WAIT });
  await page.click("[data-testid=upload-submit]");
  const again = await outcome(page, /Could not/);
  assert.equal(again.kind, "error", `a second create-only upload: ${again.text}`);
  assert.match(again.text, /changed since you opened it.*reload/, `412 not explained: ${again.text}`);
  got = await apiCall("GET", `/v1/skills/${NAME}?level=2`);
  assert.equal(got.data.metadata.revision, rev0, "the refused upload changed the skill");
  // "Replace" sends If-Match with the revision listed.
  const REPLACED_MD = SKILL_MD.replace("Uploaded by", "Replaced by");
  await page.setInputFiles("[data-testid=upload-file]", { name: "SKILL.md", mimeType: "text/markdown", buffer: Buffer.from(REPLACED_MD) });
  await page.check("[data-testid=upload-replace]");
  await page.waitForSelector("[data-testid=upload-submit]:not([disabled])", { timeout: WAIT });
  await page.click("[data-testid=upload-submit]");
  const replaced = await outcome(page, /Replaced|Could not replace/);
  assert.match(replaced.text, new RegExp(`^Replaced tenant skill ${NAME} \\(revision [^)]+\\)`), `replace: ${replaced.text}`);
  got = await apiCall("GET", `/v1/skills/${NAME}?level=2`);
  const rev1 = got.data.metadata.revision;
  assert.notEqual(rev1, rev0, "the replace did not change the revision");
  assert.match(got.data.metadata.description, /^Replaced by/, "the API does not have the replacement");
  await page.waitForSelector(`${card("tenant", NAME)}[data-revision="${rev1}"]`, { timeout: WAIT });
  log(`uploaded ${NAME} at revision ${rev0}; a second create-only upload refused; replaced at ${rev0}: now ${rev1}`);

  // A SKILL.md the skills service cannot accept: its 400 is shown.
  expected.add("PUT /v1/skills/broken-skill 400");
  await page.setInputFiles("[data-testid=upload-file]", { name: "notes.md", mimeType: "text/markdown", buffer: Buffer.from("# No front matter\n") });
  await page.fill("[data-testid=upload-name]", "broken-skill");
  await page.click("[data-testid=upload-submit]");
  const refused = await outcome(page, /Could not upload broken-skill/);
  assert.match(refused.text, /---/, `the 400 does not say why: ${refused.text}`);
  assert.equal((await apiCall("GET", "/v1/skills/broken-skill")).status, 404, "the refused skill was stored");

  // Edit it: saved at the revision read, which changes.
  await page.click(`${card("tenant", NAME)} [data-action=edit]`);
  await page.waitForSelector(`[data-testid=skill-editor][data-revision="${rev1}"]`, { timeout: WAIT });
  const text = await page.inputValue("[data-testid=editor-text]");
  assert.match(text, /^---\nname: console-skill\n/, `the editor's SKILL.md: ${text}`);
  assert.match(text, /Say hello\./);
  await page.fill("[data-testid=editor-text]", text.replace("Say hello.", "Say hello, edited in the console."));
  await page.waitForFunction(() => /edited in the console/.test(document.querySelector(".preview")?.textContent ?? ""), null, { timeout: WAIT });
  await page.click("[data-testid=editor-save]");
  const saved = await outcome(page, /Saved|Could not/);
  assert.match(saved.text, /^Saved console-skill: revision /, `save: ${saved.text}`);
  got = await apiCall("GET", `/v1/skills/${NAME}?level=2`);
  const rev2 = got.data.metadata.revision;
  assert.notEqual(rev2, rev1, "the save did not change the revision");
  assert.match(got.data.body ?? "", /edited in the console/, `the API does not have the edit: ${JSON.stringify(got.data)}`);
  assert.equal(await page.textContent("[data-testid=editor-revision]"), rev2, "the editor does not show the new revision");
  await page.screenshot({ path: path.join(shots, "skills-edit.png"), fullPage: true });

  // Someone else saves it: the editor's next save is refused with 412.
  const other = await apiCall("PUT", "/v1/skills/" + NAME, SKILL_MD.replace("Say hello.", "Changed elsewhere."), { "Content-Type": "text/markdown", "If-Match": `"${rev2}"` });
  assert.equal(other.status, 200, `the concurrent save: ${other.status} ${JSON.stringify(other.data)}`);
  const rev3 = other.data.skill.revision;
  await page.fill("[data-testid=editor-text]", (await page.inputValue("[data-testid=editor-text]")) + "\nOne more line.\n");
  await page.click("[data-testid=editor-save]");
  const stale = await outcome(page, /Could not save/);
  assert.equal(stale.kind, "error", `a stale save: ${stale.text}`);
  assert.match(stale.text, /changed since you opened it.*reload/, `the stale save's message: ${stale.text}`);
  got = await apiCall("GET", `/v1/skills/${NAME}?level=2`);
  assert.equal(got.data.metadata.revision, rev3, "the stale save changed the skill");
  assert.match(got.data.body, /Changed elsewhere/);
  await page.click("[data-testid=editor-reload]");
  await page.waitForSelector(`[data-testid=skill-editor][data-revision="${rev3}"]`, { timeout: WAIT });
  assert.match(await page.inputValue("[data-testid=editor-text]"), /Changed elsewhere/, "the reload does not show the current SKILL.md");
  log(`edited ${NAME}: ${rev1} → ${rev2}; a save over ${rev3} (saved elsewhere) refused with 412, reloaded`);

  // Disable and enable a system skill with the keyboard only.
  await openList(page);
  await page.waitForSelector(card("system", DISABLE), { timeout: WAIT });
  await tabTo(page, `${card("system", DISABLE)} button[data-action=disable]`, `Disable ${DISABLE}`);
  await page.keyboard.press("Enter");
  await page.waitForSelector(`${card("system", DISABLE)}[data-state=disabled]`, { timeout: WAIT });
  assert.ok((await listed("system")).find((s) => s.name === DISABLE).is_disabled, "the API does not say the skill is disabled");
  assert.ok(!(await listed("")).some((s) => s.name === DISABLE), "a disabled skill is still effective");
  await tabTo(page, `${card("system", DISABLE)} button[data-action=enable]`, `Enable ${DISABLE}`);
  await page.keyboard.press("Enter");
  await page.waitForSelector(`${card("system", DISABLE)}[data-state=active]`, { timeout: WAIT });
  assert.ok(!(await listed("system")).find((s) => s.name === DISABLE).is_disabled, "the API still says the skill is disabled");
  log(`disabled and enabled ${DISABLE} with the keyboard`);

  // One system skill's page: its metadata and its SKILL.md body, as the
  // API gives them.
  const detail = (await apiCall("GET", `/v1/skills/${DETAIL}?level=2`)).data;
  await page.click(`${card("system", DETAIL)} a.name`);
  await page.waitForSelector(`[data-testid=skill-detail][data-layer=system][data-name="${DETAIL}"][data-revision="${detail.metadata.revision}"]`, { timeout: WAIT });
  const heading = detail.body.split("\n").find((l) => l.startsWith("# ")).slice(2);
  await page.waitForSelector(`.skill-body h3:has-text("${heading}")`, { timeout: WAIT });
  const metaText = await page.textContent(".skill-meta");
  for (const tool of detail.metadata.allowed_tools) assert.ok(metaText.includes(tool), `allowed tool ${tool} not shown: ${metaText}`);
  assert.match(metaText, /active/, "the detail does not show the state");
  await page.focus(".front-matter summary");
  await page.keyboard.press("Enter");
  assert.match(await page.textContent("[data-testid=front-matter]"), new RegExp(`^---\\nname: ${DETAIL}\\n`), "the front matter is not shown");
  await page.screenshot({ path: path.join(shots, "skills-detail.png"), fullPage: true });
  await openList(page);

  // Override a system skill: the editor starts from its SKILL.md and
  // stores a tenant skill of the same name, which wins.
  await page.click(`${card("system", OVERRIDE)} [data-action=override]`);
  await page.waitForSelector("[data-testid=skill-editor]", { timeout: WAIT });
  await page.waitForFunction(() => /# Executive summary/.test(document.querySelector("[data-testid=editor-text]")?.value ?? ""), null, { timeout: WAIT });
  const sysText = await page.inputValue("[data-testid=editor-text]");
  assert.match(sysText, new RegExp(`^---\\nname: ${OVERRIDE}\\n`), `the override's SKILL.md: ${sysText}`);
  await page.fill("[data-testid=editor-text]", sysText.replace("# Executive summary", "# Executive summary (tenant)"));
  await page.click("[data-testid=editor-save]");
  await page.waitForSelector(`[data-testid=skill-detail][data-layer=tenant][data-name="${OVERRIDE}"]`, { timeout: WAIT });
  const all = await listed("all");
  assert.ok(all.find((s) => s.name === OVERRIDE && s.scope === "SKILL_SCOPE_SYSTEM").is_overridden, "the API does not say the system skill is overridden");
  assert.ok(all.some((s) => s.name === OVERRIDE && s.scope === "SKILL_SCOPE_TENANT"), "the API has no tenant override");
  got = await apiCall("GET", `/v1/skills/${OVERRIDE}?level=2`);
  assert.match(got.data.body, /Executive summary \(tenant\)/, "the effective skill is not the override");
  await openList(page);
  await page.waitForSelector(`${card("system", OVERRIDE)}[data-state=overridden][data-overridden-by=tenant]`, { timeout: WAIT });
  await page.waitForSelector(`${card("tenant", OVERRIDE)}[data-state=active]`, { timeout: WAIT });
  await page.screenshot({ path: path.join(shots, "skills.png"), fullPage: true });
  log(`overrode ${OVERRIDE} with a tenant skill`);

  // A project's layer: the same name uploaded for the project wins over
  // the tenant's, and the tenant card says so; then it is deleted.
  await page.fill("[data-testid=project]", PROJECT);
  await page.keyboard.press("Enter");
  await page.waitForSelector(`[data-testid=layer-project] h2:has-text("${PROJECT}")`, { timeout: WAIT });
  assert.equal(new URL(page.url()).searchParams.get("project"), PROJECT, "the project is not in the address");
  await page.waitForSelector("[data-testid=skills-status][data-status=ready]", { timeout: WAIT });
  await page.click("[data-testid=show-upload]");
  await page.setInputFiles("[data-testid=upload-file]", { name: "SKILL.md", mimeType: "text/markdown", buffer: Buffer.from(SKILL_MD) });
  await page.waitForFunction((n) => document.querySelector("[data-testid=upload-name]").value === n, NAME, { timeout: WAIT });
  await page.check("[data-testid=upload-to-project]");
  await page.click("[data-testid=upload-submit]");
  const toProject = await outcome(page, /Uploaded|Could not/);
  assert.match(toProject.text, new RegExp(`^Uploaded project skill ${NAME}`), `project upload: ${toProject.text}`);
  await page.waitForSelector(`${card("project", NAME)}[data-state=active]`, { timeout: WAIT });
  await page.waitForSelector(`${card("tenant", NAME)}[data-state=overridden][data-overridden-by=project]`, { timeout: WAIT });
  const inProject = await apiCall("GET", `/v1/skills?scope=project&project=${PROJECT}`);
  assert.ok((inProject.data.skills || []).some((s) => s.name === NAME), "the API's project listing lacks the upload");
  await page.click(`${card("project", NAME)} button[data-action=delete]`);
  await page.click("dialog[data-testid=skill-confirm][open] [data-testid=confirm]");
  await page.waitForSelector(`${card("tenant", NAME)}[data-state=active]`, { timeout: WAIT });
  const leftInProject = await apiCall("GET", `/v1/skills?scope=project&project=${PROJECT}`);
  assert.ok(!(leftInProject.data.skills || []).some((s) => s.name === NAME), "the project skill is still stored");
  await page.fill("[data-testid=project]", "");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=layer-project] .empty-state", { timeout: WAIT });
  await page.click("[data-testid=show-upload]");
  log(`uploaded ${NAME} for project ${PROJECT} (it won over the tenant's) and deleted it`);

  // Delete the tenant skill with the keyboard: Delete…, then Tab from
  // Cancel to the dialog's Delete, Enter.
  await tabTo(page, `${card("tenant", NAME)} button[data-action=delete]`, `Delete ${NAME}`);
  await page.keyboard.press("Enter");
  await page.waitForSelector("dialog[data-testid=skill-confirm][open]", { timeout: WAIT });
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Cancel", "the confirmation does not start on Cancel");
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Delete");
  await page.keyboard.press("Enter");
  await page.waitForFunction((sel) => !document.querySelector(sel), card("tenant", NAME), { timeout: WAIT });
  await outcome(page, new RegExp(`Deleted the tenant skill ${NAME}`));
  assert.equal((await apiCall("GET", `/v1/skills/${NAME}?level=2`)).status, 404, "the API still has the deleted skill");
  // And the override, by pointer; Escape first cancels a confirmation.
  await page.click(`${card("tenant", OVERRIDE)} button[data-action=delete]`);
  await page.waitForSelector("dialog[data-testid=skill-confirm][open]", { timeout: WAIT });
  await page.keyboard.press("Escape");
  await page.waitForSelector("dialog[data-testid=skill-confirm]:not([open])", { state: "attached", timeout: WAIT });
  assert.ok(await page.$(card("tenant", OVERRIDE)), "Escape deleted the skill");
  await page.click(`${card("tenant", OVERRIDE)} button[data-action=delete]`);
  await page.click("dialog[data-testid=skill-confirm][open] [data-testid=confirm]");
  await page.waitForSelector(`${card("system", OVERRIDE)}[data-state=active]`, { timeout: WAIT });
  assert.ok(!(await listed("all")).some((s) => s.name === OVERRIDE && s.scope === "SKILL_SCOPE_TENANT"), "the override is still stored");
  log(`deleted ${NAME} (keyboard) and the override of ${OVERRIDE}`);

  // Tablet width: one column, nothing wider than the screen.
  await page.setViewportSize({ width: 768, height: 1024 });
  await openList(page);
  await page.waitForSelector(card("system", DISABLE), { timeout: WAIT });
  const overflow = await page.evaluate(() => {
    const el = document.querySelector(".skills");
    return { doc: document.documentElement.scrollWidth, page: el.scrollWidth, width: el.clientWidth };
  });
  assert.ok(overflow.doc <= 768 && overflow.page <= overflow.width, `wider than a tablet: ${JSON.stringify(overflow)}`);
  await page.screenshot({ path: path.join(shots, "skills-tablet.png"), fullPage: true });

  assert.deepEqual(problems, [], "the page reported errors");
  log("PASS console skills");
});
