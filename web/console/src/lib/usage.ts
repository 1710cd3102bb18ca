// The tenant's usage against its budget (GET /v1/usage?history_days=N):
// the API's types, the conversion of its JSON (int64 fields are strings,
// zero fields absent), the meters' figures and the daily chart's series
// and option. Pure functions, unit-tested with node:test; usageApi is the
// one call.
import { api } from "./api.ts";

// The API's JSON (proto field names; int64 as strings; zeros omitted).
export interface UsageWindowJSON {
  period?: string;
  cost_usd?: number;
  input_tokens?: string | number;
  output_tokens?: string | number;
  model_calls?: string | number;
  reserved_usd?: number;
  reserved_tokens?: string | number;
  unpriced_tokens?: string | number;
}

export interface BudgetJSON {
  usd_per_day?: number;
  usd_per_month?: number;
  tokens_per_day?: string | number;
  max_steps_per_run?: number;
  max_usd_per_run?: number;
}

export interface UsageReportJSON {
  tenant?: string;
  api_key_id?: string;
  day?: UsageWindowJSON;
  month?: UsageWindowJSON;
  budget?: BudgetJSON;
  source?: string;
  as_of?: string;
  history?: UsageWindowJSON[];
}

export interface UsageResponseJSON {
  usage?: UsageReportJSON;
  key_usage?: UsageReportJSON;
}

// A usage window as numbers.
export interface UsageWindow {
  period: string;
  costUsd: number;
  inputTokens: number;
  outputTokens: number;
  modelCalls: number;
  reservedUsd: number;
  reservedTokens: number;
  unpricedTokens: number;
}

// The limits in force; undefined is unlimited.
export interface Budget {
  usdPerDay?: number | undefined;
  usdPerMonth?: number | undefined;
  tokensPerDay?: number | undefined;
  maxStepsPerRun?: number | undefined;
  maxUsdPerRun?: number | undefined;
}

export type BudgetSource = "none" | "file" | "api";

export interface UsageReport {
  tenant: string;
  apiKeyId: string;
  day: UsageWindow;
  month: UsageWindow;
  budget: Budget;
  source: BudgetSource;
  asOf: string;
  history: UsageWindow[];
}

// num reads a JSON number or int64 string; anything else (absent, not a
// finite number) is 0, and negatives (never sent) are 0 too.
export function num(v: unknown): number {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : 0;
  return Number.isFinite(n) && n > 0 ? n : 0;
}

// limit reads an optional limit: absent (or not a number) is unlimited; a
// present 0 is a limit of zero.
export function limit(v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

export function toWindow(w: UsageWindowJSON | undefined, period = ""): UsageWindow {
  return {
    period: typeof w?.period === "string" && w.period ? w.period : period,
    costUsd: num(w?.cost_usd),
    inputTokens: num(w?.input_tokens),
    outputTokens: num(w?.output_tokens),
    modelCalls: num(w?.model_calls),
    reservedUsd: num(w?.reserved_usd),
    reservedTokens: num(w?.reserved_tokens),
    unpricedTokens: num(w?.unpriced_tokens),
  };
}

export function toSource(s: unknown): BudgetSource {
  if (s === "BUDGET_SOURCE_FILE") return "file";
  if (s === "BUDGET_SOURCE_API") return "api";
  return "none";
}

export function toReport(r: UsageReportJSON | undefined): UsageReport {
  const b = r?.budget ?? {};
  return {
    tenant: r?.tenant ?? "",
    apiKeyId: r?.api_key_id ?? "",
    day: toWindow(r?.day),
    month: toWindow(r?.month),
    budget: {
      usdPerDay: limit(b.usd_per_day),
      usdPerMonth: limit(b.usd_per_month),
      tokensPerDay: limit(b.tokens_per_day),
      maxStepsPerRun: limit(b.max_steps_per_run),
      maxUsdPerRun: limit(b.max_usd_per_run),
    },
    source: toSource(r?.source),
    asOf: r?.as_of ?? "",
    history: Array.isArray(r?.history) ? r.history.map((w) => toWindow(w)) : [],
  };
}

export function hasLimits(b: Budget): boolean {
  return [b.usdPerDay, b.usdPerMonth, b.tokensPerDay, b.maxStepsPerRun, b.maxUsdPerRun].some((v) => v !== undefined);
}

// Meter is one figure against its limit: the shares of the limit used and
// reserved (0..1 each, their sum at most 1, for drawing) and the exact
// percentage used (may exceed 100).
export interface Meter {
  used: number;
  reserved: number;
  limit: number | undefined;
  percent: number | undefined; // used / limit × 100; undefined without a limit
  usedShare: number;
  reservedShare: number;
  level: "ok" | "warn" | "over" | "none";
}

export function meter(used: number, reserved: number, lim: number | undefined): Meter {
  const u = Math.max(0, used);
  const r = Math.max(0, reserved);
  if (lim === undefined) return { used: u, reserved: r, limit: undefined, percent: undefined, usedShare: 0, reservedShare: 0, level: "none" };
  if (lim <= 0) {
    // A limit of zero allows nothing: shown full.
    return { used: u, reserved: r, limit: lim, percent: u > 0 ? Infinity : 100, usedShare: 1, reservedShare: 0, level: "over" };
  }
  const percent = (u / lim) * 100;
  const usedShare = Math.min(1, u / lim);
  const reservedShare = Math.min(1 - usedShare, r / lim);
  const level = u >= lim ? "over" : u + r >= lim * 0.8 || u >= lim * 0.8 ? "warn" : "ok";
  return { used: u, reserved: r, limit: lim, percent, usedShare, reservedShare, level };
}

export function formatPercent(p: number | undefined): string {
  if (p === undefined) return "";
  if (!Number.isFinite(p)) return "over";
  if (p > 0 && p < 0.1) return "<0.1%";
  return (p < 10 ? p.toFixed(1) : Math.round(p).toString()) + "%";
}

// usd formats dollars with the digits small amounts need (model calls cost
// fractions of a cent).
// The formatters are made once: Intl.NumberFormat is slow to create.
const USD_FORMATS = {
  whole: new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 }),
  cents: new Intl.NumberFormat("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }),
  small: new Intl.NumberFormat("en-US", { maximumFractionDigits: 4 }),
  tiny: new Intl.NumberFormat("en-US", { maximumFractionDigits: 6 }),
};
const TOKENS_FORMAT = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function usd(v: number): string {
  if (v === 0) return "$0";
  const a = Math.abs(v);
  const f = a >= 100 ? USD_FORMATS.whole : a >= 1 ? USD_FORMATS.cents : a >= 0.01 ? USD_FORMATS.small : USD_FORMATS.tiny;
  return "$" + f.format(v);
}

export function tokens(v: number): string {
  return TOKENS_FORMAT.format(Math.round(v));
}

// addDays returns the UTC day (YYYY-MM-DD) n days after day.
export function addDays(day: string, n: number): string {
  const t = Date.parse(day + "T00:00:00Z");
  if (!Number.isFinite(t)) return day;
  return new Date(t + n * 86_400_000).toISOString().slice(0, 10);
}

export function isDay(s: string): boolean {
  return /^\d{4}-\d{2}-\d{2}$/.test(s) && Number.isFinite(Date.parse(s + "T00:00:00Z")) && new Date(s + "T00:00:00Z").toISOString().startsWith(s);
}

// DailySeries is what the daily chart draws: one entry per UTC day, oldest
// first, ending with `today`, every day present.
export interface DailySeries {
  days: string[];
  input: number[];
  output: number[];
  cost: number[];
  unpriced: number[];
}

// dailySeries lays the history windows out over the `count` days ending
// with today (the last window's period when today is not given): a day the
// history lacks is zero, a window outside the range or without a day
// period is left out, and a day given twice counts once (the last).
export function dailySeries(history: readonly UsageWindow[], count: number, today?: string): DailySeries {
  const n = Math.max(0, Math.min(366, Math.floor(count)));
  const last = today && isDay(today) ? today : [...history].reverse().find((w) => isDay(w.period))?.period ?? new Date().toISOString().slice(0, 10);
  const days = Array.from({ length: n }, (_, i) => addDays(last, i - n + 1));
  const byDay = new Map<string, UsageWindow>();
  for (const w of history) byDay.set(w.period, w);
  const pick = (f: (w: UsageWindow) => number) => days.map((d) => {
    const w = byDay.get(d);
    return w ? f(w) : 0;
  });
  return {
    days,
    input: pick((w) => w.inputTokens),
    output: pick((w) => w.outputTokens),
    cost: pick((w) => w.costUsd),
    unpriced: pick((w) => w.unpricedTokens),
  };
}

export const HISTORY_DAYS = 30;

// usageApi reads the usage with `days` days of history.
export async function usageApi(days: number, signal?: AbortSignal): Promise<{ usage: UsageReport; keyUsage: UsageReport | null }> {
  const r = await api<UsageResponseJSON>("GET", "/v1/usage?history_days=" + days, undefined, signal);
  return { usage: toReport(r.usage), keyUsage: r.key_usage ? toReport(r.key_usage) : null };
}
