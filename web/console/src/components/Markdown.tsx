// Renders the Markdown tree of lib/markdown as React elements (text is
// always text: no HTML is parsed).
import { Fragment, useMemo, type ReactNode } from "react";
import { parseMarkdown, type Block, type Inline } from "../lib/markdown.ts";
import { parseNumber } from "../lib/tables.ts";

// cellClass right-aligns a table cell that holds a number (unless the
// table says otherwise).
function cellClass(align: string | undefined, c: Inline[]): string | undefined {
  if (align) return "al-" + align;
  const only = c.length === 1 ? c[0] : undefined;
  return only && only.t === "text" && parseNumber(only.v) !== null ? "num" : undefined;
}

function inline(nodes: Inline[]): ReactNode[] {
  return nodes.map((n, i) => {
    switch (n.t) {
      case "text": return <Fragment key={i}>{n.v}</Fragment>;
      case "code": return <code key={i}>{n.v}</code>;
      case "strong": return <strong key={i}>{inline(n.c)}</strong>;
      case "em": return <em key={i}>{inline(n.c)}</em>;
      case "link": return <a key={i} href={n.href} target="_blank" rel="noopener noreferrer">{inline(n.c)}</a>;
    }
    return null;
  });
}

function block(b: Block, i: number): ReactNode {
  switch (b.t) {
    case "h": {
      const H = (["h3", "h4", "h5", "h6", "h6", "h6"] as const)[b.level - 1] ?? "h6";
      return <H key={i}>{inline(b.c)}</H>;
    }
    case "p": return <p key={i}>{inline(b.c)}</p>;
    case "ul": return <ul key={i}>{b.items.map((it, k) => <li key={k}>{inline(it)}</li>)}</ul>;
    case "ol": return <ol key={i} start={b.start}>{b.items.map((it, k) => <li key={k}>{inline(it)}</li>)}</ol>;
    case "code": return <pre key={i} className="code"><code>{b.v}</code></pre>;
    case "hr": return <hr key={i} />;
    case "quote": return <blockquote key={i}>{b.c.map(block)}</blockquote>;
    case "table":
      return (
        <div className="table-wrap" key={i}>
          <table>
            <thead><tr>{b.head.map((h, k) => <th key={k} className={b.align[k] ? "al-" + b.align[k] : undefined}>{inline(h)}</th>)}</tr></thead>
            <tbody>{b.rows.map((r, k) => <tr key={k}>{r.map((c, j) => <td key={j} className={cellClass(b.align[j], c)}>{inline(c)}</td>)}</tr>)}</tbody>
          </table>
        </div>
      );
  }
  return null;
}

export function Markdown({ text }: { text: string }) {
  const blocks = useMemo(() => parseMarkdown(text), [text]);
  return <div className="md">{blocks.map(block)}</div>;
}
