// A small Markdown parser for the agent's answers: headings, paragraphs,
// bullet and numbered lists, fenced code, pipe tables, rules and block
// quotes; inline code, bold, italic and links (http, https and mailto only).
// It yields a tree that the Markdown component renders as React elements:
// no HTML string is ever made, so untrusted text cannot inject markup.
// Pure: unit-tested with node:test.

import { isDelimiterRow, splitPipeRow } from "./tables.ts";

export type Inline =
  | { t: "text"; v: string }
  | { t: "code"; v: string }
  | { t: "strong"; c: Inline[] }
  | { t: "em"; c: Inline[] }
  | { t: "link"; href: string; c: Inline[] };

export type Block =
  | { t: "h"; level: number; c: Inline[] }
  | { t: "p"; c: Inline[] }
  | { t: "ul"; items: Inline[][] }
  | { t: "ol"; start: number; items: Inline[][] }
  | { t: "code"; lang: string; v: string }
  | { t: "table"; head: Inline[][]; align: ("left" | "right" | "center" | "")[]; rows: Inline[][][] }
  | { t: "quote"; c: Block[] }
  | { t: "hr" };

const MAX_DEPTH = 4;

export function parseMarkdown(src: string, depth = 0): Block[] {
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  const out: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] ?? "";
    if (!line.trim()) { i++; continue; }
    const fence = /^\s*(```|~~~)\s*([\w+-]*)/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !(lines[i] ?? "").trim().startsWith(fence[1] ?? "```")) body.push(lines[i++] ?? "");
      i++;
      out.push({ t: "code", lang: fence[2] ?? "", v: body.join("\n") });
      continue;
    }
    const h = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) { out.push({ t: "h", level: (h[1] ?? "#").length, c: parseInline(h[2] ?? "") }); i++; continue; }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { out.push({ t: "hr" }); i++; continue; }
    if (line.includes("|") && i + 1 < lines.length && isDelimiterRow(lines[i + 1] ?? "")) {
      const head = splitPipeRow(line);
      const align = splitPipeRow(lines[i + 1] ?? "").map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "") as "left" | "right" | "center" | "");
      const rows: Inline[][][] = [];
      i += 2;
      while (i < lines.length && (lines[i] ?? "").includes("|") && (lines[i] ?? "").trim()) {
        const cells = splitPipeRow(lines[i] ?? "");
        rows.push(head.map((_, k) => parseInline(cells[k] ?? "")));
        i++;
      }
      out.push({ t: "table", head: head.map((c) => parseInline(c)), align, rows });
      continue;
    }
    if (/^\s*>/.test(line)) {
      const body: string[] = [];
      while (i < lines.length && /^\s*>/.test(lines[i] ?? "")) body.push((lines[i++] ?? "").replace(/^\s*>\s?/, ""));
      out.push(depth < MAX_DEPTH ? { t: "quote", c: parseMarkdown(body.join("\n"), depth + 1) } : { t: "p", c: parseInline(body.join(" ")) });
      continue;
    }
    const ul = /^\s*[-*+]\s+/;
    const ol = /^\s*(\d{1,9})[.)]\s+/;
    if (ul.test(line) || ol.test(line)) {
      const ordered = !ul.test(line);
      const start = ordered ? Number((ol.exec(line) ?? [])[1] ?? 1) : 1;
      const items: string[] = [];
      while (i < lines.length) {
        const l = lines[i] ?? "";
        if (ordered ? ol.test(l) : ul.test(l)) items.push(l.replace(ordered ? ol : ul, ""));
        else if (l.trim() && /^\s{2,}/.test(l) && items.length) items[items.length - 1] += " " + l.trim();
        else break;
        i++;
      }
      const parsed = items.map((x) => parseInline(x));
      out.push(ordered ? { t: "ol", start, items: parsed } : { t: "ul", items: parsed });
      continue;
    }
    const para: string[] = [];
    while (i < lines.length) {
      const l = lines[i] ?? "";
      // The first line is always the paragraph's: a line no branch above
      // took must still be consumed.
      if (para.length > 0 && (!l.trim() || /^(#{1,6})\s/.test(l) || /^\s*(```|~~~)/.test(l) || /^\s*>/.test(l) || /^\s*[-*+]\s+/.test(l) || /^\s*\d{1,9}[.)]\s+/.test(l) ||
        (l.includes("|") && isDelimiterRow(lines[i + 1] ?? "")))) break;
      para.push(l.trim());
      i++;
    }
    out.push({ t: "p", c: parseInline(para.join("\n")) });
  }
  return out;
}

export function safeHref(href: string): string | null {
  const h = href.trim();
  return /^(https?:\/\/|mailto:)/i.test(h) ? h : null;
}

export function parseInline(s: string, depth = 0): Inline[] {
  const out: Inline[] = [];
  let text = "";
  const flush = () => { if (text) { out.push({ t: "text", v: text }); text = ""; } };
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "\\" && i + 1 < s.length && /[\\`*_[\]()#|>-]/.test(s[i + 1] ?? "")) { text += s[i + 1]; i += 2; continue; }
    if (c === "`") {
      const end = s.indexOf("`", i + 1);
      if (end > i) { flush(); out.push({ t: "code", v: s.slice(i + 1, end) }); i = end + 1; continue; }
    }
    if (depth < MAX_DEPTH && (s.startsWith("**", i) || s.startsWith("__", i))) {
      const mark = s.slice(i, i + 2);
      const end = s.indexOf(mark, i + 2);
      if (end > i + 2) { flush(); out.push({ t: "strong", c: parseInline(s.slice(i + 2, end), depth + 1) }); i = end + 2; continue; }
    }
    if (depth < MAX_DEPTH && (c === "*" || c === "_") && s[i + 1] !== " " && s[i + 1] !== c) {
      const end = s.indexOf(c, i + 1);
      const wordy = c === "_" && /\w/.test(s[i - 1] ?? "");
      if (end > i + 1 && !wordy && s[end - 1] !== " ") { flush(); out.push({ t: "em", c: parseInline(s.slice(i + 1, end), depth + 1) }); i = end + 1; continue; }
    }
    if (c === "[" && depth < MAX_DEPTH) {
      const m = /^\[([^\]]*)\]\(([^)\s]+)\)/.exec(s.slice(i));
      if (m) {
        const href = safeHref(m[2] ?? "");
        flush();
        const label = parseInline(m[1] ?? "", depth + 1);
        if (href) out.push({ t: "link", href, c: label });
        else out.push(...label);
        i += m[0].length;
        continue;
      }
    }
    text += c;
    i++;
  }
  flush();
  return out;
}
