// The business tools of the example provider: the same behaviour as
// ../go/tools.go, so that the two implementations can be swapped.

// Sample rates, EUR base: rounded approximations of early-2025 levels, NOT
// market data. Every result names this source; pass --rates-file for real
// rates.
export const defaultRates = Object.freeze({
  base: 'EUR',
  as_of: '2025-01-02',
  source: 'built-in sample table (approximate, not market data; pass a rates file for real rates)',
  rates: { EUR: 1, USD: 1.04, GBP: 0.83, JPY: 163.0, CHF: 0.94, CNY: 7.6, CAD: 1.49, AUD: 1.66, SEK: 11.5, INR: 89.0 },
});

const MAX_AMOUNT = 1e15;
const MAX_SPAN_DAYS = 200 * 366;
const MAX_OFFSET_DAYS = 100000;
const MAX_HOLIDAYS = 1000;
const ZERO_DECIMALS = new Set(['JPY', 'KRW', 'ISK', 'CLP', 'VND']);
const CODE = /^[A-Z]{3}$/;
const DAY_MS = 86400000;

/** A typed tool failure; kind is a ToolErrorType name without its prefix. */
export class ToolError extends Error {
  constructor(kind, code, message) {
    super(message);
    this.kind = kind;
    this.code = code;
  }
}

const invalid = (message) => new ToolError('INVALID_PARAMETERS', 'INVALID_PARAMETERS', message);

/** Checks a rate table read from a file. */
export function checkRates(t) {
  if (!t || typeof t !== 'object') throw new Error('a rate table must be an object');
  for (const k of Object.keys(t)) {
    if (!['base', 'as_of', 'source', 'rates'].includes(k)) throw new Error(`unknown key ${k}`);
  }
  if (!CODE.test(t.base ?? '')) throw new Error(`base: ${JSON.stringify(t.base)} is not an ISO 4217 code`);
  if (!t.rates || typeof t.rates !== 'object' || Object.keys(t.rates).length === 0) throw new Error('rates: empty');
  if (t.base in t.rates && t.rates[t.base] !== 1) throw new Error(`rates.${t.base}: the base currency's rate must be 1`);
  for (const [c, r] of Object.entries(t.rates)) {
    if (!CODE.test(c)) throw new Error(`rates: ${JSON.stringify(c)} is not an ISO 4217 code`);
    if (typeof r !== 'number' || !(r > 0) || r > 1e9) throw new Error(`rates.${c}: must be a positive number`);
  }
  return t;
}

function lookup(t, c) {
  if (c === t.base) return 1;
  return Object.hasOwn(t.rates, c) ? t.rates[c] : undefined;
}

export function codes(t) {
  return [t.base, ...Object.keys(t.rates).filter((c) => c !== t.base)].sort();
}

function round(v, decimals) {
  const p = 10 ** decimals;
  return Math.round(v * p) / p;
}

function number(args, key) {
  const v = args[key];
  if (v === undefined) throw invalid(`${key}: required`);
  if (typeof v !== 'number' || !Number.isFinite(v)) throw invalid(`${key}: must be a number`);
  return v;
}

function integer(args, key) {
  const v = number(args, key);
  if (!Number.isInteger(v)) throw invalid(`${key}: must be a whole number`);
  return v;
}

function currency(args, key) {
  const v = args[key];
  if (typeof v !== 'string') throw invalid(`${key}: required, a three-letter currency code such as EUR`);
  const c = v.trim().toUpperCase();
  if (!CODE.test(c)) throw invalid(`${key}: ${JSON.stringify(v.slice(0, 40))} is not a three-letter currency code`);
  return c;
}

// Dates are UTC midnights, as the Go implementation's time.Parse(DateOnly).
function parseDate(field, s) {
  const m = typeof s === 'string' ? /^(\d{4})-(\d{2})-(\d{2})$/.exec(s) : null;
  const d = m ? new Date(Date.UTC(+m[1], +m[2] - 1, +m[3])) : null;
  if (!d || d.getUTCFullYear() !== +m[1] || d.getUTCMonth() !== +m[2] - 1 || d.getUTCDate() !== +m[3]) {
    throw invalid(`${field}: ${JSON.stringify(String(s).slice(0, 40))} is not a date as YYYY-MM-DD`);
  }
  if (+m[1] < 1900 || +m[1] > 2200) throw invalid(`${field}: the year must be between 1900 and 2200`);
  return d.getTime();
}

function date(args, key) {
  if (typeof args[key] !== 'string') throw invalid(`${key}: required, a date as YYYY-MM-DD`);
  return parseDate(key, args[key]);
}

function holidaySet(args) {
  const raw = args.holidays;
  if (raw === undefined || raw === null) return new Set();
  if (!Array.isArray(raw)) throw invalid('holidays: must be a list of dates as YYYY-MM-DD');
  if (raw.length > MAX_HOLIDAYS) throw invalid(`holidays: at most ${MAX_HOLIDAYS} dates`);
  return new Set(raw.map((v, i) => {
    if (typeof v !== 'string') throw invalid(`holidays[${i}]: must be a date as YYYY-MM-DD`);
    return parseDate(`holidays[${i}]`, v);
  }));
}

const isWeekend = (t) => { const w = new Date(t).getUTCDay(); return w === 0 || w === 6; };
const fmt = (t) => new Date(t).toISOString().slice(0, 10);
const WEEKDAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

export function convertCurrency(rates, args) {
  const amount = number(args, 'amount');
  if (Math.abs(amount) > MAX_AMOUNT) throw invalid(`amount: must be at most ${MAX_AMOUNT} in absolute value`);
  const from = currency(args, 'from');
  const to = currency(args, 'to');
  const rf = lookup(rates, from);
  const rt = lookup(rates, to);
  if (rf === undefined || rt === undefined) {
    const missing = rf === undefined ? from : to;
    throw new ToolError('NOT_FOUND', 'UNKNOWN_CURRENCY', `no rate for ${missing}; known: ${codes(rates).join(', ')}`);
  }
  const rate = rt / rf;
  return {
    amount, from, to,
    rate: round(rate, 6),
    converted: round(amount * rate, ZERO_DECIMALS.has(to) ? 0 : 2),
    rates_as_of: rates.as_of,
    rate_source: rates.source,
  };
}

export function businessDays(args) {
  const start = date(args, 'start');
  const end = date(args, 'end');
  const holidays = holidaySet(args);
  const sign = end < start ? -1 : 1;
  const [lo, hi] = end < start ? [end, start] : [start, end];
  const span = Math.round((hi - lo) / DAY_MS) + 1;
  if (span > MAX_SPAN_DAYS) throw invalid(`end: the range must be at most ${MAX_SPAN_DAYS} days`);
  let workdays = 0, weekend = 0, holidayCount = 0;
  for (let d = lo; d <= hi; d += DAY_MS) {
    if (isWeekend(d)) weekend++;
    else if (holidays.has(d)) holidayCount++;
    else workdays++;
  }
  return {
    start: fmt(start), end: fmt(end),
    business_days: sign * workdays, calendar_days: sign * span,
    weekend_days: weekend, holidays_excluded: holidayCount,
  };
}

export function addBusinessDays(args) {
  const start = date(args, 'start');
  const n = integer(args, 'days');
  if (n < -MAX_OFFSET_DAYS || n > MAX_OFFSET_DAYS) throw invalid(`days: must be between ${-MAX_OFFSET_DAYS} and ${MAX_OFFSET_DAYS}`);
  const holidays = holidaySet(args);
  const step = n < 0 ? -1 : 1;
  let d = start;
  for (let left = Math.abs(n); left > 0;) {
    d += step * DAY_MS;
    if (!isWeekend(d) && !holidays.has(d)) left--;
  }
  return { start: fmt(start), days: n, date: fmt(d), weekday: WEEKDAYS[new Date(d).getUTCDay()] };
}

const HOLIDAYS_SCHEMA = { type: 'array', items: { type: 'string', format: 'date' }, maxItems: MAX_HOLIDAYS, description: 'Dates (YYYY-MM-DD) that are not working days, e.g. public holidays.' };

/** The tools, with the same names, descriptions and schemas as ../go. */
export function toolList(rates) {
  return [
    {
      name: 'convert_currency',
      description: `Convert an amount of money between currencies with the provider's rate table. The result names the rate used, its date and its source; known currencies: ${JSON.stringify(codes(rates))}.`,
      parameters: {
        type: 'object',
        properties: {
          amount: { type: 'number', description: 'Amount in the source currency.' },
          from: { type: 'string', pattern: '^[A-Za-z]{3}$', description: 'ISO 4217 code of the source currency, e.g. EUR.' },
          to: { type: 'string', pattern: '^[A-Za-z]{3}$', description: 'ISO 4217 code of the target currency, e.g. USD.' },
        },
        required: ['amount', 'from', 'to'],
        additionalProperties: false,
      },
      run: (args) => convertCurrency(rates, args),
    },
    {
      name: 'business_days',
      description: 'Count the working days (Monday to Friday, minus the given holidays) from start to end, both included, like NETWORKDAYS in a spreadsheet. Negative when end is before start.',
      parameters: {
        type: 'object',
        properties: {
          start: { type: 'string', format: 'date', description: 'First date, YYYY-MM-DD.' },
          end: { type: 'string', format: 'date', description: 'Last date, YYYY-MM-DD.' },
          holidays: HOLIDAYS_SCHEMA,
        },
        required: ['start', 'end'],
        additionalProperties: false,
      },
      run: businessDays,
    },
    {
      name: 'add_business_days',
      description: 'The date that is a number of working days (Monday to Friday, minus the given holidays) after start, or before it when days is negative, like WORKDAY in a spreadsheet.',
      parameters: {
        type: 'object',
        properties: {
          start: { type: 'string', format: 'date', description: 'Start date, YYYY-MM-DD (not counted).' },
          days: { type: 'integer', minimum: -MAX_OFFSET_DAYS, maximum: MAX_OFFSET_DAYS, description: 'Working days to add; negative goes back.' },
          holidays: HOLIDAYS_SCHEMA,
        },
        required: ['start', 'days'],
        additionalProperties: false,
      },
      run: addBusinessDays,
    },
  ];
}
