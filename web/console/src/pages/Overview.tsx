// The tenant overview (/overview): spend against the budget today and this
// month, tokens and cost per day over the last 30 days, runs per day by
// state with the latest failures, and the active conversations. Each part
// loads on its own (GET /v1/usage?history_days=30, GET /v1/runs paged,
// GET /v1/conversations) with its loading, empty and error states.
import { useMemo, useState } from "react";
import "./Overview.css";
import { Empty, ErrorBox, Loading } from "../components/States.tsx";
import { OptionChart } from "../components/OptionChart.tsx";
import { OverviewMeter } from "../components/OverviewMeter.tsx";
import { UsageDaily } from "../components/UsageDaily.tsx";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps } from "../router.ts";
import { activeConversations, bucketRuns, collectRuns, MAX_RUNS, overviewApi, recentFailures, RUN_DAYS, runsOption, type CollectedRuns } from "../lib/overview.ts";
import { hasLimits, HISTORY_DAYS, isDay, meter, tokens, usageApi, usd, type UsageReport } from "../lib/usage.ts";

function utcToday(): string {
  return new Date().toISOString().slice(0, 10);
}

// utcTime writes an RFC 3339 time as "YYYY-MM-DD HH:MM UTC".
function utcTime(ts: string): string {
  const t = Date.parse(ts);
  return Number.isFinite(t) ? new Date(t).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "";
}

const SOURCE_TEXT: Record<UsageReport["source"], string> = {
  api: "set through the admin API",
  file: "from the gateway's budgets file",
  none: "none",
};

export default function OverviewPage({ path: _path }: { path: string }) {
  const [tick, setTick] = useState(0);
  const usage = useAsync((signal) => usageApi(HISTORY_DAYS, signal), [tick]);
  const runs = useAsync((signal) => collectRuns((token) => overviewApi.runsPage(token, signal), utcToday()), [tick]);
  const convs = useAsync((signal) => overviewApi.conversations(signal), [tick]);
  const loading = usage.status === "loading" || runs.status === "loading" || convs.status === "loading";
  // The ledger's today when known, so that runs and usage share their days.
  const lastHistory = usage.data?.usage.history.at(-1)?.period ?? "";
  const today = isDay(lastHistory) ? lastHistory : utcToday();

  return (
    <div className="overview" data-testid="overview">
      <header className="overview-head">
        <h1>Tenant overview</h1>
        <span className="muted small">UTC days · {usage.data?.usage.asOf ? "as of " + utcTime(usage.data.usage.asOf) : ""}</span>
        <span className="spacer" />
        <button type="button" onClick={() => setTick((t) => t + 1)} disabled={loading} data-testid="refresh">
          {loading ? "Refreshing…" : "Refresh"}
        </button>
      </header>

      <section className="overview-section" aria-labelledby="ov-budget">
        <h2 id="ov-budget">Spend against budgets</h2>
        {usage.status === "error" && <ErrorBox what="The usage" error={usage.error} retry={usage.reload} />}
        {usage.status === "loading" && !usage.data && <Loading what="the usage" />}
        {usage.data && (
          <>
            <BudgetBlock report={usage.data.usage} who="Tenant" testId="budget-tenant" />
            {usage.data.keyUsage && <BudgetBlock report={usage.data.keyUsage} who={"This API key (" + usage.data.keyUsage.apiKeyId + ")"} testId="budget-key" />}
          </>
        )}
      </section>

      <section className="overview-section" aria-labelledby="ov-time">
        <h2 id="ov-time">Usage over time</h2>
        {usage.status === "error" && !usage.data && <ErrorBox what="The usage history" error={usage.error} retry={usage.reload} />}
        {usage.status === "loading" && !usage.data && <Loading what="the usage history" />}
        {usage.data && (
          <div className="card">
            <UsageDaily history={usage.data.usage.history} budget={usage.data.usage.budget} days={HISTORY_DAYS} today={today} title={"Tenant tokens and cost per day, last " + HISTORY_DAYS + " days"} />
            {usage.data.keyUsage && (
              <UsageDaily history={usage.data.keyUsage.history} budget={usage.data.keyUsage.budget} days={HISTORY_DAYS} today={today}
                title={"API key " + usage.data.keyUsage.apiKeyId + ": tokens and cost per day"} />
            )}
          </div>
        )}
      </section>

      <div className="overview-cols">
        <section className="overview-section" aria-labelledby="ov-runs">
          <h2 id="ov-runs">Runs and errors</h2>
          {runs.status === "error" && <ErrorBox what="The runs" error={runs.error} retry={runs.reload} />}
          {runs.status === "loading" && !runs.data && <Loading what="the runs" />}
          {runs.data && <RunsBlock data={runs.data} today={today} />}
        </section>

        <section className="overview-section" aria-labelledby="ov-convs">
          <h2 id="ov-convs">Active conversations</h2>
          {convs.status === "error" && <ErrorBox what="The conversations" error={convs.error} retry={convs.reload} />}
          {convs.status === "loading" && !convs.data && <Loading what="the conversations" />}
          {convs.data && <ConversationsBlock list={convs.data.conversations ?? []} more={!!convs.data.next_page_token} />}
        </section>
      </div>
    </div>
  );
}

function BudgetBlock({ report, who, testId }: { report: UsageReport; who: string; testId: string }) {
  const b = report.budget;
  const d = report.day;
  const m = report.month;
  const limited = report.source !== "none" && hasLimits(b);
  return (
    <div className="budget-block" data-testid={testId} data-source={report.source}>
      <p className="budget-source">
        <strong>{who}</strong>
        {" · budget: "}
        {limited ? <span data-role="source">{SOURCE_TEXT[report.source]}</span> : <span data-role="no-budget" className="pill">no budget</span>}
        {!limited && <span className="muted small"> — usage is counted, not limited</span>}
      </p>
      <div className="budget-grid">
        <div className="card budget-card" data-testid={testId + "-day"} data-period={d.period}>
          <h3>Today <span className="muted small">{d.period}</span></h3>
          <OverviewMeter label="Cost today" m={meter(d.costUsd, d.reservedUsd, b.usdPerDay)} format={usd} testId={testId + "-day-cost"} limitName="per day" />
          <OverviewMeter label="Tokens today" m={meter(d.inputTokens + d.outputTokens, d.reservedTokens, b.tokensPerDay)} format={tokens} testId={testId + "-day-tokens"} limitName="per day" />
          <WindowFacts w={d} />
        </div>
        <div className="card budget-card" data-testid={testId + "-month"} data-period={m.period}>
          <h3>This month <span className="muted small">{m.period}</span></h3>
          <OverviewMeter label="Cost this month" m={meter(m.costUsd, m.reservedUsd, b.usdPerMonth)} format={usd} testId={testId + "-month-cost"} limitName="per month" />
          <p className="facts">
            <span>Tokens: <strong data-testid={testId + "-month-tokens"}>{tokens(m.inputTokens + m.outputTokens)}</strong></span>
          </p>
          <WindowFacts w={m} />
        </div>
        {(b.maxStepsPerRun !== undefined || b.maxUsdPerRun !== undefined) && (
          <div className="card budget-card" data-testid={testId + "-run"}>
            <h3>Per run</h3>
            <dl className="facts-list">
              <dt>Steps</dt><dd>{b.maxStepsPerRun !== undefined ? b.maxStepsPerRun : "no limit"}</dd>
              <dt>Cost</dt><dd>{b.maxUsdPerRun !== undefined ? usd(b.maxUsdPerRun) : "no limit"}</dd>
            </dl>
          </div>
        )}
      </div>
    </div>
  );
}

function WindowFacts({ w }: { w: UsageReport["day"] }) {
  return (
    <p className="facts muted small">
      <span>{tokens(w.inputTokens)} in</span>
      <span>{tokens(w.outputTokens)} out</span>
      <span>{tokens(w.modelCalls)} model calls</span>
      {w.unpricedTokens > 0 && <span title="Tokens of models without a known price: counted, not costed">{tokens(w.unpricedTokens)} unpriced tokens</span>}
    </p>
  );
}

function RunsBlock({ data, today }: { data: CollectedRuns; today: string }) {
  const buckets = useMemo(() => bucketRuns(data.runs, today, RUN_DAYS), [data.runs, today]);
  const option = useMemo(() => runsOption(buckets), [buckets]);
  const failures = useMemo(() => recentFailures(data.runs, 5), [data.runs]);
  const sum = (a: number[]) => a.reduce((x, v) => x + v, 0);
  const [completed, failed, cancelled, other] = [sum(buckets.completed), sum(buckets.failed), sum(buckets.cancelled), sum(buckets.other)];
  const summary = `${buckets.total} runs from ${buckets.days[0] ?? ""} to ${today}: ${completed} completed, ${failed} failed, ${cancelled} cancelled, ${other} in progress.`;
  return (
    <div className="card runs-block" data-testid="runs" data-total={buckets.total} data-failed={failed} data-completed={completed} data-bound={data.bound ?? ""}>
      <p className="runs-summary">{summary}</p>
      {data.bound === "runs" && (
        <p className="notice warning" role="note" data-testid="runs-bound">
          Only the latest {MAX_RUNS.toLocaleString("en-US")} runs were read{data.oldest ? ` (back to ${data.oldest})` : ""}: older runs of the last {RUN_DAYS} days are not counted.
        </p>
      )}
      {buckets.total === 0 ? (
        <Empty>No runs in the last {RUN_DAYS} days.</Empty>
      ) : (
        <div data-testid="runs-chart-wrap" data-days={buckets.days.length}>
          <OptionChart option={option} label={"Runs per UTC day by state. " + summary} testId="runs-chart" height={240} />
        </div>
      )}
      <h3>Latest failed runs</h3>
      {failures.length === 0 ? (
        <Empty>No failed runs in the last {RUN_DAYS} days.</Empty>
      ) : (
        <ul className="failures" data-testid="failures">
          {failures.map((f) => (
            <li key={f.runId} data-run-id={f.runId}>
              <a {...linkProps("/activity/" + encodeURIComponent(f.runId))} className="failure-link">
                <span className="failure-time muted small">{utcTime(f.createdAt)}</span>
                {f.code && <span className="pill st-failed" data-role="code">{f.code}</span>}
                <span className="failure-input">{f.input || f.runId}</span>
              </a>
              {f.message && <p className="failure-msg small" data-role="message">{f.message}</p>}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

function ConversationsBlock({ list, more }: { list: Parameters<typeof activeConversations>[0]; more: boolean }) {
  const a = useMemo(() => activeConversations(list, more, 6), [list, more]);
  return (
    <div className="card convs-block" data-testid="conversations" data-active={a.count}>
      <p className="convs-count"><strong data-testid="active-count">{a.count}{a.more ? "+" : ""}</strong> active {a.count === 1 ? "conversation" : "conversations"}{a.more ? " (more exist than one page shows)" : ""}</p>
      {a.recent.length === 0 ? (
        <Empty>No active conversations. <a {...linkProps("/chat")}>Start one in the chat</a>.</Empty>
      ) : (
        <ul className="recent-convs">
          {a.recent.map((c) => (
            <li key={c.conversation_id} data-conversation-id={c.conversation_id}>
              <a {...linkProps("/chat/" + encodeURIComponent(c.conversation_id))}>
                <span className="conv-title">{c.title || c.conversation_id}</span>
                <span className="muted small">{c.run_count ?? 0} {c.run_count === 1 ? "run" : "runs"} · {c.last_activity_at ? utcTime(c.last_activity_at) : ""}</span>
              </a>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
