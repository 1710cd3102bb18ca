// The API client: the gateway's public HTTP/JSON routes (docs/api), with
// the tenant's API key as a bearer token, as every client sends it. Errors
// are thrown as ApiError with the HTTP status and the API's error code.

const KEY_ITEM = "baagent.console.key";

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function getKey(): string {
  try {
    return sessionStorage.getItem(KEY_ITEM) ?? "";
  } catch {
    return "";
  }
}

export function setKey(key: string): void {
  try {
    if (key) sessionStorage.setItem(KEY_ITEM, key);
    else sessionStorage.removeItem(KEY_ITEM);
  } catch {
    // Storage refused (private mode): the key lasts until the page goes.
  }
  memoryKey = key;
}

let memoryKey = "";

function currentKey(): string {
  return getKey() || memoryKey;
}

export interface ApiCall {
  // A JSON body.
  body?: unknown;
  // A body sent as is (an upload), with the Content-Type header the
  // caller gives.
  raw?: Blob | ArrayBuffer | string;
  // More request headers (If-Match, If-None-Match, a content type).
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

export interface ApiAnswer<T> {
  data: T;
  status: number;
  headers: Headers;
}

// apiCall sends one API request: a JSON body or a raw one, the API key,
// the caller's headers; it answers the decoded JSON body with the status and headers
// (an ETag, say), or throws ApiError.
export async function apiCall<T>(method: string, path: string, call: ApiCall = {}): Promise<ApiAnswer<T>> {
  const headers: Record<string, string> = {};
  const key = currentKey();
  if (key) headers["Authorization"] = "Bearer " + key;
  // A call that changes something says JSON, body or not: without API keys
  // the gateway refuses anything else from a browser (cross-site guard).
  if (method !== "GET") headers["Content-Type"] = "application/json";
  Object.assign(headers, call.headers);
  const init: RequestInit = { method, headers };
  if (call.signal) init.signal = call.signal;
  if (call.raw !== undefined) init.body = call.raw;
  else if (call.body !== undefined) init.body = JSON.stringify(call.body);
  const r = await fetch(path, init);
  const text = await r.text();
  let data: unknown = {};
  try {
    data = text ? JSON.parse(text) : {};
  } catch {
    data = {};
  }
  if (!r.ok) {
    const e = (data as { error?: { code?: string; message?: string } }).error ?? {};
    throw new ApiError(r.status, e.code ?? "", e.message || r.statusText || "HTTP " + r.status);
  }
  return { data: data as T, status: r.status, headers: r.headers };
}

export async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  return (await apiCall<T>(method, path, { body, signal })).data;
}

// Text fetches a route that answers with text (an export).
export async function apiText(path: string, signal?: AbortSignal): Promise<string> {
  const headers: Record<string, string> = {};
  const key = currentKey();
  if (key) headers["Authorization"] = "Bearer " + key;
  const init: RequestInit = { headers };
  if (signal) init.signal = signal;
  const r = await fetch(path, init);
  const text = await r.text();
  if (!r.ok) {
    let msg = r.statusText;
    try {
      msg = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? msg;
    } catch {
      // not JSON
    }
    throw new ApiError(r.status, "", msg || "HTTP " + r.status);
  }
  return text;
}

export interface WhoAmI {
  tenant: string;
  keys_required: boolean;
  trace_link_template?: string;
}

export interface Run {
  run_id: string;
  conversation_id?: string;
  state?: string;
  model?: string;
  input?: string;
  final_answer?: string;
  created_at?: string;
  trace_id?: string;
  last_seq?: string | number;
  query_complexity?: string;
  plan?: unknown;
  parent_run_id?: string;
  [k: string]: unknown;
}

export interface Conversation {
  conversation_id: string;
  title?: string;
  created_at?: string;
  last_activity_at?: string;
  run_count?: number;
  state?: string;
  last_run_id?: string;
}

const enc = encodeURIComponent;

export const client = {
  whoami: () => api<WhoAmI>("GET", "/v1/whoami"),
  listConversations: (pageSize = 50) => api<{ conversations?: Conversation[] }>("GET", "/v1/conversations?page_size=" + pageSize),
  // Runs newest first; next_page_token continues with older ones.
  listRuns: (conversationId: string, pageSize = 50, pageToken = "", signal?: AbortSignal) =>
    api<{ runs?: Run[]; next_page_token?: string }>(
      "GET",
      "/v1/runs?page_size=" + pageSize + (conversationId ? "&conversation_id=" + enc(conversationId) : "") + (pageToken ? "&page_token=" + enc(pageToken) : ""),
      undefined,
      signal,
    ),
  getRun: (runId: string) => api<{ run: Run }>("GET", "/v1/runs/" + enc(runId)),
  startRun: (spec: { input: string; conversation_id?: string; model?: string }) => api<{ run: Run }>("POST", "/v1/runs", { spec }),
  cancelRun: (runId: string) => api<{ run: Run }>("POST", "/v1/runs/" + enc(runId) + "/cancel", {}),
  submitInput: (runId: string, inputId: string, answer: string) =>
    api<unknown>("POST", "/v1/runs/" + enc(runId) + "/input", { input: { input_id: inputId, answer } }),
  streamToken: () => api<{ token: string }>("POST", "/v1/auth/stream-token"),
  runEvents: (runId: string, signal?: AbortSignal) => apiText("/v1/runs/" + enc(runId) + "/export?format=events", signal),
};
