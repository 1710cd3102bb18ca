// UsageDaily charts tokens (input and output, stacked bars) and cost (a
// line) per UTC day, with the daily limits as dashed mark lines, and
// offers the same figures as a table (keyboard: the "Show the table"
// disclosure). Reusable by any page that has a usage report:
//
//   <UsageDaily history={report.history} budget={report.budget} />
//
// Props:
//   history  the report's history windows (lib/usage.ts toReport), oldest
//            first; days missing from it are drawn as zeros.
//   budget   the limits in force; usdPerDay and tokensPerDay become mark
//            lines (undefined: no line).
//   days     how many days to draw, ending with today (default 30).
//   today    the last day (YYYY-MM-DD, UTC); default the history's last.
//   title    the chart's heading and accessible name prefix.
//
// The chart element carries data-days (the number of days drawn), and
// data-total-tokens / data-total-cost (their sums), for tests.
import { useMemo } from "react";
import "./UsageDaily.css";
import { OptionChart } from "./OptionChart.tsx";
import { dailySeries, HISTORY_DAYS, tokens, usd, type Budget, type UsageWindow } from "../lib/usage.ts";
import { describeDaily, usageDailyOption } from "../lib/usageChart.ts";

export interface UsageDailyProps {
  history: readonly UsageWindow[];
  budget: Pick<Budget, "usdPerDay" | "tokensPerDay">;
  days?: number;
  today?: string;
  title?: string;
}

export function UsageDaily({ history, budget, days = HISTORY_DAYS, today, title = "Tokens and cost per day" }: UsageDailyProps) {
  const series = useMemo(() => dailySeries(history, days, today), [history, days, today]);
  const option = useMemo(() => usageDailyOption(series, budget), [series, budget]);
  const summary = describeDaily(series);
  const totalTokens = series.input.reduce((a, v) => a + v, 0) + series.output.reduce((a, v) => a + v, 0);
  const totalCost = series.cost.reduce((a, v) => a + v, 0);
  return (
    <figure className="usage-daily" data-testid="usage-daily" data-days={series.days.length} data-total-tokens={totalTokens} data-total-cost={totalCost}
      data-first-day={series.days[0] ?? ""} data-last-day={series.days[series.days.length - 1] ?? ""}>
      <figcaption className="usage-daily-head">
        <strong>{title}</strong>
        <span className="muted small">{summary}</span>
      </figcaption>
      <OptionChart option={option} label={title + ". " + summary} testId="usage-daily-chart" height={280} />
      <details className="usage-daily-table">
        <summary>Show the table</summary>
        <div className="table-wrap">
          <table>
            <caption className="sr-only">{title}</caption>
            <thead>
              <tr><th scope="col">Day (UTC)</th><th scope="col" className="al-right">Input</th><th scope="col" className="al-right">Output</th><th scope="col" className="al-right">Unpriced</th><th scope="col" className="al-right">Cost</th></tr>
            </thead>
            <tbody>
              {series.days.map((d, i) => (
                <tr key={d} data-day={d}>
                  <td>{d}</td>
                  <td className="num">{tokens(series.input[i] ?? 0)}</td>
                  <td className="num">{tokens(series.output[i] ?? 0)}</td>
                  <td className="num">{tokens(series.unpriced[i] ?? 0)}</td>
                  <td className="num">{usd(series.cost[i] ?? 0)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}
