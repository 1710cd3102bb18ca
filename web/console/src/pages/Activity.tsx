// The Activity page: the tenant's runs, newest first, 20 a page, with their
// tokens and cost as a chart (/activity); one run's timeline — plan steps,
// ReAct steps, model calls, tool calls and waits for input as bars on a
// time axis — with its tokens and cost, followed live while it runs
// (/activity/<run_id>).
import { ActivityRun } from "../components/ActivityRun.tsx";
import { ActivityRuns } from "../components/ActivityRuns.tsx";
import "./Activity.css";

export default function ActivityPage({ path }: { path: string }) {
  const rest = path.slice("/activity".length).replace(/^\/+/, "");
  const runId = decodeURIComponent(rest.split("/")[0] ?? "");
  return <div className="activity">{runId ? <ActivityRun key={runId} runId={runId} /> : <ActivityRuns />}</div>;
}
