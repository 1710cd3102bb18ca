// The Activity page's API calls: the public routes any client uses.
import { api, client, type Conversation, type Run } from "./api.ts";

export const PAGE_SIZE = 20;

export interface RunsPage {
  runs: Run[];
  nextPageToken: string;
}

const enc = encodeURIComponent;

// listRunsPage reads one page of the tenant's runs, newest first
// (GET /v1/runs), optionally of one conversation.
export async function listRunsPage(pageToken: string, conversationId: string, signal?: AbortSignal): Promise<RunsPage> {
  let q = "/v1/runs?page_size=" + PAGE_SIZE;
  if (conversationId) q += "&conversation_id=" + enc(conversationId);
  if (pageToken) q += "&page_token=" + enc(pageToken);
  const d = await api<{ runs?: Run[]; next_page_token?: string }>("GET", q, undefined, signal);
  return { runs: Array.isArray(d.runs) ? d.runs : [], nextPageToken: typeof d.next_page_token === "string" ? d.next_page_token : "" };
}

export async function getRun(runId: string, signal?: AbortSignal): Promise<Run> {
  const d = await api<{ run: Run }>("GET", "/v1/runs/" + enc(runId), undefined, signal);
  return d.run;
}

export async function listConversations(signal?: AbortSignal): Promise<Conversation[]> {
  const d = await api<{ conversations?: Conversation[] }>("GET", "/v1/conversations?page_size=100", undefined, signal);
  return Array.isArray(d.conversations) ? d.conversations : [];
}

export const runEvents = client.runEvents;
