// The Activity page's list of runs: newest first, a page of 20 at a time
// (the API's next_page_token; the tokens of the pages seen are kept to go
// back), optionally of one conversation, with a chart of each run's tokens
// and cost (a bar opens its run), and the tenant's tokens and cost per day.
import { useMemo, useState } from "react";
import type { Run } from "../lib/api.ts";
import { figures, fmtInt, fmtMs, fmtTime, fmtUsd, stateClass, stateName, truncate } from "../lib/activity.ts";
import { listConversations, listRunsPage, PAGE_SIZE } from "../lib/activityApi.ts";
import { runsOption } from "../lib/activityCharts.ts";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps, navigate } from "../router.ts";
import { HISTORY_DAYS, usageApi } from "../lib/usage.ts";
import { OptionChart } from "./OptionChart.tsx";
import { UsageDaily } from "./UsageDaily.tsx";
import { Empty, ErrorBox, Loading } from "./States.tsx";

export function ActivityRuns() {
  const [conversationId, setConversationId] = useState(() => new URLSearchParams(location.search).get("conversation_id") ?? "");
  // tokens[i] is the page token of page i+1 (page 1 has none).
  const [tokens, setTokens] = useState<string[]>([""]);
  const page = tokens.length;
  const token = tokens[tokens.length - 1] ?? "";
  const runs = useAsync((signal) => listRunsPage(token, conversationId, signal), [token, conversationId]);
  const convs = useAsync((signal) => listConversations(signal), []);

  const choose = (id: string) => {
    setConversationId(id);
    setTokens([""]);
    const q = id ? "?conversation_id=" + encodeURIComponent(id) : "";
    history.replaceState(null, "", location.pathname + q);
  };
  const list = runs.data?.runs ?? [];
  const next = runs.data?.nextPageToken ?? "";
  const option = useMemo(() => runsOption(list), [list]);

  return (
    <section className="act-runs" aria-labelledby="act-runs-title">
      <div className="act-head">
        <h1 id="act-runs-title">Activity</h1>
        <span className="spacer" />
        <label className="act-filter">
          <span>Conversation</span>
          <select value={conversationId} onChange={(e) => choose(e.target.value)} data-testid="conversation-filter">
            <option value="">All conversations</option>
            {conversationId && !(convs.data ?? []).some((c) => c.conversation_id === conversationId) && <option value={conversationId}>{conversationId}</option>}
            {(convs.data ?? []).map((c) => (
              <option key={c.conversation_id} value={c.conversation_id}>{truncate(c.title || c.conversation_id, 60)}</option>
            ))}
          </select>
        </label>
        <button type="button" className="secondary" onClick={runs.reload}>Refresh</button>
      </div>
      {convs.status === "error" && <p className="muted small">Conversations could not be listed for the filter: {convs.error instanceof Error ? convs.error.message : String(convs.error)}</p>}

      {runs.status === "error" && <ErrorBox what="The runs" error={runs.error} retry={runs.reload} />}
      {runs.status === "loading" && !runs.data && <Loading what="the runs" />}
      {runs.data && list.length === 0 && runs.status === "ready" && (
        <Empty>{page > 1 ? "No more runs." : conversationId ? "This conversation has no runs." : "No runs yet. Ask the agent something in the chat and its run appears here."}</Empty>
      )}
      {list.length > 0 && (
        <>
          <div className="card act-chart" data-testid="runs-chart" data-runs={list.length}>
            <h2 className="act-h2">Tokens and cost of the runs on this page</h2>
            <OptionChart
              option={option}
              label={"Tokens (input and output) and cost of the " + list.length + " runs on this page"}
              height={220}
              onClick={(c) => {
                const r = list[c.dataIndex];
                if (r) navigate("/activity/" + encodeURIComponent(r.run_id));
              }}
            />
          </div>
          <RunsTable runs={list} busy={runs.status === "loading"} />
        </>
      )}
      <nav className="act-pager" aria-label="Pages of runs">
        <button type="button" disabled={page <= 1 || runs.status === "loading"} onClick={() => setTokens((t) => t.slice(0, -1))}>Newer runs</button>
        <span className="muted small" data-testid="page-number" aria-live="polite">page {page}{runs.data ? " · " + list.length + " runs" : ""}</span>
        <button type="button" data-testid="next-page" disabled={!next || runs.status === "loading"} onClick={() => setTokens((t) => [...t, next])}>Older runs</button>
      </nav>
      <p className="muted small">{PAGE_SIZE} runs a page, newest first.</p>
      <DailyUsage />
    </section>
  );
}

// DailyUsage is the tenant's tokens and cost per UTC day (the usage
// ledger's history), which the runs of one page cannot show.
function DailyUsage() {
  const usage = useAsync((signal) => usageApi(HISTORY_DAYS, signal), []);
  return (
    <div className="card act-chart" data-testid="activity-daily">
      {usage.status === "error" && <ErrorBox what="The usage per day" error={usage.error} retry={usage.reload} />}
      {usage.status === "loading" && !usage.data && <Loading what="the usage per day" />}
      {usage.data && <UsageDaily history={usage.data.usage.history} budget={usage.data.usage.budget} days={HISTORY_DAYS} title={"Tokens and cost per day, last " + HISTORY_DAYS + " days"} />}
    </div>
  );
}

function RunsTable({ runs, busy }: { runs: Run[]; busy: boolean }) {
  return (
    <div className="table-wrap card act-table-card">
      <table className="act-table" data-testid="runs-table" aria-busy={busy}>
        <thead>
          <tr>
            <th scope="col">State</th>
            <th scope="col">Input</th>
            <th scope="col" className="act-col-model">Model</th>
            <th scope="col">Created</th>
            <th scope="col" className="al-right">Duration</th>
            <th scope="col" className="al-right">Tokens in / out</th>
            <th scope="col" className="al-right">Cost</th>
          </tr>
        </thead>
        <tbody>
          {runs.map((r) => {
            const f = figures(r);
            const to = "/activity/" + encodeURIComponent(r.run_id);
            return (
              <tr key={r.run_id} data-run-id={r.run_id} className="act-row" onClick={(e) => {
                if ((e.target as HTMLElement).closest("a")) return;
                navigate(to);
              }}>
                <td><span className={"pill " + stateClass(r.state)}>{stateName(r.state)}</span>{r.parent_run_id && <span className="tag act-sub">sub-agent</span>}</td>
                <td className="act-input"><a {...linkProps(to)} title={truncate(r.input, 400)}>{truncate(r.input, 90) || r.run_id}</a></td>
                <td className="act-col-model">{r.model || "—"}</td>
                <td><time dateTime={String(r.created_at ?? "")}>{fmtTime(r.created_at)}</time></td>
                <td className="num">{fmtMs(f.durationMs)}</td>
                <td className="num">{fmtInt(f.inputTokens)} / {fmtInt(f.outputTokens)}</td>
                <td className="num">{fmtUsd(f.costUsd)}{f.unpricedCalls > 0 && <span className="muted" title={f.unpricedCalls + " model calls without a price"}> *</span>}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {runs.some((r) => figures(r).unpricedCalls > 0) && <p className="muted small">* some model calls had no price: the cost leaves them out.</p>}
    </div>
  );
}
