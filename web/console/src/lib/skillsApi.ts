// The skills API as the Skills page calls it (docs/operations/managing-skills.md):
// listing by layer, one skill with its revision, uploads of a SKILL.md or an
// archive with their media type and precondition headers, deletion at a
// revision, and a system skill's state. Reads go through api(); the writes
// need headers (If-Match, If-None-Match, the upload's media type), sent
// with apiCall.
import { api, apiCall } from "./api.ts";
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

export const skillsApi = {
  // scope: "all" lists every layer (with is_overridden and is_disabled).
  list: (scope: string, project: string, signal?: AbortSignal) =>
    api<SkillList>("GET", "/v1/skills" + query({ scope, project, include_invalid: "true" }), undefined, signal),
  get: (name: string, project: string, signal?: AbortSignal) =>
    api<SkillDoc>("GET", "/v1/skills/" + enc(name) + query({ project, level: "2" }), undefined, signal),
  put: (name: string, project: string, content: Blob | string, contentType: string, pre: Precondition) =>
    apiCall<PutResult>("PUT", "/v1/skills/" + enc(name) + query({ project }), { raw: content, headers: { "Content-Type": contentType, ...preconditionHeaders(pre) } }).then((a) => a.data),
  // DELETE says JSON: without API keys the gateway's browser guard wants it.
  remove: (name: string, project: string, revision: string) =>
    apiCall<{ revision?: string }>("DELETE", "/v1/skills/" + enc(name) + query({ project }), { headers: preconditionHeaders(revision ? { ifMatch: revision } : null) }).then((a) => a.data),
  setDisabled: (name: string, project: string, disabled: boolean) =>
    api<{ skill?: SkillMetadata }>("PUT", "/v1/skills/" + enc(name) + "/state" + query({ project }), { disabled }),
};
