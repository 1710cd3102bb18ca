// The web console with API keys: the key screen (a wrong key refused, the
// tenant's key accepted), a run whose event stream needs a stream token,
// a question answered inline, a reload that keeps the key (sessionStorage)
// and the run's view, and sign-out. Run by console_test.go with
// BAAGENT_URL, BAAGENT_API_KEY, CHROMIUM, SCREENSHOT_DIR and USER_DATA_DIR.
// Prints "PASS console keys" at the end; exits 1 on failure.
import assert from "node:assert/strict";
import path from "node:path";
import { log, mustEnv, session } from "./session.mjs";

const base = mustEnv("BAAGENT_URL");
const key = mustEnv("BAAGENT_API_KEY");
const shots = mustEnv("SCREENSHOT_DIR");
const QUESTION = "Browser test, ask me which quarters to compare.";

await session({ height: 900, failureShot: "console-keys-failure.png" }, async (page, problems) => {
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  const tokens = [];
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (/\/events$/.test(u.pathname)) tokens.push(u.searchParams.get("token") || "");
    if (u.pathname.startsWith("/v1/") && !/\/events$/.test(u.pathname) && u.pathname !== "/v1/whoami" && !r.headers()["authorization"]) {
      problems.push(`${r.method()} ${u.pathname} without the key`);
    }
  });

  await page.goto(base + "/console/");
  await page.waitForSelector("#api-key", { timeout: 15_000 });
  await page.screenshot({ path: path.join(shots, "console-key.png") });
  // A wrong key is refused and the screen says so.
  await page.keyboard.type("not-the-key-0000000000");
  await page.keyboard.press("Enter");
  await page.waitForSelector(".keyform [role=alert]", { timeout: 10_000 });
  assert.match(await page.textContent(".keyform [role=alert]"), /refused/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("baagent.console.key")), null, "a refused key was kept");
  // The tenant's key opens the console.
  await page.fill("#api-key", key);
  await page.keyboard.press("Enter");
  await page.waitForSelector("[data-testid=empty-thread]", { timeout: 15_000 });
  assert.equal(await page.textContent("[data-testid=tenant]"), "tenant acme");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("baagent.console.key")), key);

  await page.fill("#composer-input", QUESTION);
  await page.keyboard.press("Enter");
  const prompt = "article.run .card.prompt.open";
  await page.waitForSelector(prompt, { timeout: 90_000 });
  const runId = await page.getAttribute("article.run", "data-run-id");
  assert.ok(tokens.length >= 1 && tokens.every((t) => t.length > 0), `event streams without a stream token: ${JSON.stringify(tokens)}`);
  assert.ok(tokens.every((t) => t !== key), "the API key itself went into a URL");

  // A reload keeps the key and the run.
  await page.reload();
  await page.waitForSelector(prompt, { timeout: 20_000 });
  assert.equal(await page.getAttribute("article.run", "data-run-id"), runId);
  await page.click(`${prompt} button.recommended`);
  await page.waitForSelector(`article.run[data-run-id="${runId}"][data-status=completed] .bubble.answer`, { timeout: 90_000 });
  const v = await page.evaluate(() => {
    const a = document.querySelector("article.run");
    const seqs = [...a.querySelectorAll("[data-seq]")].map((e) => Number(e.dataset.seq));
    return { seqs, applied: Number(a.dataset.applied), lastSeq: Number(a.dataset.lastSeq) };
  });
  assert.equal(new Set(v.seqs).size, v.seqs.length, `an item is shown twice: ${v.seqs}`);
  assert.equal(v.applied, v.lastSeq, `${v.applied} events applied up to seq ${v.lastSeq}`);
  await page.screenshot({ path: path.join(shots, "console-keys-run.png"), fullPage: true });

  // Sign out forgets the key.
  await page.click("text=Sign out");
  await page.waitForSelector("#api-key", { timeout: 10_000 });
  assert.equal(await page.evaluate(() => sessionStorage.getItem("baagent.console.key")), null);
  assert.deepEqual(problems, [], "the page reported problems");
  log(`PASS console keys (wrong key refused, run ${runId} streamed with stream tokens, reload kept the key, sign-out)`);
});
