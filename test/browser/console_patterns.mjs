// Drives the console's Patterns page (/console/patterns) in headless
// Chromium as a person would, against the patterns the suite learned from
// its runs (console_patterns_test.go, seedPatterns): the list shows the
// active one and a candidate with their scores, state and gates (the
// candidate's two failed ones said), sorts and filters; at tablet width the
// rows become cards; the pattern opens by keyboard, is shared and the grant
// revoked, edited by keyboard (the version moves on), edited again after
// another client changed it (the 412 is shown, nothing is written, Reload
// brings the current version, the save then succeeds), and marked useless
// by keyboard through its confirmation: the page says so, the API no
// longer has it and the list no longer shows it; opened again, its 404 is
// shown. The candidate is deleted by keyboard (its confirmation starts on
// Cancel). Run by TestConsolePagesInChromium, which sets BAAGENT_URL,
// PATTERN_ID, PATTERN_USES, CANDIDATE_ID, CHROMIUM,
// SCREENSHOT_DIR and USER_DATA_DIR. Prints "PASS console patterns".
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session, tabTo } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const id = mustEnv("PATTERN_ID");
const uses = Number(mustEnv("PATTERN_USES"));
const candidate = mustEnv("CANDIDATE_ID");
const T = 20_000;
const row = `tr[data-id="${id}"]`;

async function getPattern(pid = id) {
  const r = await fetch(`${base}/v1/patterns/${encodeURIComponent(pid)}`);
  const body = await r.json();
  return { status: r.status, etag: r.headers.get("etag"), pattern: body.pattern };
}

// noOverflow asserts the page does not scroll sideways.
async function noOverflow(page, what) {
  const [sw, w] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  assert.ok(sw <= w, `${what}: the page is ${sw} px wide in a ${w} px window`);
}

await session({ height: 900, failureShot: "patterns-failure.png" }, async (page, problems) => {
  let expect412 = false; // the stale save is answered 412, on purpose
  let expect404 = false; // the pattern opened after it is gone
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (expect412 && /status of 412/.test(m.text())) return;
    if (expect404 && /status of 404/.test(m.text())) return;
    if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on("response", (r) => {
    if (r.status() === 412 && expect412 && r.request().method() === "PATCH") return;
    if (r.status() === 404 && expect404 && r.request().method() === "GET") return;
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });

  // The list: the pattern with its scores, state and every gate passed.
  const learned = await getPattern();
  assert.equal(learned.status, 200);
  const v0 = Number(learned.pattern.version);
  assert.equal(learned.etag, `"${v0}"`, "the ETag is not the version");
  await page.goto(base + "/console/patterns");
  await page.waitForSelector(row, { timeout: T });
  const listed = await page.$eval(row, (tr) => ({
    state: tr.dataset.state, version: Number(tr.dataset.version), text: tr.textContent,
    gates: [...tr.querySelectorAll(".pat-gate")].map((g) => [g.dataset.gate, g.dataset.passed]),
    reason: tr.querySelector("[data-testid=state-reason]")?.textContent,
  }));
  assert.equal(listed.state, "PATTERN_STATE_ACTIVE", `the learned pattern's state: ${listed.state}`);
  assert.equal(listed.version, v0);
  assert.match(listed.text, /ranking/, "the signature is not shown");
  assert.match(listed.text, /100%/, "the success rate is not shown");
  assert.match(listed.text, new RegExp(`${uses} ok · 0 failed`), "the uses are not shown");
  assert.deepEqual(listed.gates.map((g) => g[0]), ["recent-use", "no-streak", "not-draft", "successes", "rate", "queried"]);
  assert.ok(listed.gates.every((g) => g[1] === "true"), `gates: ${JSON.stringify(listed.gates)}`);
  assert.equal(listed.reason, "passes every gate: offered to runs");
  // The candidate, used once: two admission gates failed, and said so.
  const cand = await page.$eval(`tr[data-id="${candidate}"]`, (tr) => ({
    state: tr.dataset.state, reason: tr.querySelector("[data-testid=state-reason]")?.textContent,
    failed: [...tr.querySelectorAll(".pat-gate[data-passed=false]")].map((g) => g.dataset.gate),
  }));
  assert.equal(cand.state, "PATTERN_STATE_CANDIDATE");
  assert.deepEqual(cand.failed, ["successes", "queried"], `the candidate's failed gates: ${cand.failed}`);
  assert.equal(cand.reason, "still learning: needs ≥ 3 successes, queried within 7 days");
  // Sort by uses (highest first, then lowest), by keyboard.
  await page.focus("th button.pat-sort:text('Uses')");
  await page.keyboard.press("Enter");
  await page.waitForSelector("th[aria-sort=descending] >> text=Uses", { timeout: T });
  await page.keyboard.press("Enter");
  await page.waitForSelector("th[aria-sort=ascending] >> text=Uses", { timeout: T });
  // A filter the API applies: no draft patterns, then any state again.
  await page.selectOption("select[name=state]", "draft");
  await page.waitForSelector("text=No patterns match these filters.", { timeout: T });
  await page.selectOption("select[name=state]", "active");
  await page.waitForSelector(row, { timeout: T });
  await page.selectOption("select[name=state]", "");
  await page.waitForSelector(row, { timeout: T });
  await noOverflow(page, "the list at laptop width");
  await page.screenshot({ path: path.join(shots, "patterns.png"), fullPage: true });
  log(`list: ${id} active, version ${v0}, 6 gates passed; sorted and filtered`);

  // Tablet width: the rows are cards, nothing scrolls sideways.
  await page.setViewportSize({ width: 768, height: 1024 });
  await page.waitForFunction((s) => getComputedStyle(document.querySelector(s)).display === "block", row, { timeout: T });
  await noOverflow(page, "the list at tablet width");
  await page.screenshot({ path: path.join(shots, "patterns-tablet.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });

  // Open it by keyboard.
  await page.focus(`${row} a.pat-name`);
  await page.keyboard.press("Enter");
  await page.waitForSelector(`[data-testid=pattern][data-id="${id}"][data-version="${v0}"]`, { timeout: T });
  assert.equal(new URL(page.url()).pathname, "/console/patterns/" + id);
  assert.equal(await page.textContent("[data-testid=uses]"), String(uses));
  assert.match(await page.textContent("[data-testid=chains]"), /sql_query/, "the tool chain is not shown");
  assert.ok((await page.$$("[data-testid=steps] > li")).length >= 1, "no steps shown");
  assert.equal((await page.$$("[data-testid=pattern] .pat-gate[data-passed=true]")).length, 6);
  await page.setViewportSize({ width: 768, height: 1024 });
  await noOverflow(page, "the pattern at tablet width");
  await page.setViewportSize({ width: 1280, height: 900 });

  // Share it with another tenant and revoke the grant.
  await page.waitForSelector("[data-testid=grants] >> text=Not shared with any tenant.", { timeout: T });
  await page.fill("[data-testid=grants] input", "globex");
  await page.press("[data-testid=grants] input", "Enter");
  await page.waitForSelector('[data-testid=grants] li[data-grantee="globex"]', { timeout: T });
  const grants = await (await fetch(`${base}/v1/patterns/grants?id=${encodeURIComponent(id)}`)).json();
  assert.deepEqual((grants.grants ?? []).map((g) => g.grantee_tenant), ["globex"]);
  await page.click('[data-testid=grants] li[data-grantee="globex"] button');
  await page.waitForSelector("[data-testid=grants] >> text=Not shared with any tenant.", { timeout: T });

  // Edit by keyboard: the name; the version moves on.
  await tabTo(page, "[data-testid=edit]", "the Edit button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=edit-form]", { timeout: T });
  await tabTo(page, "[data-testid=edit-form] input[name=name]", "the name field");
  await page.keyboard.press("ControlOrMeta+A");
  await page.keyboard.type("Top products of a month");
  await page.waitForSelector("[data-testid=changed] >> text=Will change: name.", { timeout: T });
  await page.keyboard.press("Enter");
  await page.waitForSelector(`[data-testid=pattern][data-version="${v0 + 1}"] [data-testid=notice]`, { timeout: T });
  assert.equal(await page.textContent("#pat-name"), "Top products of a month");
  const afterEdit = await getPattern();
  assert.equal(afterEdit.pattern.name, "Top products of a month");
  assert.equal(afterEdit.etag, `"${v0 + 1}"`);
  log(`edited by keyboard: version ${v0} → ${v0 + 1}`);

  // Edit again while another client changes it: 412, shown; nothing
  // written; Reload brings the current version; the save then goes in.
  await page.click("[data-testid=edit]");
  await page.waitForSelector("[data-testid=edit-form]", { timeout: T });
  const other = await fetch(`${base}/v1/patterns/${encodeURIComponent(id)}`, {
    method: "PATCH", headers: { "Content-Type": "application/json", "If-Match": `"${v0 + 1}"` },
    body: JSON.stringify({ description: "Changed elsewhere" }),
  });
  assert.equal(other.status, 200, "the other client's edit");
  await page.fill("[data-testid=edit-form] textarea[name=description]", "Ranks a month's products by revenue");
  expect412 = true;
  await page.click("[data-testid=save]");
  await page.waitForSelector("[data-testid=stale]", { timeout: T });
  assert.match(await page.textContent("[data-testid=stale]"), /changed since you opened it/);
  // The page scrolls inside its own box: a tall window shows it whole.
  await page.setViewportSize({ width: 1280, height: 2400 });
  await page.screenshot({ path: path.join(shots, "patterns-edit.png"), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  const notWritten = await getPattern();
  assert.equal(notWritten.pattern.description, "Changed elsewhere", "the stale save was written");
  assert.equal(notWritten.etag, `"${v0 + 2}"`);
  await page.click("[data-testid=stale] button");
  await page.waitForSelector(`[data-testid=pattern][data-version="${v0 + 2}"] [data-testid=edit-form]`, { timeout: T });
  expect412 = false;
  assert.equal(await page.inputValue("[data-testid=edit-form] textarea[name=description]"), "Changed elsewhere", "Reload did not bring the current version");
  await page.fill("[data-testid=edit-form] textarea[name=description]", "Ranks a month's products by revenue");
  await page.click("[data-testid=save]");
  await page.waitForSelector(`[data-testid=pattern][data-version="${v0 + 3}"] [data-testid=notice]`, { timeout: T });
  assert.equal((await getPattern()).pattern.description, "Ranks a month's products by revenue");
  log(`stale save: 412 shown at version ${v0 + 1} (now ${v0 + 2}), reloaded, saved as ${v0 + 3}`);

  // Mark it useless by keyboard: Escape cancels the confirmation, then
  // Tab to its button and Enter confirms.
  await tabTo(page, "[data-testid=mark-useless]", "the Mark useless button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("dialog[data-testid=pattern-confirm][open]", { timeout: T });
  assert.ok(await page.evaluate(() => document.querySelector("dialog[data-testid=pattern-confirm]")?.contains(document.activeElement)), "the focus is not in the dialog");
  await page.keyboard.press("Escape");
  await page.waitForSelector("dialog[data-testid=pattern-confirm]:not([open])", { state: "attached", timeout: T });
  assert.equal((await getPattern()).status, 200, "Escape marked it");
  await tabTo(page, "[data-testid=mark-useless]", "the Mark useless button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("dialog[data-testid=pattern-confirm][open]", { timeout: T });
  await tabTo(page, "#pat-reason", "the reason");
  await page.keyboard.type("Browser test");
  await tabTo(page, "dialog [data-testid=confirm]", "the confirmation");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=pattern-gone][data-how=useless]", { timeout: T });
  assert.match(await page.textContent("[data-testid=pattern-gone]"), /Marked useless[\s\S]*180 days/);
  assert.equal((await getPattern()).status, 404, "the pattern is still there");
  await page.click("[data-testid=pattern-gone] a");
  await page.waitForSelector(".pat-table, .empty-state", { timeout: T });
  await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'), null, { timeout: T });
  assert.equal(await page.$(row), null, "the list still shows the pattern");
  // Opened again, it is the API's 404, said as the API says it.
  expect404 = true;
  await page.goto(base + "/console/patterns/" + encodeURIComponent(id));
  await page.waitForSelector("[role=alert] >> text=could not be loaded", { timeout: T });
  assert.match(await page.textContent("[role=alert]"), /not found/i);
  assert.ok(await page.$("[role=alert] button:text('Retry')"), "the error offers no Retry");
  expect404 = false;
  log("marked useless by keyboard: gone from the API and the list; opened again: its 404 shown");

  // Delete the candidate by keyboard: the confirmation starts on Cancel,
  // so an Enter cancels; Tab to Delete and Enter deletes it.
  await page.goto(base + "/console/patterns/" + encodeURIComponent(candidate));
  await page.waitForSelector(`[data-testid=pattern][data-id="${candidate}"]`, { timeout: T });
  await tabTo(page, "[data-testid=delete]", "the Delete button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("dialog[data-testid=pattern-confirm][open]", { timeout: T });
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Cancel", "the delete confirmation does not start on Cancel");
  await page.keyboard.press("Enter");
  await page.waitForSelector("dialog[data-testid=pattern-confirm]:not([open])", { state: "attached", timeout: T });
  assert.equal((await getPattern(candidate)).status, 200, "Enter on Cancel deleted it");
  await tabTo(page, "[data-testid=delete]", "the Delete button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("dialog[data-testid=pattern-confirm][open]", { timeout: T });
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "confirm");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=pattern-gone][data-how=deleted]", { timeout: T });
  assert.equal((await getPattern(candidate)).status, 404, "the candidate is still there");
  log("deleted the candidate by keyboard (Enter on the dialog's first focus cancels)");

  assert.deepEqual(problems, [], "the page reported errors");
  log("PASS console patterns");
});
