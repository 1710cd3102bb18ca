// The skills API as the Skills page calls it (docs/operations/managing-skills.md):
// listing by layer, one skill with its revision, uploads of a SKILL.md or an
// archive with their media type and precondition headers, deletion at a
// revision, and a system skill's state. Reads go through api(); the writes
// need headers api() does not send (If-Match, If-None-Match, the upload's
// media type), so they use send() below, which carries the same bearer key
// and throws the same ApiError.
import { api, ApiError, getKey } from "./api.ts";
import { preconditionHeaders, type Precondition, type SkillLoadError, type SkillMetadata } from "./skills.ts";

const enc = encodeURIComponent;

function query(params: Record<string, string | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) p.set(k, v);
  const s = p.toString();
  return s ? "?" + s : "";
}

export interface SkillList {
  skills?: SkillMetadata[];
  invalid?: SkillLoadError[];
}

export interface SkillDoc {
  metadata?: SkillMetadata;
  body?: string;
  resources?: { path?: string; size_bytes?: string | number; truncated?: boolean }[];
}

export interface PutResult {
  skill?: SkillMetadata;
  replaced?: boolean;
}

async function send<T>(method: string, path: string, headers: Record<string, string>, body?: BodyInit): Promise<T> {
  const h: Record<string, string> = { ...headers };
  const key = getKey();
  if (key) h["Authorization"] = "Bearer " + key;
  const init: RequestInit = { method, headers: h };
  if (body !== undefined) init.body = body;
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
  return data as T;
}

export const skillsApi = {
  // scope: "all" lists every layer (with is_overridden and is_disabled).
  list: (scope: string, project: string, signal?: AbortSignal) =>
    api<SkillList>("GET", "/v1/skills" + query({ scope, project, include_invalid: "true" }), undefined, signal),
  get: (name: string, project: string, signal?: AbortSignal) =>
    api<SkillDoc>("GET", "/v1/skills/" + enc(name) + query({ project, level: "2" }), undefined, signal),
  put: (name: string, project: string, content: Blob | string, contentType: string, pre: Precondition) =>
    send<PutResult>("PUT", "/v1/skills/" + enc(name) + query({ project }), { "Content-Type": contentType, ...preconditionHeaders(pre) }, content),
  // DELETE says JSON: without API keys the gateway's browser guard wants it.
  remove: (name: string, project: string, revision: string) =>
    send<{ revision?: string }>("DELETE", "/v1/skills/" + enc(name) + query({ project }), { "Content-Type": "application/json", ...preconditionHeaders(revision ? { ifMatch: revision } : null) }),
  setDisabled: (name: string, project: string, disabled: boolean) =>
    api<{ skill?: SkillMetadata }>("PUT", "/v1/skills/" + enc(name) + "/state" + query({ project }), { disabled }),
};
