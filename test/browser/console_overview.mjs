// Drives the console's tenant overview (/console/overview) in headless
// Chromium against the suite console_pages_test.go starts, after
// seedOverview gave the tenant a budget, a failed run and a completed one:
// open the page from the navigation with the keyboard, check the budget
// shown against GET /v1/usage (the limit's figure and today's tokens
// against it), the daily chart's 30 days, the runs chart and the failed
// run (followed with Enter to its activity page), the active
// conversations, the error state with Retry, the empty states and the
// 1,000-run bound (routes answered by the script), and the tablet width.
// Prints "PASS console overview"; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session, tabTo } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const shots = mustEnv("SCREENSHOT_DIR");
const failedRun = mustEnv("OVERVIEW_FAILED_RUN");
const tokensPerDay = Number(mustEnv("OVERVIEW_TOKENS_PER_DAY"));
const T = 30_000;

const fmtTokens = (v) => Math.round(v).toLocaleString("en-US");

async function getJSON(p) {
  const r = await fetch(base + p);
  assert.equal(r.status, 200, `GET ${p}: ${r.status}`);
  return r.json();
}

// waitLoaded waits for every part of the page to have loaded.
async function waitLoaded(page) {
  await page.waitForSelector("[data-testid=budget-tenant]", { timeout: T });
  await page.waitForSelector("[data-testid=usage-daily-chart] canvas", { timeout: T });
  await page.waitForSelector("[data-testid=runs]", { timeout: T });
  await page.waitForSelector("[data-testid=conversations]", { timeout: T });
  await page.waitForSelector("[data-testid=refresh]:not([disabled])", { timeout: T });
}

// shoot saves the whole page: the overview scrolls inside its own box, so
// the viewport is made as tall as its content for the picture.
async function shoot(page, width, name) {
  const h = await page.evaluate(() => {
    const o = document.querySelector(".overview");
    const top = document.querySelector(".topbar");
    return (o?.scrollHeight ?? 900) + (top?.getBoundingClientRect().height ?? 0) + 4;
  });
  await page.setViewportSize({ width, height: Math.ceil(h) });
  await page.waitForFunction(() => [...document.querySelectorAll(".chart canvas")].every((c) => c.getBoundingClientRect().width > 0), null, { timeout: T });
  await page.screenshot({ path: path.join(shots, name) });
  log("saved", name);
}

await session({ height: 900, failureShot: "overview-failure.png" }, async (page, problems) => {
  const expected = new Set(); // URLs the script makes fail on purpose
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => { if (m.type() === "error" && !/status of 503/.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on("response", (r) => { if (r.status() >= 400 && !expected.has(r.url())) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`); });

  // The budget the seed set, from the API.
  const first = await getJSON("/v1/usage?history_days=30");
  assert.equal(Number(first.usage.budget.tokens_per_day), tokensPerDay, "the seeded budget is in force");
  assert.equal(first.usage.history.length, 30, "the API's history");

  // Open the console on the chat page, then the overview from the
  // navigation with the keyboard.
  await page.goto(base + "/console/chat");
  await page.waitForSelector("nav[aria-label=Pages]", { timeout: T });
  await tabTo(page, 'nav[aria-label=Pages] a[href="/console/overview"]', "the Tenant overview link");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => location.pathname === "/console/overview", null, { timeout: T });
  await waitLoaded(page);
  log("overview loaded");

  // The page against the API. A run of an earlier page may still be
  // spending, so the API is read before and after the page's figures and
  // the page refreshed until the three agree.
  const readTokens = () => page.$eval("[data-testid=budget-tenant-day-tokens]", (e) => ({
    used: Number(e.dataset.used), limit: Number(e.dataset.limit), percent: Number(e.dataset.percent),
    text: e.textContent, bar: e.querySelector("[role=meter]")?.getAttribute("aria-valuetext") ?? "",
    width: e.querySelector(".meter-used")?.getBoundingClientRect().width ?? 0,
    full: e.querySelector(".meter-bar")?.getBoundingClientRect().width ?? 0,
    daily: Number(document.querySelector("[data-testid=usage-daily]")?.dataset.totalTokens),
  }));
  const dayTokensOf = (r) => Number(r.usage.day.input_tokens ?? 0) + Number(r.usage.day.output_tokens ?? 0);
  const historyTokensOf = (r) => r.usage.history.reduce((a, w) => a + Number(w.input_tokens ?? 0) + Number(w.output_tokens ?? 0), 0);
  let u, tok;
  for (const deadline = Date.now() + 60_000; ;) {
    const before = await getJSON("/v1/usage?history_days=30");
    tok = await readTokens();
    const after = await getJSON("/v1/usage?history_days=30");
    if (dayTokensOf(before) === dayTokensOf(after) && tok.used === dayTokensOf(after) && tok.daily === historyTokensOf(after)) {
      u = after.usage;
      break;
    }
    assert.ok(Date.now() < deadline, `the page's tokens (${tok.used} today, ${tok.daily} in 30 days) never matched the API's (${dayTokensOf(after)}, ${historyTokensOf(after)})`);
    await page.waitForSelector("[data-testid=refresh]:not([disabled])", { timeout: T });
    await page.click("[data-testid=refresh]");
    await waitLoaded(page);
  }
  const dayTokens = dayTokensOf({ usage: u });
  assert.ok(dayTokens > 0, "no tokens today");
  assert.equal(tok.limit, tokensPerDay, "tokens/day limit on the page");
  assert.ok(tok.text.includes(fmtTokens(dayTokens)) && tok.text.includes(fmtTokens(tokensPerDay)), `the meter's text: ${tok.text}`);
  assert.ok(Math.abs(tok.percent - (dayTokens / tokensPerDay) * 100) < 1e-6, "the percentage");
  assert.ok(tok.bar.includes("of " + fmtTokens(tokensPerDay)), `the meter's accessible value: ${tok.bar}`);
  assert.ok(tok.width > 0 && Math.abs(tok.width / tok.full - dayTokens / tokensPerDay) < 0.03, `the bar's share: ${tok.width}/${tok.full}`);
  const cost = await page.$eval("[data-testid=budget-tenant-day-cost]", (e) => ({ limit: Number(e.dataset.limit), text: e.textContent }));
  assert.equal(cost.limit, 5);
  assert.ok(cost.text.includes("$5.00"), `the day's cost meter: ${cost.text}`);
  const month = await page.$eval("[data-testid=budget-tenant-month-cost]", (e) => e.textContent);
  assert.ok(month.includes("$100"), `the month's cost meter: ${month}`);
  assert.equal(await page.$eval("[data-testid=budget-tenant]", (e) => e.dataset.source), "api");
  assert.match(await page.$eval("[data-testid=budget-tenant-run]", (e) => e.textContent), /Steps\s*25/);

  // Over time: 30 UTC days ending with the ledger's today.
  const daily = await page.$eval("[data-testid=usage-daily]", (e) => ({ days: Number(e.dataset.days), last: e.dataset.lastDay }));
  assert.equal(daily.days, 30);
  assert.equal(daily.last, u.day.period);
  // The table behind the chart, opened with the keyboard.
  await tabTo(page, "[data-testid=usage-daily] summary", "the daily table's disclosure");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=usage-daily] details[open] tbody tr", { timeout: T });
  const rows = await page.$$eval("[data-testid=usage-daily] tbody tr", (trs) => trs.map((tr) => tr.dataset.day));
  assert.equal(rows.length, 30);
  assert.equal(rows[29], u.day.period);

  // Runs and errors: the seeded failed run, with its code.
  const runs = await page.$eval("[data-testid=runs]", (e) => ({ failed: Number(e.dataset.failed), completed: Number(e.dataset.completed), bound: e.dataset.bound }));
  assert.ok(runs.failed >= 1 && runs.completed >= 1, `runs: ${JSON.stringify(runs)}`);
  assert.equal(await page.$eval("[data-testid=runs-chart-wrap]", (e) => Number(e.dataset.days)), 30);
  const failure = await page.$eval(`[data-testid=failures] li[data-run-id="${failedRun}"]`, (li) => ({
    code: li.querySelector("[data-role=code]")?.textContent, message: li.querySelector("[data-role=message]")?.textContent ?? "",
  }));
  assert.equal(failure.code, "BUDGET_EXCEEDED");
  assert.match(failure.message, /max_steps_per_run/);

  // Active conversations, as the API counts them.
  const convs = await getJSON("/v1/conversations?page_size=500");
  const activeConvs = (convs.conversations ?? []).filter((c) => c.state === "CONVERSATION_STATE_ACTIVE").length;
  assert.equal(await page.$eval("[data-testid=conversations]", (e) => Number(e.dataset.active)), activeConvs);

  await shoot(page, 1280, "overview.png");
  await page.setViewportSize({ width: 1280, height: 900 });

  // The failed run opens its activity page with Enter.
  await tabTo(page, `[data-testid=failures] li[data-run-id="${failedRun}"] a`, "the failed run's link");
  await page.keyboard.press("Enter");
  await page.waitForFunction((id) => location.pathname === "/console/activity/" + encodeURIComponent(id), failedRun, { timeout: T });
  log("followed the failed run to", await page.evaluate(() => location.pathname));
  await page.goBack();
  await waitLoaded(page);

  // The error state: the usage route fails once, Retry loads it again.
  const usageURL = /\/v1\/usage\?history_days=30$/;
  await page.route(usageURL, (route) => {
    expected.add(route.request().url());
    return route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify({ error: { code: "UNAVAILABLE", message: "budgets unavailable: test outage" } }) });
  });
  await page.keyboard.press("Home");
  await tabTo(page, "[data-testid=refresh]", "Refresh");
  await page.keyboard.press("Enter");
  await page.waitForSelector("[role=alert] >> text=test outage", { timeout: T });
  await page.unroute(usageURL);
  await tabTo(page, "[role=alert] button", "Retry");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => !document.querySelector("[role=alert]"), null, { timeout: T });
  await waitLoaded(page);
  log("error state and retry ok");

  // The empty states, and the runs bound: the runs and conversations
  // routes answer for a tenant with nothing, then for one with more runs
  // than the page reads (pages of 200 runs of today, without end).
  const runsURL = /\/v1\/runs\?page_size=\d+(&page_token=[^&]*)?$/;
  const convsURL = /\/v1\/conversations\?page_size=\d+$/;
  await page.route(runsURL, (route) => route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ runs: [] }) }));
  await page.route(convsURL, (route) => route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ conversations: [] }) }));
  await page.click("[data-testid=refresh]");
  await page.waitForSelector("[data-testid=runs][data-total='0'] >> text=No runs in the last 30 days", { timeout: T });
  await page.waitForSelector("[data-testid=conversations][data-active='0'] >> text=No active conversations", { timeout: T });
  await page.unroute(runsURL);
  let served = 0;
  await page.route(runsURL, (route) => {
    const token = Number(new URL(route.request().url()).searchParams.get("page_token") || 0);
    const now = Date.now();
    const runs = Array.from({ length: 200 }, (_, i) => ({ run_id: `bound-${token + i}`, state: "RUN_STATE_COMPLETED", created_at: new Date(now - (token + i) * 1000).toISOString() }));
    served += runs.length;
    return route.fulfill({ status: 200, contentType: "application/json", body: JSON.stringify({ runs, next_page_token: String(token + 200) }) });
  });
  await page.click("[data-testid=refresh]");
  await page.waitForSelector("[data-testid=runs][data-bound=runs] [data-testid=runs-bound]", { timeout: T });
  assert.equal(await page.$eval("[data-testid=runs]", (e) => Number(e.dataset.total)), 1000, "the page counts the 1,000 runs it read");
  assert.equal(served, 1000, "the page stopped reading at the bound");
  await page.unroute(runsURL);
  await page.unroute(convsURL);
  await page.click("[data-testid=refresh]");
  await page.waitForSelector(`[data-testid=runs][data-bound=""] [data-testid=failures] li[data-run-id="${failedRun}"]`, { timeout: T });
  await waitLoaded(page);
  log("empty states and the runs bound ok");

  // Tablet: one column, nothing wider than the screen.
  await page.setViewportSize({ width: 768, height: 1024 });
  await page.waitForFunction(() => {
    const o = document.querySelector(".overview");
    return o && o.scrollWidth <= o.clientWidth + 1;
  }, null, { timeout: T });
  const cols = await page.$eval(".overview-cols", (e) => getComputedStyle(e).gridTemplateColumns.split(" ").length);
  assert.equal(cols, 1, "the runs and conversations stack at tablet width");
  await shoot(page, 768, "overview-tablet.png");

  assert.deepEqual(problems, [], "the page reported problems");
  console.log("PASS console overview");
});
