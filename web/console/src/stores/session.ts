// The session: the API key (sessionStorage), who it belongs to (whoami)
// and whether the gateway asks for keys at all.
import { create } from "zustand";
import { ApiError, client, getKey, setKey } from "../lib/api.ts";

export type SessionStatus = "checking" | "need-key" | "ready" | "error";

interface SessionState {
  status: SessionStatus;
  tenant: string;
  keysRequired: boolean;
  traceLink: string;
  error: string;
  check: () => Promise<void>;
  signIn: (key: string) => Promise<void>;
  signOut: () => void;
}

export const useSession = create<SessionState>((set, get) => ({
  status: "checking",
  tenant: "",
  keysRequired: false,
  traceLink: "",
  error: "",
  check: async () => {
    set({ status: "checking", error: "" });
    try {
      const w = await client.whoami();
      // With keys required and none given, whoami already answered 401.
      set({ status: "ready", tenant: w.tenant, keysRequired: w.keys_required, traceLink: w.trace_link_template ?? "" });
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {
        // A refused key is not kept: a reload asks again.
        const refused = getKey() !== "";
        if (refused) setKey("");
        set({ status: "need-key", keysRequired: true, error: refused ? "The API key was refused." : "" });
      } else {
        set({ status: "error", error: e instanceof Error ? e.message : String(e) });
      }
    }
  },
  signIn: async (key: string) => {
    setKey(key.trim());
    await get().check();
  },
  signOut: () => {
    setKey("");
    set({ status: "need-key", tenant: "", error: "" });
  },
}));
