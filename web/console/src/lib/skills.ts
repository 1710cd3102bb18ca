// The Skills page's pure logic: the layers of a listing resolved for
// display (which skill wins a name), the upload type of a file, the
// SKILL.md front matter split (as the skills service splits it), a SKILL.md
// rebuilt from a skill's metadata for the editor, entity tags, and the
// messages of a failed write. No DOM, no fetch: unit-tested under node.

// SkillMetadata is the API's SkillMetadata in the protobuf JSON mapping
// with proto names (what the gateway answers).
export interface SkillMetadata {
  name: string;
  description?: string;
  license?: string;
  compatibility?: string;
  allowed_tools?: string[];
  metadata?: Record<string, string>;
  version?: string;
  triggers?: string[];
  scope?: string;
  is_system_skill?: boolean;
  resources?: string[];
  catalog_tokens?: string | number;
  extra?: Record<string, string>;
  disable_model_invocation?: boolean;
  model?: string;
  warnings?: string[];
  revision?: string;
  is_disabled?: boolean;
  is_overridden?: boolean;
  source?: string;
}

export interface SkillLoadError {
  folder?: string;
  scope?: string;
  reason?: string;
}

export type Layer = "system" | "tenant" | "project";
export const LAYERS: readonly Layer[] = ["system", "tenant", "project"];

// layerOf reads a SkillScope enum name (or its short form).
export function layerOf(scope: string | undefined): Layer | "" {
  const s = (scope ?? "").replace(/^SKILL_SCOPE_/, "").toLowerCase();
  return s === "system" || s === "tenant" || s === "project" ? s : "";
}

export function sourceOf(source: string | undefined): string {
  return (source ?? "").replace(/^SKILL_SOURCE_/, "").toLowerCase().replace("unspecified", "");
}

// SkillState is what a listed skill is for the caller: the one runs use
// (active), hidden by a higher layer (overridden), or a system skill turned
// off (disabled).
export type SkillState = "active" | "overridden" | "disabled";

export interface SkillRow {
  meta: SkillMetadata;
  layer: Layer;
  state: SkillState;
  // The layer whose skill of the same name wins, for an overridden skill
  // ("" when the API says it is overridden but the listing has no
  // replacement: an override in tenant.yaml whose skill is missing).
  overriddenBy: Layer | "";
  // The layer a run uses for this name ("" when none: all disabled or
  // hidden).
  winner: Layer | "";
}

const RANK: Record<Layer, number> = { system: 0, tenant: 1, project: 2 };

// resolveLayers turns a listing of every layer (scope=all) into rows: each
// skill with its state and which layer wins its name. A more specific layer
// wins (project over tenant over system); a disabled system skill never
// wins. The API's own flags are trusted (is_overridden can come from
// tenant.yaml with no replacement listed); the winner is computed from what
// is listed. Rows are sorted by layer, then name.
export function resolveLayers(skills: readonly SkillMetadata[]): SkillRow[] {
  const byName = new Map<string, { layer: Layer; meta: SkillMetadata }[]>();
  for (const meta of skills) {
    const layer = layerOf(meta.scope);
    if (!layer || !meta.name) continue;
    const list = byName.get(meta.name) ?? [];
    list.push({ layer, meta });
    byName.set(meta.name, list);
  }
  const rows: SkillRow[] = [];
  for (const list of byName.values()) {
    let winner: Layer | "" = "";
    for (const e of list) {
      if (e.meta.is_disabled || e.meta.is_overridden) continue;
      if (winner === "" || RANK[e.layer] > RANK[winner]) winner = e.layer;
    }
    for (const e of list) {
      let above: Layer | "" = "";
      for (const o of list) if (RANK[o.layer] > RANK[e.layer] && !o.meta.is_disabled && (above === "" || RANK[o.layer] > RANK[above])) above = o.layer;
      const overridden = !!e.meta.is_overridden || above !== "";
      const state: SkillState = e.meta.is_disabled ? "disabled" : overridden ? "overridden" : "active";
      rows.push({ meta: e.meta, layer: e.layer, state, overriddenBy: overridden ? above : "", winner });
    }
  }
  rows.sort((a, b) => RANK[a.layer] - RANK[b.layer] || (a.meta.name < b.meta.name ? -1 : a.meta.name > b.meta.name ? 1 : 0));
  return rows;
}

// stateText says a row's state in words.
export function stateText(r: SkillRow): string {
  if (r.state === "disabled") return "disabled";
  if (r.state === "overridden") return r.overriddenBy ? "overridden by the " + r.overriddenBy + " skill" : "overridden (no replacement loaded)";
  return "active";
}

// filterRows keeps the rows whose name, description or a warning contain
// every word of q (case-insensitive).
export function filterRows<T extends { meta: SkillMetadata }>(rows: readonly T[], q: string): T[] {
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  if (words.length === 0) return [...rows];
  return rows.filter((r) => {
    const hay = [r.meta.name, r.meta.description ?? "", ...(r.meta.warnings ?? [])].join("\n").toLowerCase();
    return words.every((w) => hay.includes(w));
  });
}

// UploadType is how a file is sent as a skill: its media type for
// PUT /v1/skills/{name} and whether it is a SKILL.md.
export interface UploadType {
  ext: string;
  contentType: string;
  skillMd: boolean;
}

const UPLOAD_TYPES: readonly UploadType[] = [
  { ext: ".tar.gz", contentType: "application/gzip", skillMd: false },
  { ext: ".tgz", contentType: "application/gzip", skillMd: false },
  { ext: ".zip", contentType: "application/zip", skillMd: false },
  { ext: ".tar", contentType: "application/x-tar", skillMd: false },
  { ext: ".md", contentType: "text/markdown", skillMd: true },
];

export const UPLOAD_ACCEPT = ".md,.zip,.tar,.tar.gz,.tgz,text/markdown,application/zip,application/x-tar,application/gzip";

// uploadType picks the media type from the file name (case-insensitive);
// null for a file that is none of SKILL.md, zip, tar, tar.gz.
export function uploadType(fileName: string): UploadType | null {
  const lower = fileName.trim().toLowerCase();
  for (const t of UPLOAD_TYPES) if (lower.endsWith(t.ext) && lower.length > t.ext.length) return t;
  return null;
}

// nameFromFile is the skill name an archive's file name suggests
// (board-brief.tar.gz → board-brief); "" when it is not a valid name.
export function nameFromFile(fileName: string): string {
  const t = uploadType(fileName);
  if (!t || t.skillMd) return "";
  const base = fileName.trim().slice(0, fileName.trim().length - t.ext.length).split(/[\\/]/).pop() ?? "";
  const n = base.toLowerCase();
  return validSkillName(n) ? n : "";
}

// validSkillName: 1–64 lowercase letters, digits and single hyphens, not
// starting or ending with a hyphen (the standard's rule).
export function validSkillName(n: string): boolean {
  return n.length >= 1 && n.length <= 64 && /^[a-z0-9]+(-[a-z0-9]+)*$/.test(n);
}

// validProject: a project of a write, 1–128 of [A-Za-z0-9_-].
export function validProject(p: string): boolean {
  return /^[A-Za-z0-9_-]{1,128}$/.test(p);
}

export type Split =
  | { ok: true; frontMatter: string; body: string }
  | { ok: false; error: string };

function isDelimiter(line: string): boolean {
  return line.replace(/[ \t\r]+$/, "") === "---";
}

// splitFrontMatter splits a SKILL.md as the skills service does
// (skillmd.Split): a byte order mark is dropped; the first line must be
// `---`; the front matter ends at the next `---` line (trailing spaces,
// tabs and a CR allowed); the body is what follows, trimmed.
export function splitFrontMatter(text: string): Split {
  const data = text.startsWith("\uFEFF") ? text.slice(1) : text;
  const nl = data.indexOf("\n");
  const first = nl < 0 ? data : data.slice(0, nl);
  if (!isDelimiter(first)) return { ok: false, error: "SKILL.md must start with a '---' line that opens the YAML front matter" };
  if (nl < 0) return { ok: false, error: "the front matter has no closing '---' line" };
  const rest = data.slice(nl + 1);
  let off = 0;
  for (;;) {
    const end = rest.indexOf("\n", off);
    const line = end < 0 ? rest.slice(off) : rest.slice(off, end);
    if (isDelimiter(line)) {
      const after = end < 0 ? "" : rest.slice(end + 1);
      return { ok: true, frontMatter: rest.slice(0, off), body: after.trim() };
    }
    if (end < 0) break;
    off = end + 1;
  }
  return { ok: false, error: "the front matter has no closing '---' line" };
}

// frontMatterName reads the top-level `name:` of a front matter (plain,
// 'single' or "double" quoted); "" when there is none.
export function frontMatterName(frontMatter: string): string {
  for (const raw of frontMatter.split("\n")) {
    const m = /^name[ \t]*:[ \t]*(.*?)[ \t\r]*$/.exec(raw);
    if (!m) continue;
    let v = (m[1] ?? "").replace(/[ \t]+#.*$/, "");
    if (v.length >= 2 && v.startsWith('"') && v.endsWith('"')) {
      try {
        const s: unknown = JSON.parse(v);
        v = typeof s === "string" ? s : "";
      } catch {
        v = v.slice(1, -1);
      }
    } else if (v.length >= 2 && v.startsWith("'") && v.endsWith("'")) v = v.slice(1, -1).replace(/''/g, "'");
    return v.trim();
  }
  return "";
}

// skillMdName is the name a SKILL.md's front matter gives ("" when none).
export function skillMdName(text: string): string {
  const s = splitFrontMatter(text);
  return s.ok ? frontMatterName(s.frontMatter) : "";
}

const YAML_WORDS = /^(true|false|yes|no|on|off|null|~|y|n)$/i;

// yamlString writes s as a YAML scalar: plain when that reads back as the
// same string, else double-quoted (JSON's string syntax is YAML's
// double-quoted style).
export function yamlString(s: string): string {
  const plain = /^[A-Za-z_][A-Za-z0-9_ .,/()+-]*$/.test(s) && !/ $/.test(s) && !YAML_WORDS.test(s) && !/^[0-9.+-]/.test(s);
  return plain ? s : JSON.stringify(s);
}

const STANDARD_KEYS = new Set(["name", "description", "license", "compatibility", "allowed-tools", "metadata", "version", "triggers", "model", "disable-model-invocation"]);

// buildSkillMd writes a SKILL.md from a skill's metadata and body: the API
// gives a skill's parsed front matter, not its text, so the editor starts
// from this. Unknown keys (extra) are written back as their JSON text.
export function buildSkillMd(meta: SkillMetadata, body: string): string {
  const lines = ["---", "name: " + yamlString(meta.name)];
  if (meta.description) lines.push("description: " + yamlString(meta.description));
  if (meta.license) lines.push("license: " + yamlString(meta.license));
  if (meta.compatibility) lines.push("compatibility: " + yamlString(meta.compatibility));
  if (meta.version) lines.push("version: " + yamlString(meta.version));
  if (meta.model) lines.push("model: " + yamlString(meta.model));
  if (meta.disable_model_invocation) lines.push("disable-model-invocation: true");
  if (meta.allowed_tools?.length) lines.push("allowed-tools: [" + meta.allowed_tools.map(yamlString).join(", ") + "]");
  if (meta.triggers?.length) {
    lines.push("triggers:");
    for (const t of meta.triggers) lines.push("  - " + yamlString(t));
  }
  const md = Object.entries(meta.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (md.length) {
    lines.push("metadata:");
    for (const [k, v] of md) lines.push("  " + yamlString(k) + ": " + yamlString(v));
  }
  for (const [k, v] of Object.entries(meta.extra ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (STANDARD_KEYS.has(k) || k.includes("\n")) continue;
    lines.push(yamlString(k) + ": " + (v.includes("\n") ? JSON.stringify(v) : v));
  }
  lines.push("---", "", "");
  return lines.join("\n") + body.trim() + "\n";
}

// etag quotes a revision for If-Match; parseEtag reads an ETag header back
// into the revision ("" for none or a weak tag, which cannot match).
export function etag(revision: string): string {
  return '"' + revision + '"';
}

export function parseEtag(header: string | null | undefined): string {
  const h = (header ?? "").trim();
  if (!h || h.startsWith("W/")) return "";
  const v = h.length >= 2 && h.startsWith('"') && h.endsWith('"') ? h.slice(1, -1) : h;
  return v.includes('"') ? "" : v;
}

// Precondition is a write's condition: create only, replace the revision
// read, or none.
export type Precondition = { create: true } | { ifMatch: string } | null;

export function preconditionHeaders(p: Precondition): Record<string, string> {
  if (!p) return {};
  if ("create" in p) return { "If-None-Match": "*" };
  return p.ifMatch ? { "If-Match": etag(p.ifMatch) } : {};
}

// writeErrorText says why a write failed, by its HTTP status.
export function writeErrorText(status: number, message: string, what: string): string {
  switch (status) {
    case 412:
      return what + ": it changed since you opened it (or already exists) — reload to see the current revision. (" + message + ")";
    case 413:
      return what + ": the skill is larger than the gateway accepts. (" + message + ")";
    case 415:
      return what + ": the gateway does not take this file type. (" + message + ")";
    case 501:
      return what + ": this deployment cannot store skills. (" + message + ")";
    case 404:
      return what + ": no such skill. (" + message + ")";
  }
  return what + ": " + message;
}

// skillPath is the console route of one skill of a layer; parseSkillPath
// reads it back. /skills/<layer>/<name>[/edit], the project in ?project=.
export function skillPath(layer: Layer, name: string, edit = false): string {
  return "/skills/" + layer + "/" + encodeURIComponent(name) + (edit ? "/edit" : "");
}

export interface SkillRoute {
  layer: Layer;
  name: string;
  edit: boolean;
}

export function parseSkillPath(path: string): SkillRoute | null {
  const m = /^\/skills\/(system|tenant|project)\/([^/]+)(\/edit)?\/?$/.exec(path);
  if (!m) return null;
  let name: string;
  try {
    name = decodeURIComponent(m[2] ?? "");
  } catch {
    return null;
  }
  return name ? { layer: m[1] as Layer, name, edit: !!m[3] } : null;
}
