// Table detection in tool results: a tool's observation (or any text) is
// scanned for a table — a JSON array of objects (or an object holding one),
// a Markdown pipe table, or CSV/TSV — and returned as columns and rows of
// cells. Pure functions, no DOM: unit-tested with node:test.

export type Cell = string | number | null;

export interface Table {
  columns: string[];
  rows: Cell[][];
  source: "json" | "markdown" | "csv";
}

// Bounds on what a (possibly hostile) tool result may make the page hold.
export const MAX_ROWS = 500;
export const MAX_COLUMNS = 50;
const MAX_INPUT = 512 * 1024;

// detectTable returns the first table found in text, or null.
export function detectTable(text: string): Table | null {
  if (!text) return null;
  const s = text.length > MAX_INPUT ? text.slice(0, MAX_INPUT) : text;
  return fromJSON(s) ?? fromMarkdown(s) ?? fromCSV(s);
}

// toCell turns a JSON value into a cell: numbers stay numbers, numeric
// strings become numbers, null stays null, anything else is text.
export function toCell(v: unknown): Cell {
  if (v === null || v === undefined) return null;
  if (typeof v === "number") return Number.isFinite(v) ? v : null;
  if (typeof v === "boolean") return String(v);
  if (typeof v === "string") return parseNumber(v) ?? v;
  return JSON.stringify(v);
}

// parseNumber reads "1234", "-1,234.5", "12.5%" or "$3.20" as a number;
// anything else (dates, codes, words, "NULL") is null.
export function parseNumber(raw: string): number | null {
  const s = raw.trim();
  if (!s || s.length > 40) return null;
  const m = /^([-+]?)[$€£]?\s?((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(%?)$/.exec(s);
  if (!m) return null;
  const n = Number((m[1] ?? "") + (m[2] ?? "").replace(/,/g, ""));
  return Number.isFinite(n) ? n : null;
}

function fromJSON(s: string): Table | null {
  const t = s.trim();
  if (!(t.startsWith("[") || t.startsWith("{"))) return null;
  let v: unknown;
  try {
    v = JSON.parse(t);
  } catch {
    return null;
  }
  return tableFromValue(v, 0);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function tableFromValue(v: unknown, depth: number): Table | null {
  if (Array.isArray(v)) {
    const objs = v.filter(isRecord);
    if (objs.length === 0 || objs.length !== v.length) return null;
    const columns: string[] = [];
    for (const o of objs.slice(0, MAX_ROWS)) {
      for (const k of Object.keys(o)) {
        if (!columns.includes(k) && columns.length < MAX_COLUMNS) columns.push(k);
      }
    }
    if (columns.length === 0) return null;
    const rows = objs.slice(0, MAX_ROWS).map((o) => columns.map((c) => toCell(o[c])));
    return { columns, rows, source: "json" };
  }
  // {"rows":[...]} or {"data":[...]}: the first array-of-objects field.
  if (isRecord(v) && depth < 2) {
    for (const k of Object.keys(v)) {
      const t = tableFromValue(v[k], depth + 1);
      if (t) return t;
    }
  }
  return null;
}

// splitPipeRow splits "| a | b \| c |" into ["a", "b | c"].
export function splitPipeRow(line: string): string[] {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells: string[] = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === "\\" && s[i + 1] === "|") {
      cur += "|";
      i++;
    } else if (c === "|") {
      cells.push(cur.trim());
      cur = "";
    } else {
      cur += c;
    }
  }
  cells.push(cur.trim());
  return cells;
}

export function isDelimiterRow(line: string): boolean {
  const cells = splitPipeRow(line);
  return cells.length > 0 && cells.every((c) => /^:?-{1,}:?$/.test(c));
}

function fromMarkdown(s: string): Table | null {
  const lines = s.split(/\r?\n/);
  for (let i = 0; i + 1 < lines.length; i++) {
    const head = lines[i] ?? "";
    const delim = lines[i + 1] ?? "";
    if (!head.includes("|") || !isDelimiterRow(delim)) continue;
    const columns = splitPipeRow(head).slice(0, MAX_COLUMNS);
    if (columns.length < 1 || columns.every((c) => c === "")) continue;
    const rows: Cell[][] = [];
    for (let j = i + 2; j < lines.length && rows.length < MAX_ROWS; j++) {
      const line = lines[j] ?? "";
      if (!line.trim() || !line.includes("|")) break;
      const cells = splitPipeRow(line);
      rows.push(columns.map((_, k) => cellFromText(cells[k] ?? "")));
    }
    return { columns, rows, source: "markdown" };
  }
  return null;
}

function cellFromText(t: string): Cell {
  if (t === "" || t === "NULL") return null;
  return parseNumber(t) ?? t;
}

// splitDelimited splits one CSV line (RFC 4180 quoting) by sep.
export function splitDelimited(line: string, sep: string): string[] | null {
  const out: string[] = [];
  let cur = "";
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') {
        cur += '"';
        i++;
      } else if (c === '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c === '"' && cur.trim() === "") {
      quoted = true;
      cur = "";
    } else if (c === sep) {
      out.push(cur.trim());
      cur = "";
    } else {
      cur += c;
    }
  }
  if (quoted) return null;
  out.push(cur.trim());
  return out;
}

// fromCSV finds a block of at least a header and two rows whose lines all
// split into the same number (≥ 2) of comma- (or tab-) separated fields.
function fromCSV(s: string): Table | null {
  const lines = s.split(/\r?\n/);
  for (const sep of [",", "\t"]) {
    for (let i = 0; i < lines.length; i++) {
      const head = splitDelimited(lines[i] ?? "", sep);
      if (!head || head.length < 2 || head.length > MAX_COLUMNS || head.some((h) => h === "" || parseNumber(h) !== null)) continue;
      const rows: Cell[][] = [];
      for (let j = i + 1; j < lines.length && rows.length < MAX_ROWS; j++) {
        const cells = splitDelimited(lines[j] ?? "", sep);
        if (!cells || cells.length !== head.length) break;
        rows.push(cells.map(cellFromText));
      }
      if (rows.length >= 2) return { columns: head, rows, source: "csv" };
    }
  }
  return null;
}
