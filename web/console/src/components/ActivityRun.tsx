// One run on the Activity page: its figures (Run.metrics), its timeline
// (bars on a time axis from its events), its tokens and cost after each
// model call, its cost by model; links to its conversation in the chat and
// to its trace. A finished run's events come from its events export; a
// run still going is followed over its stream, each event applied once by
// its seq (a replay after a reconnect adds nothing), so the timeline grows.
import { useEffect, useMemo, useRef, useState } from "react";
import { client, type Run } from "../lib/api.ts";
import { addEvents, duration, figures, fmtInt, fmtMs, fmtTime, fmtUsd, isEnded, newLog, seqOf, stateClass, stateName, timeline, traceHref, truncate, usage, type EventLog } from "../lib/activity.ts";
import { getRun, runEvents } from "../lib/activityApi.ts";
import { barText, timelineOption, usageOption } from "../lib/activityCharts.ts";
import { parseJSONL, RunStream, type StreamStatus } from "../lib/stream.ts";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps } from "../router.ts";
import { useSession } from "../stores/session.ts";
import { OptionChart } from "./OptionChart.tsx";
import { Empty, ErrorBox, Loading } from "./States.tsx";

export function ActivityRun({ runId }: { runId: string }) {
  const run = useAsync((signal) => getRun(runId, signal), [runId]);
  const r = run.data;
  return (
    <section className="act-run" aria-labelledby="act-run-title">
      <div className="act-head">
        <a className="link" {...linkProps("/activity")}>← All runs</a>
        <h1 id="act-run-title">Run <code>{runId}</code></h1>
      </div>
      {run.status === "error" && <ErrorBox what="The run" error={run.error} retry={run.reload} />}
      {run.status === "loading" && !r && <Loading what="the run" />}
      {r && <RunBody run={r} reloadRun={run.reload} />}
    </section>
  );
}

function RunBody({ run, reloadRun }: { run: Run; reloadRun: () => void }) {
  const traceLink = useSession((s) => s.traceLink);
  const keysRequired = useSession((s) => s.keysRequired);
  const [log, setLog] = useState<EventLog>(newLog);
  const [eventsError, setEventsError] = useState("");
  const [eventsLoaded, setEventsLoaded] = useState(false);
  const [live, setLive] = useState<StreamStatus | "">("");
  const [tries, setTries] = useState(0);
  const ended = isEnded(run);
  const follow = useRef(!ended); // decided once: a run that ends while followed stays on its stream

  // The events: the export of a finished run, the stream of a live one.
  useEffect(() => {
    setEventsError("");
    if (!follow.current) {
      const ac = new AbortController();
      runEvents(run.run_id, ac.signal).then(
        (text) => {
          setLog((l) => addEvents(l, parseJSONL(text)));
          setEventsLoaded(true);
        },
        (e: unknown) => {
          if (!ac.signal.aborted) setEventsError(e instanceof Error ? e.message : String(e));
        },
      );
      return () => ac.abort();
    }
    const s = new RunStream({
      runId: run.run_id,
      cursor: "earliest",
      tokenNeeded: () => keysRequired,
      token: async () => (await client.streamToken()).token,
      onEvents: (evs) => {
        setLog((l) => addEvents(l, evs));
        setEventsLoaded(true);
      },
      onStatus: (st) => {
        setLive(st);
        if (st === "live") setEventsLoaded(true);
        if (st === "ended") reloadRun(); // the record's final metrics
      },
    });
    s.start();
    return () => s.close();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [run.run_id, tries]);

  // While the run goes on, open bars grow with the clock.
  const [now, setNow] = useState(() => Date.now());
  const going = follow.current && !log.ended;
  useEffect(() => {
    if (!going) return undefined;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [going]);

  const tl = useMemo(() => timeline(log.events, now), [log.events, now]);
  const points = useMemo(() => usage(log.events), [log.events]);
  const tlOption = useMemo(() => timelineOption(tl), [tl]);
  const usOption = useMemo(() => usageOption(points), [points]);
  const firstSeq = log.events.length ? seqOf(log.events[0]!) : 0;
  const f = figures(run);
  const trace = traceHref(traceLink, run.trace_id);

  return (
    <>
      <div className="card act-summary" data-testid="run-summary" data-state={run.state} data-input-tokens={f.inputTokens} data-output-tokens={f.outputTokens} data-cost-usd={f.costUsd} data-unpriced-calls={f.unpricedCalls}>
        <div className="act-summary-head">
          <span className={"pill " + stateClass(run.state)} data-testid="run-state">{stateName(run.state)}</span>
          {run.model && <span className="tag">{run.model}</span>}
          {live && live !== "ended" && live !== "closed" && <span className="small muted" data-testid="stream-status">{live === "live" ? "following live" : live}</span>}
          <span className="spacer" />
          {run.conversation_id && <a className="button secondary" {...linkProps("/chat/" + encodeURIComponent(run.conversation_id))} data-testid="chat-link">Open in the chat</a>}
          {trace && <a className="button secondary" href={trace} target="_blank" rel="noopener noreferrer" data-testid="trace-link">Open trace</a>}
        </div>
        <p className="act-input-full" title={String(run.input ?? "")}>{truncate(run.input, 600)}</p>
        <dl className="act-figures">
          <div><dt>Created</dt><dd>{fmtTime(run.created_at)}</dd></div>
          <div><dt>Duration</dt><dd>{ended ? fmtMs(f.durationMs) : Number.isFinite(duration(run, now)) ? fmtMs(duration(run, now)) + " so far" : "—"}</dd></div>
          <div><dt>Input tokens</dt><dd data-testid="fig-input">{fmtInt(f.inputTokens)}</dd></div>
          <div><dt>Output tokens</dt><dd data-testid="fig-output">{fmtInt(f.outputTokens)}</dd></div>
          <div><dt>Cost</dt><dd data-testid="fig-cost">{fmtUsd(f.costUsd)}{f.unpricedCalls > 0 && <span className="muted small"> ({f.unpricedCalls} unpriced {f.unpricedCalls === 1 ? "call" : "calls"})</span>}</dd></div>
          <div><dt>Model calls</dt><dd>{fmtInt(f.llmCalls)}</dd></div>
          <div><dt>Tool calls</dt><dd>{fmtInt(f.toolCalls)}{f.failedCalls > 0 && <span className="muted small"> ({f.failedCalls} failed)</span>}</dd></div>
        </dl>
        {!ended && <p className="muted small">The run is still going: its tokens and cost so far are in the chart below; the totals here are the run record's.</p>}
      </div>

      <div className="card act-timeline" data-testid="timeline" data-bars={tl.bars.length} data-tool-bars={tl.counts.tool} data-model-bars={tl.counts.model} data-step-bars={tl.counts.step} data-wait-bars={tl.counts.wait} data-plan-bars={tl.counts.plan} data-failed-tools={tl.failedTools} data-open-bars={tl.bars.filter((b) => b.open).length} data-events={log.events.length} data-duplicates={log.duplicates} data-ended={log.ended}>
        <h2 className="act-h2">Timeline</h2>
        {eventsError && <ErrorBox what="The run's events" error={new Error(eventsError)} retry={() => setTries((t) => t + 1)} />}
        {!eventsError && !eventsLoaded && <Loading what="the run's events" />}
        {eventsLoaded && firstSeq > 1 && <p className="notice warning">The run's first {firstSeq - 1} events are no longer kept: the timeline starts later.</p>}
        {eventsLoaded && tl.bars.length === 0 && <Empty>{follow.current && !log.ended ? "The run has not started a step yet." : "The run's events hold no steps or calls to draw."}</Empty>}
        {tl.bars.length > 0 && (
          <>
            <Legend />
            <TimelineChart option={tlOption} lanes={tl.lanes.length} label={"Timeline of run " + run.run_id + ": " + tl.counts.step + " steps, " + tl.counts.model + " model calls, " + tl.counts.tool + " tool calls (" + tl.failedTools + " failed), " + tl.counts.wait + " waits for input, over " + fmtMs(tl.span)} />
            <details className="act-bars">
              <summary>The bars as a table</summary>
              <div className="table-wrap">
                <table>
                  <thead><tr><th scope="col">Lane</th><th scope="col" className="al-right">Start</th><th scope="col">What</th></tr></thead>
                  <tbody>
                    {tl.bars.slice(0, 500).map((b, i) => (
                      <tr key={i} className={b.failed ? "act-failed" : undefined}><td>{tl.lanes[b.lane]}</td><td className="num">{fmtMs(b.start)}</td><td>{barText(b)}</td></tr>
                    ))}
                  </tbody>
                </table>
              </div>
            </details>
          </>
        )}
      </div>

      <div className="act-grid">
        <div className="card" data-testid="usage" data-calls={points.length} data-cost-usd={points.length ? points[points.length - 1]?.costUsd : 0}>
          <h2 className="act-h2">Tokens and cost after each model call</h2>
          {points.length === 0 ? (
            <Empty>{eventsLoaded ? "No model call has reported its usage yet." : "…"}</Empty>
          ) : (
            <OptionChart option={usOption} label={"Cumulative tokens and cost over the run's " + points.length + " model calls"} height={240} />
          )}
        </div>
        <div className="card" data-testid="cost-by-model">
          <h2 className="act-h2">Cost by model</h2>
          {f.costByModel.length === 0 ? (
            <Empty>{f.unpricedCalls > 0 ? "No priced model calls: the run's " + f.unpricedCalls + " model calls have no price." : "No priced model calls recorded."}</Empty>
          ) : (
            <table>
              <thead><tr><th scope="col">Model</th><th scope="col" className="al-right">Cost</th></tr></thead>
              <tbody>
                {f.costByModel.map(([m, c]) => <tr key={m}><td>{m}</td><td className="num">{fmtUsd(c)}</td></tr>)}
              </tbody>
              <tfoot><tr><th scope="row">Total</th><td className="num">{fmtUsd(f.costUsd)}</td></tr></tfoot>
            </table>
          )}
        </div>
      </div>
    </>
  );
}

function TimelineChart({ option, lanes, label }: { option: Record<string, unknown>; lanes: number; label: string }) {
  return <OptionChart option={option} label={label} testId="timeline-chart" height={Math.min(640, 70 + lanes * 34)} />;
}

function Legend() {
  const items: [string, string][] = [["plan", "plan step"], ["step", "step"], ["model", "model call"], ["tool", "tool call"], ["retried", "retried"], ["failed", "failed"], ["wait", "waiting for input"], ["open", "still going"]];
  return (
    <ul className="act-legend" aria-label="Colours of the bars">
      {items.map(([k, t]) => <li key={k}><span className={"act-swatch sw-" + k} aria-hidden="true" />{t}</li>)}
    </ul>
  );
}
