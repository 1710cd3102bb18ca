// The Agent chat page: the tenant's conversations on the side; the open
// conversation's runs as a thread (the question, the work plan as a live
// checklist, thoughts, tool calls, sub-agents, prompts answered inline, the
// answer); a composer that starts the next run in the conversation.
import { useEffect, useRef, useState } from "react";
import { ItemView, PlanChecklist } from "../components/Items.tsx";
import type { ChatState } from "../lib/chat.ts";
import { linkProps, navigate } from "../router.ts";
import { useChat } from "../stores/chat.ts";
import { useSession } from "../stores/session.ts";

export function ChatPage({ path }: { path: string }) {
  const conversationId = decodeURIComponent(path.slice("/chat/".length) || "");
  const { loadConversations, openConversation, closeAll } = useChat();
  useEffect(() => {
    void loadConversations();
  }, [loadConversations]);
  useEffect(() => {
    void openConversation(conversationId);
  }, [conversationId, openConversation]);
  useEffect(() => closeAll, [closeAll]);
  useEffect(() => {
    performance.mark("console:chat-rendered");
  }, []);
  return (
    <div className="chat">
      <Sidebar current={conversationId} />
      <section className="thread-col" aria-label="Conversation">
        <Thread />
        <Composer />
      </section>
    </div>
  );
}

function Sidebar({ current }: { current: string }) {
  const { conversations, conversationsLoad, conversationsError, loadConversations } = useChat();
  return (
    <aside className="sidebar" aria-label="Conversations">
      <a className="button new" {...linkProps("/chat")}>New chat</a>
      {conversationsLoad === "loading" && <p className="muted" role="status">Loading conversations…</p>}
      {conversationsLoad === "error" && (
        <div className="error" role="alert">
          <p>Conversations could not be loaded: {conversationsError}</p>
          <button type="button" onClick={() => void loadConversations()}>Retry</button>
        </div>
      )}
      {conversationsLoad === "ready" && conversations.length === 0 && <p className="muted">No conversations yet.</p>}
      <ul className="convs">
        {conversations.map((c) => (
          <li key={c.conversation_id}>
            <a {...linkProps("/chat/" + encodeURIComponent(c.conversation_id))} aria-current={c.conversation_id === current ? "page" : undefined} title={c.conversation_id}>
              <span className="title">{c.title || c.conversation_id}</span>
              <span className="muted small">{c.run_count ?? 0} runs{c.state === "CONVERSATION_STATE_ENDED" ? " · ended" : ""}</span>
            </a>
          </li>
        ))}
      </ul>
    </aside>
  );
}

function Thread() {
  const { runs, runsLoad, runsError, chats, runErrors, streamStatus, conversationId, openConversation, earlierToken, earlierLoad, earlierError, loadEarlier } = useChat();
  const box = useRef<HTMLDivElement>(null);
  const pinned = useRef(true); // the reader is at the bottom: follow new items
  const count = runs.reduce((n, r) => n + (chats[r.run_id]?.items.length ?? 0), 0);
  useEffect(() => {
    const el = box.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [count]);
  if (runsLoad === "loading") return <div className="thread empty" role="status">Loading the conversation…</div>;
  if (runsLoad === "error")
    return (
      <div className="thread empty" role="alert">
        <p>The conversation could not be loaded: {runsError}</p>
        <button type="button" onClick={() => void openConversation(conversationId)}>Retry</button>
      </div>
    );
  if (runs.length === 0)
    return (
      <div className="thread empty" data-testid="empty-thread">
        <h2>Ask the agent</h2>
        <p className="muted">Write a question below: the agent plans, queries the data and answers here, step by step.</p>
      </div>
    );
  return (
    <div
      className="thread"
      data-testid="thread"
      ref={box}
      onScroll={(e) => {
        const el = e.currentTarget;
        pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 160;
      }}
    >
      {earlierToken && (
        <div className="earlier">
          <button type="button" onClick={() => void loadEarlier()} disabled={earlierLoad === "loading"} data-testid="earlier-runs">
            {earlierLoad === "loading" ? "Loading earlier runs…" : "Show earlier runs"}
          </button>
          {earlierLoad === "error" && <p className="error" role="alert">Earlier runs could not be loaded: {earlierError}</p>}
        </div>
      )}
      {runs.map((r) => {
        const chat = chats[r.run_id];
        if (!chat) return null;
        return <RunView key={r.run_id} chat={chat} status={streamStatus[r.run_id]} error={runErrors[r.run_id]} />;
      })}
    </div>
  );
}

function RunView({ chat, status, error }: { chat: ChatState; status: string | undefined; error: string | undefined }) {
  const { answer, cancel } = useChat();
  const traceLink = useSession((s) => s.traceLink);
  const complexity = chat.complexity.replace("QUERY_COMPLEXITY_", "").toLowerCase();
  return (
    <article className="run" data-run-id={chat.runId} data-status={chat.status} data-applied={chat.applied} data-duplicates={chat.duplicates} data-last-seq={chat.lastSeq} aria-label={"run " + chat.runId}>
      <div className="run-head">
        <span className={"pill st-" + chat.status}>{chat.status}</span>
        {complexity && complexity !== "unspecified" && <span className="tag">{complexity}</span>}
        <span className="muted small">{chat.usage.inputTokens + chat.usage.outputTokens} tokens · ${chat.usage.costUsd.toFixed(4)}{chat.usage.priced ? "" : " (partly unpriced)"}</span>
        {chat.traceId && (traceLink ? <a className="small" href={traceLink.split("{trace_id}").join(encodeURIComponent(chat.traceId))} target="_blank" rel="noopener noreferrer">trace</a> : <code className="small muted">trace {chat.traceId}</code>)}
        {status && status !== "ended" && status !== "closed" && <span className="small muted" data-testid="stream-status">{status}</span>}
        <span className="spacer" />
        {!chat.ended && chat.applied > 0 && <button type="button" className="link" onClick={() => void cancel(chat.runId).catch(() => undefined)}>Cancel</button>}
      </div>
      {chat.applied === 0 && !error && <p className="muted" role="status">Loading this run's events…</p>}
      {chat.gap && <p className="notice warning">Early events of this run are no longer kept; the view starts later.</p>}
      {chat.plan && <PlanChecklist plan={chat.plan} />}
      {chat.items.map((it, i) => (
        <ItemView key={it.kind + ":" + it.seq + ":" + i} item={it} runId={chat.runId} ended={chat.ended} onAnswer={(id, a) => answer(chat.runId, id, a)} />
      ))}
      {!chat.ended && chat.applied > 0 && chat.status !== "waiting" && <div className="typing" role="status">The agent is working…</div>}
      {error && <p className="error" role="alert">This run's events could not be loaded: {error}</p>}
    </article>
  );
}

function Composer() {
  const { send, sending, sendError, conversationId } = useChat();
  const [text, setText] = useState("");
  const submit = async () => {
    const input = text.trim();
    if (!input || sending) return;
    try {
      const conv = await send(input);
      setText("");
      if (conv && conv !== conversationId) navigate("/chat/" + encodeURIComponent(conv));
    } catch {
      // sendError says why
    }
  };
  return (
    <form className="composer" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <label className="sr-only" htmlFor="composer-input">Message</label>
      <textarea
        id="composer-input"
        rows={2}
        value={text}
        placeholder={conversationId ? "Ask a follow-up…" : "Ask a question about your data…"}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
            e.preventDefault();
            void submit();
          }
        }}
      />
      <button type="submit" disabled={sending || !text.trim()}>{sending ? "Sending…" : "Send"}</button>
      {sendError && <p className="error" role="alert">{sendError}</p>}
    </form>
  );
}
