// Drives the console's Memory page (/console/memory) in headless Chromium as
// a person would, mostly with the keyboard, against the suite that
// console_memory_test.go seeded with two episodes (Acme Labs, SMB, North,
// Blue Retail, ...) and twenty notes: the counts, the entities by name, a
// search typed and sent with Enter (kept in the URL across a reload and the
// back button), an entity's neighbourhood drawn by Cytoscape (node and edge
// counts read from the graph's data- attributes), the depth raised to 2, a
// re-centre on a neighbour from the keyboard list and on another by
// clicking its node, the seeded episode opened, the episode list's pages,
// an episode recorded from the form and deleted through the confirmation
// dialog, the settings switched and back, an unknown entity's error, an
// entity deleted, and the entity view at a tablet's width. No CSP violation
// may fire anywhere. Prints "PASS console memory"; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session, tabTo } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const seededEpisode = mustEnv("MEMORY_EPISODE");
const T = 20_000;

async function api(p, init) {
  const r = await fetch(base + p, init);
  const body = await r.text();
  return { status: r.status, json: body ? JSON.parse(body) : {} };
}

// graph reads what the graph container says it drew.
async function graph(page) {
  return page.evaluate(() => {
    const g = document.querySelector("[data-testid=memory-graph]");
    if (!g || !g.dataset.nodes) return null;
    const canvases = [...g.querySelectorAll("canvas")].filter((c) => c.width > 0 && c.height > 0).length;
    return { nodes: Number(g.dataset.nodes), edges: Number(g.dataset.edges), center: g.dataset.center, canvases };
  });
}

async function waitGraph(page, center, minNodes) {
  await page.waitForFunction(([c, n]) => {
    const g = document.querySelector("[data-testid=memory-graph]");
    return g && g.dataset.center === c && Number(g.dataset.nodes) >= n;
  }, [center, minNodes], { timeout: T });
  return graph(page);
}

function entityIdOf(url) {
  const m = new URL(url).pathname.match(/^\/console\/memory\/entities\/([^/]+)$/);
  return m ? decodeURIComponent(m[1]) : "";
}

await session({ height: 900, failureShot: "memory-failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`); });
  const csp = [];
  await page.exposeFunction("reportCSPViolation", (v) => csp.push(v));
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      window.reportCSPViolation(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  const scripts = [];
  page.on("response", (r) => { if (r.url().endsWith(".js")) scripts.push(new URL(r.url()).pathname); });

  const stats = (await api("/v1/memory/stats")).json;
  const acme = (await api("/v1/memory/search?q=" + encodeURIComponent("Acme Labs"))).json.hits.find((h) => h.entity.name === "Acme Labs").entity;

  // The counts, then a search typed into the box and sent with Enter.
  await page.goto(base + "/console/memory");
  await page.waitForSelector("[data-testid=memory-stats]", { timeout: T });
  assert.equal(await page.textContent("[data-stat=entities] dd"), String(Number(stats.entities)), "the entity count is not the API's");
  assert.equal(await page.textContent("[data-stat=episodes] dd"), String(Number(stats.episodes)), "the episode count is not the API's");
  await page.waitForSelector(`[data-testid=memory-browse] li[data-entity-id="${acme.id}"]`, { timeout: T });
  await tabTo(page, "#mem-q", "the search box");
  await page.keyboard.type("Acme Labs");
  await page.keyboard.press("Enter");
  await page.waitForURL(/\/console\/memory\?q=Acme\+Labs$/, { timeout: T });
  await page.waitForSelector("[data-testid=memory-results]", { timeout: T });
  const groups = await page.$$eval("[data-testid=memory-results] [data-group]", (s) => s.map((x) => x.dataset.group));
  assert.ok(groups.includes("Organization") && groups.includes("facts"), `result groups: ${groups}`);
  assert.match(await page.textContent("[data-group=Organization]"), /Acme Labs/);
  assert.match(await page.textContent("[data-group=facts]"), /IN_SEGMENT/);
  assert.ok(!scripts.some((s) => /cytoscape/.test(s)), "Cytoscape loaded before any graph was shown");
  await page.screenshot({ path: path.join(shots, "memory-search.png"), fullPage: true });

  // The query lives in the URL: a reload shows it again, and so does Back
  // after another search.
  await page.reload();
  await page.waitForSelector("[data-group=Organization]", { timeout: T });
  assert.equal(await page.inputValue("#mem-q"), "Acme Labs", "the query is not kept across a reload");
  await page.fill("#mem-q", "North");
  await page.press("#mem-q", "Enter");
  await page.waitForURL(/\?q=North$/, { timeout: T });
  await page.waitForSelector("[data-group=Location]", { timeout: T });
  await page.goBack();
  await page.waitForURL(/\?q=Acme\+Labs$/, { timeout: T });
  await page.waitForFunction(() => document.querySelector("#mem-q")?.value === "Acme Labs" && document.querySelector("[data-group=Organization]"), null, { timeout: T });
  log(`search: groups ${groups.join(", ")}; kept in the URL across a reload and Back`);

  // The entity: its attributes, its facts and its neighbourhood drawn.
  await page.click(`[data-group=Organization] [data-entity-id="${acme.id}"] a`);
  await page.waitForURL((u) => entityIdOf(u.toString()) === acme.id, { timeout: T });
  await page.waitForSelector("[data-testid=memory-entity]", { timeout: T });
  assert.match(await page.textContent(".mem-attrs"), /segment\s*SMB/, "the attributes are not shown");
  assert.match(await page.textContent("[data-testid=memory-relations]"), /LOCATED_IN/);
  const g1 = await waitGraph(page, acme.id, 3);
  const api1 = (await api(`/v1/memory/entities/${acme.id}/graph?depth=1&max_nodes=100`)).json;
  assert.equal(g1.nodes, api1.entities.length, `depth 1: ${g1.nodes} nodes drawn, the API gave ${api1.entities.length}`);
  assert.ok(g1.edges >= 2, `depth 1: ${g1.edges} edges`);
  assert.ok(g1.canvases >= 1, "the graph drew no canvas");
  assert.ok(scripts.some((s) => /cytoscape/.test(s)), "Cytoscape was not loaded as its own chunk");

  // Depth 2 from the keyboard: Blue Retail (through SMB) comes in.
  await tabTo(page, "#mem-depth", "the depth control");
  await page.keyboard.press("ArrowDown");
  await page.waitForURL(/\?depth=2$/, { timeout: T });
  const g2 = await waitGraph(page, acme.id, g1.nodes + 1);
  const api2 = (await api(`/v1/memory/entities/${acme.id}/graph?depth=2&max_nodes=100`)).json;
  assert.equal(g2.nodes, api2.entities.length, `depth 2: ${g2.nodes} nodes drawn, the API gave ${api2.entities.length}`);
  const near = await page.$$eval("[data-testid=memory-neighbours] li", (l) => l.map((x) => x.querySelector(".mem-nb-name").textContent));
  assert.ok(near.includes("Blue Retail") && near.includes("SMB") && near.includes("North"), `neighbours at depth 2: ${near}`);
  await page.screenshot({ path: path.join(shots, "memory-graph.png"), fullPage: true });

  // Re-centre on SMB from the neighbour list with Tab and Enter.
  const smb = api2.entities.find((e) => e.name === "SMB");
  await tabTo(page, `[data-testid=memory-neighbours] li[data-entity-id="${smb.id}"] a`, "SMB in the neighbour list");
  await page.keyboard.press("Enter");
  await page.waitForURL((u) => entityIdOf(u.toString()) === smb.id && u.search === "?depth=2", { timeout: T });
  await page.waitForFunction(() => document.querySelector("#mem-entity-name")?.textContent === "SMB", null, { timeout: T });
  const g3 = await waitGraph(page, smb.id, 3);

  // Re-centre on Blue Retail with the mouse, clicking its node where the
  // graph drew it; Back returns to SMB, then to Acme Labs.
  const blue = api2.entities.find((e) => e.name === "Blue Retail");
  const at = await page.evaluate((id) => {
    const g = document.querySelector("[data-testid=memory-graph]");
    const p = g.cytoscape.$id(id).renderedPosition();
    const r = g.getBoundingClientRect();
    return { x: r.left + p.x, y: r.top + p.y };
  }, blue.id);
  await page.mouse.click(at.x, at.y);
  await page.waitForURL((u) => entityIdOf(u.toString()) === blue.id && u.search === "?depth=2", { timeout: T });
  const g4 = await waitGraph(page, blue.id, 2);
  log(`graph: Acme Labs ${g1.nodes} nodes/${g1.edges} edges at depth 1, ${g2.nodes}/${g2.edges} at depth 2; re-centred on SMB by keyboard: ${g3.nodes}/${g3.edges}, on Blue Retail by a click: ${g4.nodes}/${g4.edges}`);
  await page.goBack();
  await waitGraph(page, smb.id, 3);
  await page.goBack();
  await waitGraph(page, acme.id, g2.nodes);

  // The seeded episode, from the entity's episode list.
  await page.click(`.mem-ep[data-episode-id="${seededEpisode}"] a`);
  await page.waitForSelector(`[data-testid=memory-episode][data-episode-id="${seededEpisode}"]`, { timeout: T });
  assert.match(await page.textContent("[data-testid=memory-episode-content]"), /Acme Labs is an SMB customer/);
  assert.match(await page.textContent("[data-testid=memory-episode]"), /synced/);
  assert.match(await page.textContent(".mem-chips"), /Blue Retail/);

  // Record an episode from the form, then delete it through the dialog.
  // The list is paged: the seeded episode, older than the notes recorded
  // after it, is on the second page.
  await page.click(".mem-tabs a:has-text('Episodes')");
  await page.waitForFunction(() => document.querySelectorAll("[data-testid=memory-episodes] [data-episode-id]").length === 20, null, { timeout: T });
  assert.equal(await page.$(`[data-testid=memory-episodes] [data-episode-id="${seededEpisode}"]`), null, "the oldest episode is on the first page");
  await page.click(".mem-pager button:has-text('Next page')");
  await page.waitForSelector(`[data-testid=memory-episodes] [data-episode-id="${seededEpisode}"]`, { timeout: T });
  assert.match(await page.textContent("#mem-ep-title"), /page 2/);
  await page.click(".mem-pager button:has-text('Previous page')");
  await page.waitForFunction(() => /page 1/.test(document.querySelector("#mem-ep-title")?.textContent ?? "") && document.querySelectorAll("[data-testid=memory-episodes] [data-episode-id]").length === 20, null, { timeout: T });
  const episodesBefore = Number(await page.textContent("[data-stat=episodes] dd"));
  await tabTo(page, "#mem-episode-text", "the episode text");
  await page.keyboard.type("Browser test: Cedar Logistics is in the West region.");
  await tabTo(page, ".mem-record button[type=submit]", "the record button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=memory-recorded] a", { timeout: T });
  const recorded = (await page.textContent("[data-testid=memory-recorded] a")).trim();
  assert.match(recorded, /^ep_/);
  await page.waitForSelector(`[data-testid=memory-episodes] [data-episode-id="${recorded}"]`, { timeout: T });
  await page.waitForFunction((n) => document.querySelector("[data-stat=episodes] dd")?.textContent === String(n), episodesBefore + 1, { timeout: T });
  await tabTo(page, `[data-testid=memory-episodes] [data-episode-id="${recorded}"] a`, "the recorded episode");
  await page.keyboard.press("Enter");
  await page.waitForSelector(`[data-testid=memory-episode][data-episode-id="${recorded}"]`, { timeout: T });
  await tabTo(page, "[data-testid=memory-episode] button.danger", "the delete button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=memory-confirm][open]", { timeout: T });
  assert.equal(await page.evaluate(() => document.activeElement?.textContent), "Cancel", "the dialog does not open on Cancel");
  await page.keyboard.press("Escape");
  await page.waitForSelector("[data-testid=memory-confirm]:not([open])", { state: "attached", timeout: T });
  assert.equal((await api(`/v1/memory/episodes/${recorded}`)).status, 200, "Escape deleted the episode");
  await tabTo(page, "[data-testid=memory-episode] button.danger", "the delete button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=memory-confirm][open]", { timeout: T });
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.dataset.testid), "confirm", "Tab does not reach the dialog's Delete");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=memory-deleted]", { timeout: T });
  await page.waitForFunction((n) => document.querySelector("[data-stat=episodes] dd")?.textContent === String(n), episodesBefore, { timeout: T });
  assert.equal((await api(`/v1/memory/episodes/${recorded}`)).status, 404, "the deleted episode is still there");
  log(`episodes: ${seededEpisode} shown, and on the list's second page; ${recorded} recorded from the form and deleted through the dialog (Escape first kept it)`);

  // The settings: patterns switched over and back, the answer shown.
  await page.click(".mem-tabs a:has-text('Settings')");
  await page.waitForSelector(".mem-switch[data-key=patterns_enabled] input", { timeout: T });
  assert.ok(await page.isChecked(".mem-switch[data-key=capture_runs] input"), "capture_runs is shown on");
  const patternsWere = Boolean((await api("/v1/memory/settings")).json.settings.patterns_enabled);
  assert.equal(await page.isChecked(".mem-switch[data-key=patterns_enabled] input"), patternsWere, "patterns_enabled as the API has it");
  for (const want of [!patternsWere, patternsWere]) {
    await page.focus(".mem-switch[data-key=patterns_enabled] input");
    await page.keyboard.press("Space");
    await tabTo(page, ".mem-settings form button[type=submit]", "Save");
    await page.keyboard.press("Enter");
    await page.waitForFunction((w) => {
      const pre = document.querySelector("[data-testid=memory-settings-answer]");
      if (!pre) return false;
      return Boolean(JSON.parse(pre.textContent).settings.patterns_enabled) === w;
    }, want, { timeout: T });
    const now = (await api("/v1/memory/settings")).json.settings;
    assert.equal(Boolean(now.patterns_enabled), want, `patterns_enabled on the server after saving ${want}`);
  }
  log(`settings: patterns_enabled switched to ${!patternsWere} and back, the API's answer shown`);

  // An unknown entity (a well-formed id): the API's message, and a retry.
  await page.goto(base + "/console/memory/entities/en_00000000000000000000000000");
  await page.waitForSelector("[role=alert] button:has-text('Retry')", { timeout: T });
  assert.match(await page.textContent("[role=alert]"), /The entity could not be loaded: .+/);
  const gone = problems.findIndex((p) => /HTTP 404 for GET .*\/v1\/memory\/entities\/en_00000000000000000000000000$/.test(p));
  assert.ok(gone >= 0, `the unknown entity was not asked for: ${problems}`);
  problems.splice(gone, 1);
  // The browser logs the failed fetch too.
  for (let i = problems.length - 1; i >= 0; i--) if (/console error: Failed to load resource: .*404/.test(problems[i])) problems.splice(i, 1);

  // Delete an entity (Edge Router R1, which nothing else here needs) from
  // its page, through the dialog, by keyboard.
  const router = (await api("/v1/memory/entities?name_prefix=" + encodeURIComponent("Edge Router"))).json.entities.find((e) => e.name === "Edge Router R1");
  await page.goto(base + "/console/memory/entities/" + encodeURIComponent(router.id));
  await page.waitForSelector(`[data-testid=memory-entity][data-entity-id="${router.id}"]`, { timeout: T });
  const entitiesBefore = Number(await page.textContent("[data-stat=entities] dd"));
  await tabTo(page, "[data-testid=memory-entity] button.danger", "the entity's delete button");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=memory-confirm][open]", { timeout: T });
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=memory-deleted]", { timeout: T });
  assert.match(await page.textContent("[data-testid=memory-deleted]"), /Edge Router R1 was deleted/);
  await page.waitForFunction((n) => document.querySelector("[data-stat=entities] dd")?.textContent === String(n), entitiesBefore - 1, { timeout: T });
  assert.equal((await api(`/v1/memory/entities/${router.id}`)).status, 404, "the deleted entity is still there");
  log(`entity ${router.id} (Edge Router R1) deleted through the dialog`);

  // A tablet: the entity view, graph and list stacked.
  await page.setViewportSize({ width: 768, height: 1024 });
  await page.goto(base + "/console/memory/entities/" + encodeURIComponent(acme.id) + "?depth=2");
  const gt = await waitGraph(page, acme.id, g2.nodes);
  assert.equal(gt.nodes, g2.nodes);
  const overflow = await page.evaluate(() => document.querySelector("[data-testid=memory-page]").scrollWidth - document.querySelector("[data-testid=memory-page]").clientWidth);
  assert.ok(overflow <= 1, `the page scrolls sideways at 768 px by ${overflow} px`);
  await page.screenshot({ path: path.join(shots, "memory-tablet.png"), fullPage: true });

  assert.deepEqual(csp, [], "CSP violations");
  assert.deepEqual(problems, [], "the page reported errors");
  log("PASS console memory (search in the URL, graph at depth 1 and 2, re-centred by keyboard and by a click, episodes paged, recorded and deleted, entity deleted, settings, tablet, no CSP violation)");
});
