// The Memory page's data: the memory API's shapes (docs/concepts/memory.md,
// "HTTP"), its calls, and the pure logic the page draws from them — the
// page's routes, the search's URL parameters, search hits grouped for the
// reader, and a graph response turned into Cytoscape elements.
//
// The API answers protobuf JSON: fields keep their proto names, a false,
// zero or empty field is left out, 64-bit counts are strings and enums are
// their full names (EPISODE_STATUS_SYNCED).
import { api } from "./api.ts";

export interface MemEntity {
  id: string;
  name?: string;
  type?: string;
  summary?: string;
  attributes?: Record<string, string>;
  mention_count?: number;
  community_id?: string;
  created_at?: string;
  updated_at?: string;
  aliases?: string[];
}

export interface MemRelation {
  id?: string;
  source_id?: string;
  target_id?: string;
  type?: string;
  fact?: string;
  weight?: number;
  episode_count?: number;
  updated_at?: string;
}

export interface MemCommunity {
  id: string;
  name?: string;
  summary?: string;
  member_count?: number;
  updated_at?: string;
}

export interface MemEpisode {
  id: string;
  source?: string;
  content?: string;
  conversation_id?: string;
  run_id?: string;
  created_at?: string;
  status?: string;
  error?: string;
  entity_ids?: string[];
  redactions?: number;
  processed_at?: string;
}

export interface ChannelRank {
  channel?: string;
  rank?: number;
  score?: number;
}

export interface SearchHit {
  entity?: MemEntity;
  score?: number;
  channels?: ChannelRank[];
  relations?: MemRelation[];
  related_names?: Record<string, string>;
  community?: MemCommunity;
}

export interface SearchResponse {
  hits?: SearchHit[];
  embedding_model?: string;
}

export interface EntityResponse {
  entity?: MemEntity;
  relations?: MemRelation[];
  related_names?: Record<string, string>;
  community?: MemCommunity;
  episodes?: MemEpisode[];
}

export interface GraphResponse {
  entities?: MemEntity[];
  relations?: MemRelation[];
  communities?: MemCommunity[];
  truncated?: boolean;
}

export interface MemStats {
  episodes?: string | number;
  episodes_pending?: string | number;
  episodes_failed?: string | number;
  entities?: string | number;
  relations?: string | number;
  communities?: string | number;
  backend?: string;
  embedding_model?: string;
  communities_updated_at?: string;
}

export interface MemSettings {
  capture_runs?: boolean;
  tools_enabled?: boolean;
  patterns_enabled?: boolean;
  capture_disabled_conversations?: string[];
  patterns_disabled_conversations?: string[];
}

export interface SettingsResponse {
  settings?: MemSettings;
  capture_effective?: boolean;
  patterns_effective?: boolean;
}

// What PATCH /v1/memory/settings accepts: only the fields set change.
export interface SettingsPatch {
  capture_runs?: boolean;
  tools_enabled?: boolean;
  patterns_enabled?: boolean;
  conversation_id?: string;
  conversation_capture?: boolean;
  conversation_patterns?: boolean;
}

// The API's bounds (services/gateway/memory.go, memory.proto).
export const MIN_DEPTH = 1;
export const MAX_DEPTH = 3;
export const GRAPH_MAX_NODES = 100;
export const MAX_QUERY_BYTES = 4096;
export const MAX_TYPES = 20;
export const EPISODES_PAGE = 20;
export const ENTITIES_PAGE = 30;

// The entity types the extractor gives (docs/concepts/memory.md,
// "Extraction"); the search's type filter offers them.
export const ENTITY_TYPES = ["Person", "Organization", "Location", "Product", "ProductCategory", "Metric", "Dataset", "Table", "Column", "TimePeriod", "Event", "Concept", "Other"] as const;

// The search's modes (GET /v1/memory/search?mode=).
export const SEARCH_MODES = ["hybrid", "vector", "keyword", "graph"] as const;
export type SearchMode = (typeof SEARCH_MODES)[number];

const enc = encodeURIComponent;

export const memory = {
  stats: (signal?: AbortSignal) => api<MemStats>("GET", "/v1/memory/stats", undefined, signal),
  search: (p: SearchParams, signal?: AbortSignal) => api<SearchResponse>("GET", "/v1/memory/search?" + searchApiQuery(p), undefined, signal),
  entity: (id: string, signal?: AbortSignal) => api<EntityResponse>("GET", "/v1/memory/entities/" + enc(id), undefined, signal),
  entities: (namePrefix: string, pageToken: string, signal?: AbortSignal) =>
    api<{ entities?: MemEntity[]; next_page_token?: string }>(
      "GET", "/v1/memory/entities?page_size=" + ENTITIES_PAGE + (namePrefix ? "&name_prefix=" + enc(namePrefix) : "") + (pageToken ? "&page_token=" + enc(pageToken) : ""), undefined, signal),
  deleteEntity: (id: string) => api<{ relations_removed?: number }>("DELETE", "/v1/memory/entities/" + enc(id)),
  graph: (id: string, depth: number, signal?: AbortSignal) =>
    api<GraphResponse>("GET", "/v1/memory/entities/" + enc(id) + "/graph?depth=" + clampDepth(depth) + "&max_nodes=" + GRAPH_MAX_NODES, undefined, signal),
  episodes: (pageToken: string, signal?: AbortSignal) =>
    api<{ episodes?: MemEpisode[]; next_page_token?: string }>(
      "GET", "/v1/memory/episodes?page_size=" + EPISODES_PAGE + (pageToken ? "&page_token=" + enc(pageToken) : ""), undefined, signal),
  episode: (id: string, signal?: AbortSignal) => api<{ episode?: MemEpisode; entities?: MemEntity[] }>("GET", "/v1/memory/episodes/" + enc(id), undefined, signal),
  deleteEpisode: (id: string) => api<{ entities_removed?: number; relations_removed?: number }>("DELETE", "/v1/memory/episodes/" + enc(id)),
  addEpisode: (content: string, wait: boolean) => api<{ episode?: MemEpisode; skipped?: boolean }>("POST", "/v1/memory/episodes", { content, wait }),
  settings: (signal?: AbortSignal) => api<SettingsResponse>("GET", "/v1/memory/settings", undefined, signal),
  updateSettings: (patch: SettingsPatch) => api<{ settings?: MemSettings }>("PATCH", "/v1/memory/settings", patch),
};

// --- routes ---

export type MemoryRoute =
  | { view: "search" }
  | { view: "entity"; id: string }
  | { view: "episodes" }
  | { view: "episode"; id: string }
  | { view: "settings" };

// parseRoute reads the page's route from its path ("/memory",
// "/memory/entities/<id>", "/memory/episodes", "/memory/episodes/<id>",
// "/memory/settings"); anything else is the search.
export function parseRoute(path: string): MemoryRoute {
  const parts = path.split("/").filter(Boolean);
  if (parts[0] !== "memory") return { view: "search" };
  const id = parts.length === 3 ? safeDecode(parts[2] ?? "") : "";
  if (parts[1] === "entities" && id) return { view: "entity", id };
  if (parts[1] === "episodes" && id) return { view: "episode", id };
  if (parts[1] === "episodes" && parts.length === 2) return { view: "episodes" };
  if (parts[1] === "settings" && parts.length === 2) return { view: "settings" };
  return { view: "search" };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function entityPath(id: string, depth?: number): string {
  const d = depth === undefined ? MIN_DEPTH : clampDepth(depth);
  return "/memory/entities/" + enc(id) + (d !== MIN_DEPTH ? "?depth=" + d : "");
}

export function episodePath(id: string): string {
  return "/memory/episodes/" + enc(id);
}

// clampDepth bounds a graph depth to what the API accepts (1–3); anything
// not a number is the default, 1.
export function clampDepth(v: unknown): number {
  const n = typeof v === "number" ? v : typeof v === "string" && v.trim() !== "" ? Number(v) : NaN;
  if (!Number.isFinite(n)) return MIN_DEPTH;
  return Math.min(MAX_DEPTH, Math.max(MIN_DEPTH, Math.trunc(n)));
}

// --- search parameters ---

export interface SearchParams {
  q: string;
  types: string[];
  mode: SearchMode;
}

// parseSearch reads the search from the page's URL query (?q=&type=&mode=):
// the query is trimmed and cut to the API's limit, the types are the known
// ones (repeated or comma-separated, each once), an unknown mode is hybrid.
export function parseSearch(search: string): SearchParams {
  const p = new URLSearchParams(search);
  const q = cutUtf8((p.get("q") ?? "").trim(), MAX_QUERY_BYTES);
  const known = new Set<string>(ENTITY_TYPES);
  const types: string[] = [];
  for (const v of p.getAll("type")) {
    for (const t of v.split(",")) {
      const s = t.trim();
      if (known.has(s) && !types.includes(s) && types.length < MAX_TYPES) types.push(s);
    }
  }
  const m = (p.get("mode") ?? "").toLowerCase();
  const mode = (SEARCH_MODES as readonly string[]).includes(m) ? (m as SearchMode) : "hybrid";
  return { q, types, mode };
}

// searchUrl is the page's own URL query for a search ("" when empty), the
// inverse of parseSearch.
export function searchUrl(p: SearchParams): string {
  const u = new URLSearchParams();
  if (p.q) u.set("q", p.q);
  if (p.types.length) u.set("type", p.types.join(","));
  if (p.mode !== "hybrid") u.set("mode", p.mode);
  const s = u.toString();
  return s ? "?" + s : "";
}

// searchApiQuery is GET /v1/memory/search's query for a search.
export function searchApiQuery(p: SearchParams): string {
  const u = new URLSearchParams();
  u.set("q", p.q);
  if (p.mode !== "hybrid") u.set("mode", p.mode);
  if (p.types.length) u.set("type", p.types.join(","));
  u.set("top_k", "30");
  return u.toString();
}

// cutUtf8 cuts s to at most max bytes of UTF-8, never inside a character.
export function cutUtf8(s: string, max: number): string {
  const b = new TextEncoder().encode(s);
  if (b.length <= max) return s;
  let out = "";
  let n = 0;
  for (const ch of s) {
    const len = new TextEncoder().encode(ch).length;
    if (n + len > max) break;
    out += ch;
    n += len;
  }
  return out;
}

// --- search results ---

export interface HitGroup {
  type: string;
  hits: SearchHit[];
}

export interface Fact {
  id: string;
  type: string;
  fact: string;
  sourceId: string;
  targetId: string;
  sourceName: string;
  targetName: string;
  weight: number;
}

// groupHits groups the search's entity hits by entity type (the groups in
// the order of their best hit, the hits best first) and gathers the facts
// (relations) the hits carry, each once, strongest first. Hits without an
// entity id are left out.
export function groupHits(resp: SearchResponse): { groups: HitGroup[]; facts: Fact[]; count: number } {
  const hits = (resp.hits ?? []).filter((h) => h && h.entity && typeof h.entity.id === "string" && h.entity.id !== "");
  const seen = new Set<string>();
  const unique: SearchHit[] = [];
  for (const h of hits) {
    const id = h.entity?.id ?? "";
    if (seen.has(id)) continue;
    seen.add(id);
    unique.push(h);
  }
  unique.sort((a, b) => num(b.score) - num(a.score) || cmp(a.entity?.id ?? "", b.entity?.id ?? ""));
  const byType = new Map<string, SearchHit[]>();
  for (const h of unique) {
    const t = h.entity?.type || "Other";
    const g = byType.get(t);
    if (g) g.push(h);
    else byType.set(t, [h]);
  }
  const groups = [...byType.entries()].map(([type, hs]) => ({ type, hits: hs }));
  const names = new Map<string, string>();
  for (const h of unique) {
    if (h.entity?.name) names.set(h.entity.id, h.entity.name);
    for (const [k, v] of Object.entries(h.related_names ?? {})) if (typeof v === "string" && !names.has(k)) names.set(k, v);
  }
  const facts = new Map<string, Fact>();
  for (const h of unique) {
    for (const r of h.relations ?? []) {
      if (!r || !r.source_id || !r.target_id) continue;
      const id = r.id || relationKey(r.source_id, r.target_id, r.type ?? "");
      const f: Fact = {
        id, type: r.type || "RELATED_TO", fact: r.fact ?? "", sourceId: r.source_id, targetId: r.target_id,
        sourceName: names.get(r.source_id) ?? r.source_id, targetName: names.get(r.target_id) ?? r.target_id, weight: num(r.weight),
      };
      const old = facts.get(id);
      if (!old || f.weight > old.weight) facts.set(id, f);
    }
  }
  const factList = [...facts.values()].sort((a, b) => b.weight - a.weight || cmp(a.id, b.id));
  return { groups, facts: factList, count: unique.length };
}

function num(v: unknown): number {
  const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : NaN;
  return Number.isFinite(n) ? n : 0;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

// count shows a count of the API (a number, or an int64 as a string;
// absent is 0).
export function count(v: unknown): string {
  return String(num(v));
}

// shortEnum shows an enum value without its prefix: EPISODE_STATUS_SYNCED
// is "synced".
export function shortEnum(v: string | undefined, prefix: string): string {
  if (!v) return "";
  return (v.startsWith(prefix) ? v.slice(prefix.length) : v).toLowerCase();
}

// --- graph ---

export interface NodeData {
  id: string;
  label: string;
  type: string;
  color: string;
  hops: number;
  center: boolean;
}

export interface EdgeData {
  id: string;
  source: string;
  target: string;
  label: string;
  fact: string;
  weight: number;
}

export interface GraphElements {
  nodes: { data: NodeData }[];
  edges: { data: EdgeData }[];
}

export const MAX_GRAPH_NODES = 500;

function relationKey(source: string, target: string, type: string): string {
  return "r:" + source + "\u0000" + type + "\u0000" + target;
}

// graphElements turns a graph response into Cytoscape elements: a node per
// entity (each once; at most MAX_GRAPH_NODES), an edge per distinct
// (source, relation, target) between two of them (the strongest kept; loops
// and edges to entities not in the answer left out). Ids are the entity ids
// and a key of the relation's ends and type, so the same answer always
// gives the same elements, in the same order. hops is the distance from the
// centre over the edges, either way (-1: not reached).
export function graphElements(resp: GraphResponse, centerId: string): GraphElements {
  const nodes = new Map<string, NodeData>();
  for (const e of resp.entities ?? []) {
    if (!e || typeof e.id !== "string" || e.id === "" || nodes.has(e.id)) continue;
    if (nodes.size >= MAX_GRAPH_NODES) break;
    const type = typeof e.type === "string" && e.type ? e.type : "Other";
    nodes.set(e.id, { id: e.id, label: typeof e.name === "string" && e.name ? e.name : e.id, type, color: typeColor(type), hops: -1, center: e.id === centerId });
  }
  const edges = new Map<string, EdgeData>();
  for (const r of resp.relations ?? []) {
    if (!r) continue;
    const s = r.source_id ?? "";
    const t = r.target_id ?? "";
    if (!nodes.has(s) || !nodes.has(t) || s === t) continue;
    const type = typeof r.type === "string" && r.type ? r.type : "RELATED_TO";
    const id = relationKey(s, t, type);
    const d: EdgeData = { id, source: s, target: t, label: type, fact: typeof r.fact === "string" ? r.fact : "", weight: num(r.weight) };
    const old = edges.get(id);
    if (!old || d.weight > old.weight) edges.set(id, d);
  }
  // Hops from the centre, over the edges in either direction.
  const adj = new Map<string, string[]>();
  for (const e of edges.values()) {
    adj.set(e.source, [...(adj.get(e.source) ?? []), e.target]);
    adj.set(e.target, [...(adj.get(e.target) ?? []), e.source]);
  }
  const start = nodes.get(centerId);
  if (start) {
    start.hops = 0;
    const queue = [centerId];
    for (let i = 0; i < queue.length; i++) {
      const id = queue[i] ?? "";
      const h = nodes.get(id)?.hops ?? 0;
      for (const n of adj.get(id) ?? []) {
        const nd = nodes.get(n);
        if (nd && nd.hops < 0) {
          nd.hops = h + 1;
          queue.push(n);
        }
      }
    }
  }
  return {
    nodes: [...nodes.values()].sort((a, b) => cmp(a.id, b.id)).map((data) => ({ data })),
    edges: [...edges.values()].sort((a, b) => cmp(a.id, b.id)).map((data) => ({ data })),
  };
}

export interface Neighbour {
  id: string;
  name: string;
  type: string;
  hops: number;
  relations: string[]; // "REL →" (from the centre) or "← REL" (to it), for direct neighbours
}

// neighbours lists the graph's entities other than the centre, nearest
// first, then by name: the keyboard's way through the graph.
export function neighbours(g: GraphElements, centerId: string): Neighbour[] {
  const out: Neighbour[] = [];
  for (const { data: n } of g.nodes) {
    if (n.id === centerId) continue;
    const rels: string[] = [];
    for (const { data: e } of g.edges) {
      if (e.source === centerId && e.target === n.id) rels.push(e.label + " →");
      else if (e.target === centerId && e.source === n.id) rels.push("← " + e.label);
    }
    out.push({ id: n.id, name: n.label, type: n.type, hops: n.hops, relations: rels.sort() });
  }
  const far = (h: number) => (h < 0 ? Number.MAX_SAFE_INTEGER : h);
  return out.sort((a, b) => far(a.hops) - far(b.hops) || cmp(a.name.toLowerCase(), b.name.toLowerCase()) || cmp(a.id, b.id));
}

// The colours of the entity types, readable under dark text on white.
const PALETTE: Record<string, string> = {
  Person: "#f4a6a6", Organization: "#9cc3f5", Location: "#a8ddb5", Product: "#f7c98b", ProductCategory: "#f2dd8c",
  Metric: "#c9b3f0", Dataset: "#b5d3d6", Table: "#9fd8d0", Column: "#cfe3e1", TimePeriod: "#e4c1d9",
  Event: "#f0b89e", Concept: "#d5d9a3", Other: "#d0d4dc",
};
const EXTRA = ["#c6d7a0", "#e7b7c8", "#b7c7e7", "#e8d3a9", "#a9e0e8", "#d9b8e8"];

// typeColor is an entity type's colour: the known types their own, any
// other one of a few more by a hash of its name (always the same).
export function typeColor(type: string): string {
  const known = PALETTE[type];
  if (known) return known;
  let h = 0;
  for (let i = 0; i < type.length; i++) h = (Math.imul(h, 31) + type.charCodeAt(i)) >>> 0;
  return EXTRA[h % EXTRA.length] ?? "#d0d4dc";
}

// ringPositions places the centre in the middle and each hop a ring
// further out (entities not reached on the outermost ring), spread evenly
// around their ring and never on one line through the centre: the start of
// the force-directed layout that then settles the drawing. Deterministic.
export function ringPositions(g: GraphElements, spacing = 120): Record<string, { x: number; y: number }> {
  const rings = new Map<number, string[]>();
  const outer = Math.max(0, ...g.nodes.map((n) => n.data.hops)) + 1;
  for (const { data: n } of g.nodes) {
    const ring = n.hops < 0 ? outer : n.hops;
    rings.set(ring, [...(rings.get(ring) ?? []), n.id]);
  }
  const out: Record<string, { x: number; y: number }> = {};
  for (const [ring, ids] of rings) {
    const r = ring * spacing;
    // Two or fewer on a ring are a third of a turn apart, not opposite.
    const step = (2 * Math.PI) / Math.max(3, ids.length);
    const start = -Math.PI / 2 + ring * 0.6;
    ids.forEach((id, i) => {
      const a = start + i * step;
      out[id] = ring === 0 && ids.length === 1 ? { x: 0, y: 0 } : { x: Math.round(r * Math.cos(a) * 100) / 100, y: Math.round(r * Math.sin(a) * 100) / 100 };
    });
  }
  return out;
}
