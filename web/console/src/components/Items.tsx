// The items of a run's chat view: bubbles, thoughts, tool-call cards,
// sub-agent cards, inline prompts and notices. Each carries its event's
// seq (data-seq), which the browser test reads.
import { useState } from "react";
import type { Item, Plan } from "../lib/chat.ts";
import { Markdown } from "./Markdown.tsx";
import { ResultView } from "./ResultView.tsx";

type Of<K extends Item["kind"]> = Extract<Item, { kind: K }>;

export function ItemView({ item, runId, onAnswer, ended }: { item: Item; runId: string; onAnswer: (id: string, answer: string) => Promise<void>; ended: boolean }) {
  const common = { "data-seq": item.seq || undefined, "data-kind": item.kind, "data-run": runId };
  switch (item.kind) {
    case "user":
      return <div className="bubble user" {...common}><p>{item.text}</p></div>;
    case "text":
      return <div className="bubble agent note" {...common}><Markdown text={item.text} /></div>;
    case "answer":
      return <div className="bubble agent answer" {...common}><Markdown text={item.text} /></div>;
    case "thought":
      return (
        <details className="thought" {...common}>
          <summary>Thought</summary>
          <p>{item.text}</p>
        </details>
      );
    case "tool":
      return <ToolCard item={item} common={common} />;
    case "subagent":
      return (
        <div className={"card subagent st-" + item.status} {...common}>
          <div className="card-head">
            <span className="badge">sub-agent</span>
            <strong>{item.agentType}</strong>
            <span className={"pill st-" + item.status}>{item.status}</span>
            <code className="muted" title="the sub-agent's run">{item.childRunId}</code>
          </div>
          {item.description && <p>{item.description}</p>}
          {item.tools.length > 0 && <p className="muted">tools: {item.tools.join(", ")}</p>}
          {item.summary && <Markdown text={item.summary} />}
        </div>
      );
    case "prompt":
      return <PromptCard item={item} common={common} onAnswer={onAnswer} ended={ended} />;
    case "notice":
      return (
        <div className={"notice " + item.level} role={item.level === "error" ? "alert" : undefined} {...common}>
          <span>{item.text}</span>
          {item.detail && <span className="muted"> — {item.detail}</span>}
        </div>
      );
  }
  return null;
}

function ToolCard({ item, common }: { item: Of<"tool">; common: Record<string, unknown> }) {
  const r = item.result;
  const state = !r ? "running" : r.success ? "ok" : "failed";
  return (
    <div className={"card tool st-" + state} {...common} data-result-seq={r?.seq || undefined}>
      <div className="card-head">
        <span className="badge">tool</span>
        <strong>{item.name}</strong>
        <span className={"pill st-" + state}>{state === "failed" ? "failed " + (r?.errorCode ?? "") : state}</span>
        {r && <span className="muted" title="duration">{Math.round(r.durationMs)} ms</span>}
        {r?.outputLevel && r.outputLevel !== "unspecified" && <span className="tag" title="output level">{r.outputLevel}</span>}
        {r?.cached && <span className="tag" title="served from the tool cache">cached</span>}
        {r && r.retryCount > 0 && <span className="tag">{r.retryCount} retries</span>}
        {r?.artifactId && <span className="tag" title="the full output is kept as an artifact of the run">artifact <code>{r.artifactId}</code></span>}
      </div>
      {item.args && (
        <details className="args">
          <summary>Arguments</summary>
          <pre>{item.args}</pre>
        </details>
      )}
      {r && <ResultView text={r.observation} />}
    </div>
  );
}

function PromptCard({ item, common, onAnswer, ended }: { item: Of<"prompt">; common: Record<string, unknown>; onAnswer: (id: string, answer: string) => Promise<void>; ended: boolean }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const open = !item.answered && !ended;
  const send = async (answer: string) => {
    if (!answer.trim()) return;
    setBusy(true);
    setError("");
    try {
      await onAnswer(item.id, answer);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  const title = { clarification: "Question", decision: "Decision", permission: "Permission" }[item.promptKind];
  return (
    <div className={"card prompt" + (open ? " open" : "")} {...common} aria-live="polite">
      <div className="card-head">
        <span className="badge">{title}</span>
        {item.answered && <span className="pill st-ok">{item.timedOut ? "timed out" : "answered"}</span>}
      </div>
      <p className="prompt-text">{item.text}</p>
      {open ? (
        <>
          <div className="options">
            {item.options.map((o) => (
              <button key={o.label} type="button" disabled={busy} onClick={() => void send(o.label)} title={o.description || undefined} className={o.recommended ? "recommended" : undefined}>
                {o.label}{o.recommended ? " (recommended)" : ""}
              </button>
            ))}
          </div>
          {item.promptKind === "clarification" && (
            <form className="free" onSubmit={(e) => { e.preventDefault(); void send(text); }}>
              <label className="sr-only" htmlFor={"answer-" + item.id}>Your answer</label>
              <input id={"answer-" + item.id} value={text} onChange={(e) => setText(e.target.value)} placeholder="Or type an answer" />
              <button type="submit" disabled={busy || !text.trim()}>Answer</button>
            </form>
          )}
          {error && <p className="error" role="alert">{error}</p>}
        </>
      ) : (
        item.answered && <p className="muted">Answer: <strong>{item.answer || "—"}</strong></p>
      )}
    </div>
  );
}

const MARK: Record<string, string> = { pending: "☐", running: "▶", done: "✓", failed: "✗", skipped: "–" };

export function PlanChecklist({ plan }: { plan: Plan }) {
  const done = plan.steps.filter((s) => s.status === "done").length;
  return (
    <section className="card plan" aria-label="Work plan" data-testid="plan">
      <div className="card-head">
        <span className="badge">plan</span>
        <strong>{done}/{plan.steps.length} steps done</strong>
        {plan.revision > 1 && <span className="tag">revision {plan.revision}</span>}
      </div>
      <ol className="checklist">
        {plan.steps.map((s) => (
          <li key={s.n} className={"ps-" + s.status} data-status={s.status}>
            <span className="mark" aria-hidden="true">{MARK[s.status]}</span>
            <span className="sr-only">{s.status}: </span>
            <span>{s.description}</span>
            {s.summary && <span className="muted"> — {s.summary}</span>}
          </li>
        ))}
      </ol>
    </section>
  );
}
