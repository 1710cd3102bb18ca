// Drives the dashboard's Skills section in headless Chromium as a person
// would, with the keyboard where a person could: upload a SKILL.md, find
// it in the tenant listing, disable and enable a system skill, see an
// upload refused, and delete the uploaded skill. Run by skills_test.go,
// which starts a gateway and sets BAAGENT_URL, CHROMIUM, SCREENSHOT_DIR,
// USER_DATA_DIR and SYSTEM_SKILL (a system skill the tenant may disable).
// Prints "PASS skills" at the end; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const systemSkill = mustEnv("SYSTEM_SKILL");
const NAME = "browser-skill";
const SKILL_MD = `---\nname: ${NAME}\ndescription: Uploaded by the browser test.\n---\n# Browser skill\n\nSay hello.\n`;
const WAIT = 20_000;

// status is the Skills section's live status line and its kind
// (loading, ok, empty, error).
async function status(page) {
  return page.evaluate(() => {
    const el = document.getElementById("skills-status");
    return { text: el.textContent, kind: el.dataset.kind || "" };
  });
}

// settled waits until the list is loaded (or failed) and returns the rows.
async function listed(page, scope) {
  if (scope !== undefined) await page.selectOption("#skills-scope", scope);
  await page.waitForFunction(() => !document.getElementById("skills-table").hasAttribute("aria-busy") &&
    document.getElementById("skills-status").dataset.kind !== "loading", null, { timeout: WAIT });
  return page.evaluate(() => [...document.querySelectorAll("#skills-rows tr")].map((tr) => ({
    name: tr.dataset.name, layer: tr.dataset.layer, disabled: tr.dataset.disabled === "true",
    overridden: tr.dataset.overridden === "true", revision: tr.dataset.revision,
    actions: [...tr.querySelectorAll("button")].map((b) => b.dataset.action),
  })));
}

function row(rows, name) { return rows.find((r) => r.name === name); }

async function waitStatus(page, re) {
  await page.waitForFunction((src) => new RegExp(src).test(document.getElementById("skills-status").textContent),
    re.source, { timeout: WAIT });
  return status(page);
}

const expected = new Set(); // "METHOD path-prefix status" the test provokes
await session({ height: 1000, failureShot: "skills-failure.png" }, async (page, problems) => {
  // Only the Skills section is under test here: other parts of the page
  // may have no backend in this harness.
  const ours = (url) => url.includes("/v1/skills");
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  // Chromium logs every failed response as a console error; responses
  // are checked one by one below.
  page.on("console", (m) => {
    if (m.type() === "error" && ours(m.location().url || "") && !m.text().startsWith("Failed to load resource")) problems.push(`console error: ${m.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() < 400 || !ours(r.url())) return;
    const key = `${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`;
    if (!expected.has(key)) problems.push(`HTTP ${key}`);
  });
  page.on("dialog", (d) => d.accept());

  await page.goto(base + "/");
  await page.waitForFunction(() => document.getElementById("tenant").textContent === "tenant default", null, { timeout: WAIT });
  const effective = await listed(page);
  assert.ok(row(effective, systemSkill), `the effective listing lacks the system skill ${systemSkill}: ${JSON.stringify(effective)}`);
  assert.ok(!row(effective, NAME), `${NAME} is listed before the upload`);
  log(`effective listing: ${effective.length} skills`);

  // Upload with the keyboard: the name comes from the SKILL.md.
  await page.setInputFiles("#skill-file", { name: "SKILL.md", mimeType: "text/markdown", buffer: Buffer.from(SKILL_MD) });
  await page.waitForFunction((n) => document.getElementById("skill-name").value === n, NAME, { timeout: WAIT });
  await page.focus("#skill-name");
  await page.keyboard.press("Enter");
  const up = await waitStatus(page, /^(Uploaded|Replaced|Could not)/);
  assert.match(up.text, new RegExp(`^Uploaded ${NAME} \\(revision [^)]+\\)`), `upload: ${up.text}`);
  const tenant = await listed(page, "tenant");
  const mine = row(tenant, NAME);
  assert.ok(mine, `tenant listing after the upload lacks ${NAME}: ${JSON.stringify(tenant)}`);
  assert.equal(mine.layer, "tenant");
  assert.ok(mine.revision, "the uploaded skill has no revision");
  assert.deepEqual(mine.actions, ["delete"], "an uploaded skill offers Delete");
  log(`uploaded ${NAME}, revision ${mine.revision}`);

  // Disable the system skill: flagged in the system listing, gone from
  // the effective one; then enable it again, with the keyboard.
  let system = await listed(page, "system");
  assert.ok(row(system, systemSkill) && !row(system, systemSkill).disabled, `${systemSkill} should start enabled`);
  await page.click(`#skills-rows tr[data-name="${systemSkill}"] button[data-action="disable"]`);
  await page.waitForFunction((n) => {
    const tr = document.querySelector(`#skills-rows tr[data-name="${n}"]`);
    return tr && tr.dataset.disabled === "true";
  }, systemSkill, { timeout: WAIT });
  system = await listed(page);
  assert.ok(row(system, systemSkill).disabled, `${systemSkill} not shown disabled: ${JSON.stringify(row(system, systemSkill))}`);
  const afterDisable = await listed(page, "");
  assert.ok(!row(afterDisable, systemSkill), `${systemSkill} still in the effective listing after disabling it`);
  assert.ok(row(afterDisable, NAME), `${NAME} missing from the effective listing`);
  system = await listed(page, "system");
  await page.focus(`#skills-rows tr[data-name="${systemSkill}"] button[data-action="enable"]`);
  await page.keyboard.press("Enter");
  await page.waitForFunction((n) => {
    const tr = document.querySelector(`#skills-rows tr[data-name="${n}"]`);
    return tr && tr.dataset.disabled === "false";
  }, systemSkill, { timeout: WAIT });
  log(`disabled and enabled ${systemSkill}`);
  await page.screenshot({ path: path.join(shots, "skills.png"), fullPage: true });

  // A refused upload shows the gateway's reason (a project that is not
  // a token is refused at the edge).
  expected.add(`PUT /v1/skills/${NAME} 400`);
  await page.fill("#skills-project", "not/a-token");
  await page.setInputFiles("#skill-file", { name: "SKILL.md", mimeType: "text/markdown", buffer: Buffer.from(SKILL_MD) });
  await page.click("#skill-upload-button");
  const refused = await waitStatus(page, /^Could not upload/);
  assert.match(refused.text, /project/, `refusal does not name the project: ${refused.text}`);
  assert.equal(refused.kind, "error");
  await page.fill("#skills-project", "");

  // Delete the upload (the confirm dialog is accepted).
  await listed(page, "tenant");
  await page.click(`#skills-rows tr[data-name="${NAME}"] button[data-action="delete"]`);
  await waitStatus(page, new RegExp(`^Deleted ${NAME}|^Could not delete`));
  const gone = await listed(page);
  assert.ok(!row(gone, NAME), `${NAME} still listed after the delete`);
  const st = await status(page);
  assert.ok(st.kind === "empty" || st.kind === "ok", `status after the delete: ${JSON.stringify(st)}`);
  log(`deleted ${NAME}; tenant listing: ${st.text}`);

  assert.deepEqual(problems, [], "the page reported errors");
  log("PASS skills");
});
