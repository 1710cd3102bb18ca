// The Agent chat: the tenant's conversations, the runs of the open one and
// each run's chat view (a reducer over its events). A live run streams over
// SSE; a finished run's events come from its events export. The open run's
// events and cursor are kept in sessionStorage, so after a reload the view
// is rebuilt from them and the stream resumes from the cursor: no event is
// lost or shown twice.
import { create } from "zustand";
import { client, type Conversation, type Run } from "../lib/api.ts";
import { applyAll, newChat, runStatus, withRunRecord, type ChatState, type RunEvent } from "../lib/chat.ts";
import { parseJSONL, RunStream, type StreamStatus } from "../lib/stream.ts";
import { useSession } from "./session.ts";

export type Load = "idle" | "loading" | "ready" | "error";

interface ChatStore {
  conversations: Conversation[];
  conversationsLoad: Load;
  conversationsError: string;
  conversationId: string; // "" for a new chat
  runs: Run[];
  runsLoad: Load;
  runsError: string;
  // The page token of the conversation's older runs ("" when all are shown).
  earlierToken: string;
  earlierLoad: Load;
  earlierError: string;
  chats: Record<string, ChatState>;
  runErrors: Record<string, string>;
  streamStatus: Record<string, StreamStatus>;
  sending: boolean;
  sendError: string;
  loadConversations: () => Promise<void>;
  openConversation: (id: string) => Promise<void>;
  loadEarlier: () => Promise<void>;
  send: (input: string) => Promise<string>; // the run's conversation id
  answer: (runId: string, inputId: string, answer: string) => Promise<void>;
  cancel: (runId: string) => Promise<void>;
  closeAll: () => void;
}

const streams = new Map<string, RunStream>();
const SNAP_PREFIX = "baagent.console.run.";
const MAX_SNAPSHOT_CHARS = 2_000_000;
// Runs are listed 20 at a time, newest first; older ones on request.
const RUNS_PAGE = 20;

interface Snapshot {
  cursor: string;
  events: RunEvent[];
}

// Raw events of the streaming runs, kept for the snapshot.
const raw = new Map<string, RunEvent[]>();
const saveTimers = new Map<string, ReturnType<typeof setTimeout>>();

function loadSnapshot(runId: string): Snapshot | null {
  try {
    const s = sessionStorage.getItem(SNAP_PREFIX + runId);
    if (!s) return null;
    const snap = JSON.parse(s) as Snapshot;
    return Array.isArray(snap.events) && typeof snap.cursor === "string" ? snap : null;
  } catch {
    return null;
  }
}

function saveSnapshot(runId: string, cursor: string): void {
  const events = raw.get(runId) ?? [];
  try {
    const s = JSON.stringify({ cursor, events });
    if (s.length > MAX_SNAPSHOT_CHARS) sessionStorage.removeItem(SNAP_PREFIX + runId);
    else sessionStorage.setItem(SNAP_PREFIX + runId, s);
  } catch {
    // Storage full or refused: a reload replays from the start instead.
  }
}

function dropSnapshots(keep: Set<string>): void {
  try {
    for (let i = sessionStorage.length - 1; i >= 0; i--) {
      const k = sessionStorage.key(i);
      if (k && k.startsWith(SNAP_PREFIX) && !keep.has(k.slice(SNAP_PREFIX.length))) sessionStorage.removeItem(k);
    }
  } catch {
    // nothing to drop
  }
}

const ENDED = new Set(["RUN_STATE_COMPLETED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED"]);

// Sub-agents' runs belong to their parent's card, not the thread.
function threadRuns(runs: Run[] | undefined): Run[] {
  return (runs ?? []).filter((r) => !r.parent_run_id);
}

function byCreated(a: Run, b: Run): number {
  return String(a.created_at ?? "").localeCompare(String(b.created_at ?? ""));
}

export const useChat = create<ChatStore>((set, get) => {
  const apply = (runId: string, evs: RunEvent[]) => {
    const cur = get().chats[runId] ?? newChat(runId);
    const next = applyAll(cur, evs);
    set({ chats: { ...get().chats, [runId]: next } });
    if (streams.has(runId)) {
      const list = raw.get(runId) ?? [];
      // Only events applied for the first time go into the snapshot.
      for (const e of evs) if (!cur.seqs.has(Math.trunc(Number(e.seq ?? 0)))) list.push(e);
      raw.set(runId, list);
      if (!saveTimers.has(runId)) {
        saveTimers.set(runId, setTimeout(() => {
          saveTimers.delete(runId);
          saveSnapshot(runId, get().chats[runId]?.cursor ?? "");
        }, 250));
      }
    }
  };

  const stream = (run: Run) => {
    const runId = run.run_id;
    if (streams.has(runId)) return;
    const snap = loadSnapshot(runId);
    let cursor = "earliest";
    raw.set(runId, []);
    if (snap && snap.events.length > 0 && snap.cursor) {
      raw.set(runId, snap.events.slice());
      const chat = applyAll(newChat(runId), snap.events);
      set({ chats: { ...get().chats, [runId]: chat } });
      cursor = snap.cursor;
    }
    const s = new RunStream({
      runId,
      cursor,
      tokenNeeded: () => useSession.getState().keysRequired,
      token: async () => (await client.streamToken()).token,
      onEvents: (evs) => apply(runId, evs),
      onStatus: (st) => {
        set({ streamStatus: { ...get().streamStatus, [runId]: st } });
        if (st === "ended") {
          streams.delete(runId);
          const t = saveTimers.get(runId);
          if (t) clearTimeout(t);
          saveTimers.delete(runId);
          saveSnapshot(runId, get().chats[runId]?.cursor ?? "");
        }
      },
    });
    streams.set(runId, s);
    s.start();
  };

  const history = async (run: Run) => {
    const runId = run.run_id;
    if (get().chats[runId]?.ended) return;
    const snap = loadSnapshot(runId);
    if (snap && snap.events.length > 0) {
      apply(runId, snap.events);
      if (get().chats[runId]?.ended) return;
    }
    try {
      const evs = parseJSONL(await client.runEvents(runId));
      apply(runId, evs);
    } catch (e) {
      set({ runErrors: { ...get().runErrors, [runId]: e instanceof Error ? e.message : String(e) } });
    }
  };

  const show = (run: Run) => {
    const chat = withRunRecord(get().chats[run.run_id] ?? newChat(run.run_id), run);
    if (!chat.ended && run.state) chat.status = chat.applied ? chat.status : runStatus(run.state);
    set({ chats: { ...get().chats, [run.run_id]: chat } });
  };

  // load shows runs of conversation id at once, then fills each with its
  // events: an ended run's from its export, a live one's by streaming. It
  // stops when another conversation is opened.
  const load = async (runs: Run[], id: string) => {
    for (const r of runs) show(r);
    for (const r of runs) {
      if (ENDED.has(r.state ?? "")) await history(r);
      else stream(r);
      if (get().conversationId !== id) return;
    }
  };

  return {
    conversations: [],
    conversationsLoad: "idle",
    conversationsError: "",
    conversationId: "",
    runs: [],
    runsLoad: "idle",
    runsError: "",
    earlierToken: "",
    earlierLoad: "idle",
    earlierError: "",
    chats: {},
    runErrors: {},
    streamStatus: {},
    sending: false,
    sendError: "",

    loadConversations: async () => {
      set({ conversationsLoad: get().conversations.length ? "ready" : "loading", conversationsError: "" });
      try {
        const d = await client.listConversations();
        set({ conversations: d.conversations ?? [], conversationsLoad: "ready" });
      } catch (e) {
        set({ conversationsLoad: "error", conversationsError: e instanceof Error ? e.message : String(e) });
      }
    },

    openConversation: async (id: string) => {
      if (id === get().conversationId && get().runsLoad !== "idle" && get().runsLoad !== "error") return;
      get().closeAll();
      set({ conversationId: id, runs: [], runsLoad: id ? "loading" : "ready", runsError: "", sendError: "", earlierToken: "", earlierLoad: "idle", earlierError: "" });
      if (!id) return;
      try {
        const d = await client.listRuns(id, RUNS_PAGE);
        if (get().conversationId !== id) return;
        const runs = threadRuns(d.runs).sort(byCreated);
        set({ runs, runsLoad: "ready", earlierToken: d.next_page_token ?? "" });
        dropSnapshots(new Set(runs.filter((r) => !ENDED.has(r.state ?? "")).map((r) => r.run_id)));
        await load(runs, id);
      } catch (e) {
        if (get().conversationId === id) set({ runsLoad: "error", runsError: e instanceof Error ? e.message : String(e) });
      }
    },

    // loadEarlier shows the page of runs before the oldest one shown.
    loadEarlier: async () => {
      const id = get().conversationId;
      const token = get().earlierToken;
      if (!id || !token || get().earlierLoad === "loading") return;
      set({ earlierLoad: "loading", earlierError: "" });
      try {
        const d = await client.listRuns(id, RUNS_PAGE, token);
        if (get().conversationId !== id) return;
        const known = new Set(get().runs.map((r) => r.run_id));
        const older = threadRuns(d.runs).filter((r) => !known.has(r.run_id)).sort(byCreated);
        set({ runs: [...older, ...get().runs], earlierToken: d.next_page_token ?? "", earlierLoad: "ready" });
        await load(older, id);
      } catch (e) {
        if (get().conversationId === id) set({ earlierLoad: "error", earlierError: e instanceof Error ? e.message : String(e) });
      }
    },

    send: async (input: string) => {
      set({ sending: true, sendError: "" });
      try {
        const spec: { input: string; conversation_id?: string } = { input };
        if (get().conversationId) spec.conversation_id = get().conversationId;
        const { run } = await client.startRun(spec);
        const conv = run.conversation_id ?? "";
        if (conv !== get().conversationId) {
          get().closeAll();
          set({ conversationId: conv, runs: [], runsLoad: "ready" });
        }
        set({ runs: [...get().runs.filter((r) => r.run_id !== run.run_id), run], sending: false });
        show(run);
        stream(run);
        void get().loadConversations();
        return conv;
      } catch (e) {
        set({ sending: false, sendError: e instanceof Error ? e.message : String(e) });
        throw e;
      }
    },

    answer: async (runId, inputId, answer) => {
      await client.submitInput(runId, inputId, answer);
    },

    cancel: async (runId) => {
      await client.cancelRun(runId);
    },

    closeAll: () => {
      for (const [id, s] of streams) {
        s.close();
        const t = saveTimers.get(id);
        if (t) clearTimeout(t);
        saveTimers.delete(id);
        saveSnapshot(id, get().chats[id]?.cursor ?? "");
      }
      streams.clear();
      raw.clear();
    },
  };
});

// Before the page goes (a reload), the streaming runs' latest state is kept.
if (typeof window !== "undefined") {
  window.addEventListener("pagehide", () => {
    for (const id of streams.keys()) saveSnapshot(id, useChat.getState().chats[id]?.cursor ?? "");
  });
}
