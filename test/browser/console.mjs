// Drives the web console's Agent chat (/console/) in headless Chromium as a
// person would, with the keyboard: start a planned run from the composer,
// watch the plan tick off and a tool's table become a chart (and switch it),
// reload while the run waits on a question (no event lost or shown twice:
// the rendered items' seqs are compared before and after, and with what the
// server retained), answer the question inline, ask a follow-up in the same
// conversation and answer it by typing, then reopen the conversation from
// its history; then time the chat page's first render. Run by console_test.go, which starts the suite and sets
// BAAGENT_URL, CHROMIUM, SCREENSHOT_DIR and USER_DATA_DIR. Prints a
// "FIGURES {json}" line (first render, the JS the chat route loaded) and
// "PASS console" at the end; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session, tabTo } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const PLANNED = "Browser test, compare Q3 and Q4 2025 revenue by region and by customer segment, ask me which segments to include, and write a report.";
const FOLLOW_UP = "Browser test, ask me which quarters to compare.";
const RUN_TIMEOUT = 90_000;

// view reads what the page shows of one run: the seqs of its rendered
// items (and of the tool results inside the tool cards), and the counters
// the run element carries.
async function view(page, runId) {
  return page.evaluate((id) => {
    const run = document.querySelector(`article.run[data-run-id="${id}"]`);
    if (!run) return null;
    const items = [...run.querySelectorAll("[data-seq]")];
    return {
      seqs: items.map((e) => Number(e.dataset.seq)),
      resultSeqs: [...run.querySelectorAll("[data-result-seq]")].map((e) => Number(e.dataset.resultSeq)),
      kinds: items.map((e) => e.dataset.kind),
      applied: Number(run.dataset.applied), duplicates: Number(run.dataset.duplicates), lastSeq: Number(run.dataset.lastSeq),
      status: run.dataset.status,
      plan: [...run.querySelectorAll("[data-testid=plan] li")].map((li) => li.dataset.status),
      answer: [...run.querySelectorAll(".bubble.answer")].map((b) => b.textContent).join("\n"),
    };
  }, runId);
}

// consistent checks one view: no item twice, every event from 1 to the
// last seq applied exactly once.
function consistent(v, what) {
  assert.ok(v, `${what}: the run is not shown`);
  assert.equal(new Set(v.seqs).size, v.seqs.length, `${what}: an item is shown twice: ${v.seqs.join(",")}`);
  assert.equal(new Set(v.resultSeqs).size, v.resultSeqs.length, `${what}: a tool result is shown twice`);
  for (let i = 1; i < v.seqs.length; i++) assert.ok(v.seqs[i] > v.seqs[i - 1], `${what}: items out of seq order: ${v.seqs.join(",")}`);
  assert.equal(v.applied, v.lastSeq, `${what}: ${v.applied} distinct events applied up to seq ${v.lastSeq}: some are missing`);
}

function subset(a, b) { const s = new Set(b); return a.every((x) => s.has(x)); }

// serverSeqs reads the run's whole retained stream over SSE from Node.
async function serverSeqs(runId) {
  const r = await fetch(`${base}/v1/runs/${encodeURIComponent(runId)}/events?cursor=earliest`);
  assert.equal(r.status, 200, `SSE replay of ${runId}: status ${r.status}`);
  const seqs = [];
  for (const line of (await r.text()).split("\n")) {
    if (line.startsWith("data: ")) {
      const ev = JSON.parse(line.slice(6));
      if (ev.seq) seqs.push(Number(ev.seq));
    }
  }
  return seqs;
}

// ask types question into the composer (reached with Tab), sends it with
// Enter and returns the new run's id.
async function ask(page, question) {
  const before = await page.evaluate(() => [...document.querySelectorAll("article.run")].map((a) => a.dataset.runId));
  await tabTo(page, "#composer-input", "the composer");
  await page.keyboard.type(question);
  await page.keyboard.press("Enter");
  const runId = await (await page.waitForFunction((b) => {
    const ids = [...document.querySelectorAll("article.run")].map((a) => a.dataset.runId);
    return ids.find((id) => !b.includes(id)) || false;
  }, before, { timeout: 15_000 })).jsonValue();
  log("started run", runId, "for", JSON.stringify(question));
  return runId;
}

async function waitStatus(page, runId, status, timeout = RUN_TIMEOUT) {
  await page.waitForSelector(`article.run[data-run-id="${runId}"][data-status="${status}"]`, { timeout });
}

async function chartKind(page, runId) {
  return page.evaluate((id) => [...document.querySelectorAll(`article.run[data-run-id="${id}"] [data-testid=chart]`)].map((c) => c.dataset.kind), runId);
}

await session({ height: 900, failureShot: "console-failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") problems.push(`console ${m.type()}: ${m.text()} at ${m.location().url}`); });
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`); });
  const streams = []; // the cursors the page's event streams asked for
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (/^\/v1\/runs\/[^/]+\/events$/.test(u.pathname)) streams.push(u.searchParams.get("cursor"));
  });
  const scripts = [];
  page.on("response", (r) => { if (r.url().endsWith(".js")) scripts.push({ url: new URL(r.url()).pathname, encoding: r.headers()["content-encoding"] || "identity" }); });

  // First render of the chat page, from navigation start.
  await page.goto(base + "/console/");
  await page.waitForSelector("[data-testid=empty-thread]", { timeout: 15_000 });
  assert.equal(new URL(page.url()).pathname, "/console/chat", "the console did not open the chat page");
  const firstRenderMs = await page.evaluate(() => performance.getEntriesByName("console:chat-rendered")[0]?.startTime ?? -1);
  assert.ok(firstRenderMs > 0, "no first-render mark");
  const initialScripts = scripts.map((s) => s.url);
  assert.ok(initialScripts.length >= 1 && scripts.every((s) => s.encoding === "gzip"), `the chat route's scripts: ${JSON.stringify(scripts)}`);
  assert.ok(!initialScripts.some((u) => /EChart/.test(u)), "the chart chunk loaded before any chart was shown");
  assert.equal(await page.textContent("[data-testid=tenant]"), "tenant default");

  // A planned run: the plan ticks off, the region table becomes a chart.
  const planned = await ask(page, PLANNED);
  await page.waitForURL(/\/console\/chat\/.+/, { timeout: 10_000 });
  const conversation = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
  await page.waitForSelector(`article.run[data-run-id="${planned}"] .card.prompt.open`, { timeout: RUN_TIMEOUT });
  await waitStatus(page, planned, "waiting", 10_000);
  await page.waitForFunction((id) => document.querySelectorAll(`article.run[data-run-id="${id}"] [data-testid=chart]`).length >= 1, planned, { timeout: 15_000 });
  let before = await view(page, planned);
  consistent(before, "planned run, waiting");
  assert.deepEqual(before.plan, ["done", "running"], `the plan checklist mid-run: ${before.plan}`);
  assert.deepEqual(await chartKind(page, planned), ["bar"], "the region table (a text column, two numbers) is not a bar chart");
  assert.ok(before.kinds.includes("tool") && before.kinds.includes("user") && before.kinds.includes("prompt"), `items: ${before.kinds}`);
  const chartSeq = await page.getAttribute(`article.run[data-run-id="${planned}"] .card.tool:has([data-testid=chart])`, "data-seq");
  const card = `article.run[data-run-id="${planned}"] .card.tool[data-seq="${chartSeq}"]`;
  assert.match(await page.textContent(card), /sql_query/, "the chart is not in the sql_query card");
  assert.match(await page.textContent(card), /\d+ ms/, "the tool card shows no duration");
  // Switch the chart to a line and to the table, with the keyboard.
  await page.focus(`${card} button[data-view=line]`);
  await page.keyboard.press("Enter");
  await page.waitForSelector(`${card} [data-testid=chart][data-kind=line]`, { timeout: 5_000 });
  await page.screenshot({ path: path.join(shots, "console-plan-chart.png"), fullPage: true });
  await page.focus(`${card} button[data-view=table]`);
  await page.keyboard.press("Enter");
  await page.waitForSelector(`${card} table`, { timeout: 5_000 });
  assert.match(await page.textContent(`${card} table`), /q4_revenue/);
  await page.click(`${card} button[data-view=bar]`);
  log(`planned run: ${before.applied} events shown (last seq ${before.lastSeq}), plan ${before.plan}, chart bar → line → table → bar; reloading while it waits`);

  // Reload mid-run: the view comes back from the kept events and the
  // stream resumes from the cursor; nothing is lost or shown twice.
  streams.length = 0;
  await page.reload();
  await page.waitForFunction(([id, n]) => {
    const a = document.querySelector(`article.run[data-run-id="${id}"]`);
    return a && Number(a.dataset.applied) >= n && a.querySelector(".card.prompt.open");
  }, [planned, before.applied], { timeout: 20_000 });
  const replayed = await view(page, planned);
  consistent(replayed, "planned run after the reload");
  assert.ok(subset(before.seqs, replayed.seqs), `items before the reload ${before.seqs} are not all shown after it: ${replayed.seqs}`);
  assert.deepEqual(replayed.plan, ["done", "running"], `the plan after the reload: ${replayed.plan}`);
  assert.ok(streams.length >= 1 && streams[0] !== "earliest" && streams[0] !== "", `after the reload the stream did not resume from a cursor: ${JSON.stringify(streams)}`);

  // Answer inline with the keyboard: Tab to the recommended option, Enter.
  await tabTo(page, `article.run[data-run-id="${planned}"] .card.prompt.open button.recommended`, "the recommended answer");
  await page.keyboard.press("Enter");
  await waitStatus(page, planned, "completed");
  const done = await view(page, planned);
  consistent(done, "planned run, completed");
  assert.ok(subset(replayed.seqs, done.seqs), "items shown before the answer were replaced");
  assert.deepEqual(done.plan, ["done", "done"], `the plan at the end: ${done.plan}`);
  assert.match(done.answer, /Plan checklist report/, "the answer is not shown");
  assert.match(await page.textContent(`article.run[data-run-id="${planned}"] .card.prompt`), /All segments/, "the prompt does not show its answer");
  assert.ok(await page.$(`article.run[data-run-id="${planned}"] .bubble.answer table`), "the answer's Markdown table is not a table");
  const server = await serverSeqs(planned);
  assert.equal(done.lastSeq, server.at(-1), `the page ends at seq ${done.lastSeq}, the server at ${server.at(-1)}`);
  assert.equal(done.applied, server.length, `the page applied ${done.applied} events, the server retained ${server.length}`);
  await page.screenshot({ path: path.join(shots, "console-chat.png"), fullPage: true });
  log(`planned run: ${done.applied} events, seqs 1..${done.lastSeq}, none missing or repeated across the reload and the answer`);

  // A follow-up in the same conversation, answered by typing.
  const follow = await ask(page, FOLLOW_UP);
  await page.waitForSelector(`article.run[data-run-id="${follow}"] .card.prompt.open`, { timeout: RUN_TIMEOUT });
  await tabTo(page, `article.run[data-run-id="${follow}"] .card.prompt.open input`, "the typed answer");
  await page.keyboard.type("Q3 and Q4");
  await page.keyboard.press("Enter");
  await waitStatus(page, follow, "completed");
  const f = await view(page, follow);
  consistent(f, "follow-up");
  assert.match(f.answer, /Quarterly revenue as you asked/);
  assert.deepEqual(await chartKind(page, follow), ["line"], "quarters over time are not a line chart");
  const rec = await (await fetch(`${base}/v1/runs/${encodeURIComponent(follow)}`)).json();
  assert.equal(rec.run.conversation_id, conversation, "the follow-up started in another conversation");
  log(`follow-up in conversation ${conversation}: ${f.applied} events, answered by typing`);

  // The conversation from its history (events exports), in a fresh load,
  // at a tablet's width.
  await page.setViewportSize({ width: 820, height: 1180 });
  await page.goto(base + "/console/chat/" + encodeURIComponent(conversation));
  await page.waitForFunction(([a, b]) => [a, b].every((id) => document.querySelector(`article.run[data-run-id="${id}"][data-status="completed"] .bubble.answer`)), [planned, follow], { timeout: 20_000 });
  const hist = await view(page, planned);
  consistent(hist, "planned run from history");
  assert.deepEqual(hist.seqs, done.seqs, `the history shows other items (${hist.kinds}) than the live view did (${done.kinds})`);
  assert.ok(await page.$(`.convs a[aria-current=page]`), "the open conversation is not marked in the list");
  await page.screenshot({ path: path.join(shots, "console-tablet.png"), fullPage: true });

  // First render with an empty HTTP cache in a running browser: the median
  // of five fresh loads of the chat page at laptop width.
  await page.setViewportSize({ width: 1280, height: 900 });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  const loads = [];
  for (let i = 0; i < 5; i++) {
    await page.goto(base + "/console/chat");
    await page.waitForSelector("[data-testid=empty-thread]", { timeout: 15_000 });
    loads.push(await page.evaluate(() => performance.getEntriesByName("console:chat-rendered")[0]?.startTime ?? -1));
  }
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: false });
  loads.sort((a, b) => a - b);
  assert.ok(loads[0] > 0, `first-render marks: ${loads}`);
  const r1 = (x) => Math.round(x * 10) / 10;

  assert.deepEqual(problems, [], "the page reported errors");
  console.log("FIGURES " + JSON.stringify({ firstRenderMs: r1(loads[2]), firstRenderMaxMs: r1(loads[4]), coldBrowserFirstRenderMs: r1(firstRenderMs), initialScripts }));
  log("PASS console (plan checklist, bar/line/table switch, reload mid-run, answers by keyboard, follow-up, history, tablet width)");
});
