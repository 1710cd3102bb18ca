import assert from "node:assert/strict";
import { test } from "node:test";
import {
  clampDepth, count, cutUtf8, entityPath, graphElements, groupHits, MAX_DEPTH, MAX_GRAPH_NODES, MAX_QUERY_BYTES, MIN_DEPTH, neighbours,
  parseRoute, parseSearch, ringPositions, searchApiQuery, searchUrl, shortEnum, typeColor, type GraphResponse, type SearchResponse,
} from "./memory.ts";
import { pick, rng } from "./testrand.ts";

// The shape GET /v1/memory/entities/{id}/graph?depth=2 answered for the
// browser test's episodes (ids shortened).
const GRAPH: GraphResponse = {
  entities: [
    { id: "en_acme", name: "Acme Labs", type: "Organization" },
    { id: "en_smb", name: "SMB", type: "Concept" },
    { id: "en_north", name: "North", type: "Location" },
    { id: "en_blue", name: "Blue Retail", type: "Organization" },
  ],
  relations: [
    { id: "re_1", source_id: "en_blue", target_id: "en_smb", type: "IN_SEGMENT", fact: "Blue Retail is a SMB customer.", weight: 0.9 },
    { id: "re_2", source_id: "en_smb", target_id: "en_north", type: "HAS_CUSTOMERS_IN", weight: 0.9 },
    { id: "re_3", source_id: "en_acme", target_id: "en_smb", type: "IN_SEGMENT", weight: 0.9 },
    { id: "re_4", source_id: "en_acme", target_id: "en_north", type: "LOCATED_IN", weight: 0.9 },
  ],
};

test("graph elements: a node per entity, an edge per relation, hops from the centre", () => {
  const g = graphElements(GRAPH, "en_acme");
  assert.deepEqual(g.nodes.map((n) => n.data.id), ["en_acme", "en_blue", "en_north", "en_smb"]);
  assert.equal(g.edges.length, 4);
  const hops = Object.fromEntries(g.nodes.map((n) => [n.data.id, n.data.hops]));
  assert.deepEqual(hops, { en_acme: 0, en_smb: 1, en_north: 1, en_blue: 2 });
  assert.equal(g.nodes.find((n) => n.data.center)?.data.id, "en_acme");
  assert.ok(g.edges.every((e) => e.data.label !== ""));
  assert.equal(g.nodes[0]?.data.color, typeColor("Organization"));
});

test("graph elements: duplicates, loops and dangling relations are dropped; ids are stable", () => {
  const resp: GraphResponse = {
    entities: [...(GRAPH.entities ?? []), { id: "en_acme", name: "Acme again", type: "Person" }, { id: "", name: "no id" }],
    relations: [
      ...(GRAPH.relations ?? []),
      { id: "re_5", source_id: "en_acme", target_id: "en_smb", type: "IN_SEGMENT", weight: 0.95 }, // same ends and type
      { id: "re_6", source_id: "en_acme", target_id: "en_acme", type: "SELF" },
      { id: "re_7", source_id: "en_acme", target_id: "en_gone", type: "KNOWS" },
      { id: "re_8", source_id: "en_smb", target_id: "en_acme", type: "IN_SEGMENT" }, // the other way: its own edge
    ],
  };
  const g = graphElements(resp, "en_acme");
  assert.equal(g.nodes.length, 4);
  assert.equal(g.nodes.find((n) => n.data.id === "en_acme")?.data.label, "Acme Labs", "the first entity of an id wins");
  assert.equal(g.edges.length, 5);
  const seg = g.edges.filter((e) => e.data.source === "en_acme" && e.data.target === "en_smb");
  assert.equal(seg.length, 1);
  assert.equal(seg[0]?.data.weight, 0.95, "the strongest of a repeated relation is kept");
  // The same answer in another order gives the same elements.
  const shuffled: GraphResponse = { entities: [...(resp.entities ?? [])].reverse(), relations: [...(resp.relations ?? [])].reverse() };
  const g2 = graphElements(shuffled, "en_acme");
  assert.deepEqual(g2.edges, g.edges);
  assert.deepEqual(g2.nodes.map((n) => n.data.id), g.nodes.map((n) => n.data.id));
  assert.equal(new Set(g.edges.map((e) => e.data.id)).size, g.edges.length);
});

test("graph elements: an empty or unknown centre", () => {
  assert.deepEqual(graphElements({}, "x"), { nodes: [], edges: [] });
  const g = graphElements(GRAPH, "en_nobody");
  assert.ok(g.nodes.every((n) => n.data.hops === -1 && !n.data.center));
});

test("ring positions: the centre in the middle, the rings outwards, no two nodes on one spot", () => {
  const g = graphElements(GRAPH, "en_acme");
  const p = ringPositions(g, 100);
  assert.deepEqual(p["en_acme"], { x: 0, y: 0 });
  const dist = (id: string) => Math.hypot(p[id]?.x ?? NaN, p[id]?.y ?? NaN);
  assert.ok(Math.abs(dist("en_smb") - 100) < 0.1 && Math.abs(dist("en_north") - 100) < 0.1 && Math.abs(dist("en_blue") - 200) < 0.1);
  // The two of the first ring are not opposite each other (one line through the centre).
  const a = p["en_smb"] ?? { x: 0, y: 0 };
  const b = p["en_north"] ?? { x: 0, y: 0 };
  assert.ok(Math.abs(a.x * b.y - a.y * b.x) > 1, "the first ring's two nodes are on one line with the centre");
  assert.deepEqual(ringPositions(g, 100), p, "not deterministic");
});

test("neighbours: nearest first, with the relations to the centre", () => {
  const n = neighbours(graphElements(GRAPH, "en_acme"), "en_acme");
  assert.deepEqual(n.map((x) => x.name), ["North", "SMB", "Blue Retail"]);
  assert.deepEqual(n[1]?.relations, ["IN_SEGMENT →"]);
  assert.deepEqual(n[2]?.relations, []);
  const fromSmb = neighbours(graphElements(GRAPH, "en_smb"), "en_smb");
  assert.deepEqual(fromSmb.find((x) => x.id === "en_blue")?.relations, ["← IN_SEGMENT"]);
});

test("depth is bounded to what the API accepts", () => {
  assert.equal(clampDepth(2), 2);
  assert.equal(clampDepth(0), MIN_DEPTH);
  assert.equal(clampDepth(99), MAX_DEPTH);
  assert.equal(clampDepth(-4), MIN_DEPTH);
  assert.equal(clampDepth("3"), 3);
  assert.equal(clampDepth("2.7"), 2);
  assert.equal(clampDepth("deep"), MIN_DEPTH);
  assert.equal(clampDepth(""), MIN_DEPTH);
  assert.equal(clampDepth(NaN), MIN_DEPTH);
  assert.equal(clampDepth(Infinity), MIN_DEPTH);
  assert.equal(clampDepth(null), MIN_DEPTH);
  assert.equal(entityPath("en_a"), "/memory/entities/en_a");
  assert.equal(entityPath("en a/b", 7), "/memory/entities/en%20a%2Fb?depth=3");
});

test("routes", () => {
  assert.deepEqual(parseRoute("/memory"), { view: "search" });
  assert.deepEqual(parseRoute("/memory/entities/en_1"), { view: "entity", id: "en_1" });
  assert.deepEqual(parseRoute("/memory/entities/en%20a%2Fb"), { view: "entity", id: "en a/b" });
  assert.deepEqual(parseRoute("/memory/episodes"), { view: "episodes" });
  assert.deepEqual(parseRoute("/memory/episodes/ep_1"), { view: "episode", id: "ep_1" });
  assert.deepEqual(parseRoute("/memory/settings"), { view: "settings" });
  assert.deepEqual(parseRoute("/memory/entities"), { view: "search" });
  assert.deepEqual(parseRoute("/memory/entities/%E0%A4%A"), { view: "entity", id: "%E0%A4%A" });
  assert.deepEqual(parseRoute("/memory/whatever/x/y"), { view: "search" });
});

test("search parameters: parsed from the URL and written back", () => {
  const p = parseSearch("?q=+Acme+Labs+&type=Organization,Bogus&type=Location,Organization&mode=GRAPH");
  assert.deepEqual(p, { q: "Acme Labs", types: ["Organization", "Location"], mode: "graph" });
  assert.deepEqual(parseSearch(searchUrl(p)), p);
  assert.equal(searchUrl({ q: "", types: [], mode: "hybrid" }), "");
  assert.deepEqual(parseSearch("?mode=psychic"), { q: "", types: [], mode: "hybrid" });
  const api = new URLSearchParams(searchApiQuery(p));
  assert.equal(api.get("q"), "Acme Labs");
  assert.equal(api.get("type"), "Organization,Location");
  assert.equal(api.get("mode"), "graph");
  assert.equal(new TextEncoder().encode(parseSearch("?q=" + "é".repeat(5000)).q).length <= MAX_QUERY_BYTES, true);
  assert.equal(cutUtf8("aé", 2), "a");
});

test("search hits grouped by type, best first, facts once", () => {
  const resp: SearchResponse = {
    hits: [
      { entity: { id: "en_smb", name: "SMB", type: "Concept" }, score: 0.004, relations: [{ id: "re_3", source_id: "en_acme", target_id: "en_smb", type: "IN_SEGMENT", fact: "Acme Labs is a SMB customer.", weight: 0.9 }], related_names: { en_acme: "Acme Labs" } },
      { entity: { id: "en_acme", name: "Acme Labs", type: "Organization" }, score: 0.016, relations: [{ id: "re_3", source_id: "en_acme", target_id: "en_smb", type: "IN_SEGMENT", fact: "Acme Labs is a SMB customer.", weight: 0.9 }, { id: "re_4", source_id: "en_acme", target_id: "en_north", type: "LOCATED_IN", weight: 0.5 }], related_names: { en_north: "North", en_smb: "SMB" } },
      { entity: { id: "en_blue", name: "Blue Retail", type: "Organization" }, score: 0.01 },
      { entity: { id: "en_acme", name: "Acme Labs", type: "Organization" }, score: 0.001 },
      { score: 1 },
    ],
  };
  const g = groupHits(resp);
  assert.equal(g.count, 3);
  assert.deepEqual(g.groups.map((x) => x.type), ["Organization", "Concept"]);
  assert.deepEqual(g.groups[0]?.hits.map((h) => h.entity?.name), ["Acme Labs", "Blue Retail"]);
  assert.deepEqual(g.facts.map((f) => f.id), ["re_3", "re_4"]);
  assert.equal(g.facts[1]?.targetName, "North");
  assert.equal(g.facts[0]?.sourceName, "Acme Labs");
  assert.deepEqual(groupHits({}), { groups: [], facts: [], count: 0 });
});

test("counts and enums as the API writes them", () => {
  assert.equal(count("12"), "12");
  assert.equal(count(undefined), "0");
  assert.equal(count(3), "3");
  assert.equal(shortEnum("EPISODE_STATUS_SYNCED", "EPISODE_STATUS_"), "synced");
  assert.equal(shortEnum(undefined, "X_"), "");
});

// --- fuzz-style: seeded random API answers and URLs ---

const JUNK: unknown[] = [undefined, null, "", "en_1", "en_2", "en_3", 0, -1, 1e308, NaN, "0.5", {}, [], true, "x\u0000y", "<script>", "é"];

function randomGraph(r: () => number): GraphResponse {
  const ids = ["en_1", "en_2", "en_3", "en_4", "en_5", ""];
  const entities = Array.from({ length: Math.floor(r() * 12) }, () => (r() < 0.1 ? pick(r, JUNK) : { id: pick(r, ids), name: pick(r, JUNK), type: pick(r, [...JUNK, "Person", "Organization"]) }));
  const relations = Array.from({ length: Math.floor(r() * 20) }, () =>
    r() < 0.1 ? pick(r, JUNK) : { id: pick(r, JUNK), source_id: pick(r, ids), target_id: pick(r, ids), type: pick(r, [...JUNK, "A", "B"]), weight: pick(r, JUNK) });
  return { entities, relations } as GraphResponse;
}

test("fuzz: random graph answers make valid, stable, deduplicated elements", () => {
  const r = rng(29);
  for (let i = 0; i < 3000; i++) {
    const resp = randomGraph(r);
    const center = pick(r, ["en_1", "en_2", "nobody"]);
    const g = graphElements(resp, center);
    const nodeIds = g.nodes.map((n) => n.data.id);
    assert.equal(new Set(nodeIds).size, nodeIds.length, "a node twice");
    assert.ok(nodeIds.length <= MAX_GRAPH_NODES);
    assert.ok(nodeIds.every((id) => typeof id === "string" && id !== ""));
    const edgeIds = g.edges.map((e) => e.data.id);
    assert.equal(new Set(edgeIds).size, edgeIds.length, "an edge twice");
    const ids = new Set(nodeIds);
    for (const { data: e } of g.edges) {
      assert.ok(ids.has(e.source) && ids.has(e.target) && e.source !== e.target, "an edge to a missing node or a loop");
      assert.ok(typeof e.label === "string" && e.label !== "" && Number.isFinite(e.weight));
      assert.ok(!edgeIds.some((other) => other !== e.id && g.edges.find((x) => x.data.id === other && x.data.source === e.source && x.data.target === e.target && x.data.label === e.label)));
    }
    for (const { data: n } of g.nodes) {
      assert.ok(typeof n.label === "string" && n.label !== "" && typeof n.type === "string" && n.type !== "");
      assert.ok(Number.isInteger(n.hops) && n.hops >= -1 && n.hops < nodeIds.length);
      assert.equal(n.center, n.id === center);
    }
    assert.deepEqual(graphElements(resp, center), g, "not deterministic");
    const pos = ringPositions(g);
    assert.deepEqual(Object.keys(pos).sort(), [...nodeIds].sort(), "a node without a position");
    const spots = Object.values(pos).map((q) => { assert.ok(Number.isFinite(q.x) && Number.isFinite(q.y)); return q.x + "," + q.y; });
    assert.equal(new Set(spots).size, spots.length, "two nodes on one spot");
    const nb = neighbours(g, center);
    assert.equal(nb.length, g.nodes.filter((n) => n.data.id !== center).length);
    for (let k = 1; k < nb.length; k++) {
      const a = nb[k - 1]?.hops ?? 0;
      const b = nb[k]?.hops ?? 0;
      assert.ok((a < 0 ? Infinity : a) <= (b < 0 ? Infinity : b), "neighbours not nearest first");
    }
    const h = groupHits({ hits: (resp.entities ?? []).map((e) => ({ entity: e, score: r(), relations: resp.relations })) } as SearchResponse);
    assert.equal(h.groups.reduce((s, x) => s + x.hits.length, 0), h.count);
    assert.equal(new Set(h.facts.map((f) => f.id)).size, h.facts.length);
  }
});

test("fuzz: random URLs give bounded search parameters that survive a round trip", () => {
  const r = rng(7);
  const PIECES = ["q=", "type=", "mode=", "&", "=", "%", "%2", "%E0%A4", "+", ",", "Organization", "Location", "graph", "HYBRID", "é", "\u0000", "?", "#", " ", "a", "Acme"];
  for (let i = 0; i < 3000; i++) {
    let s = "";
    for (let k = Math.floor(r() * 30); k > 0; k--) s += pick(r, PIECES);
    const p = parseSearch(s);
    assert.ok(new TextEncoder().encode(p.q).length <= MAX_QUERY_BYTES);
    assert.equal(p.q, p.q.trim());
    assert.ok(p.types.length <= 20 && new Set(p.types).size === p.types.length);
    assert.deepEqual(parseSearch(searchUrl(p)), p, s);
    const route = parseRoute("/memory/" + s);
    assert.ok(["search", "entity", "episodes", "episode", "settings"].includes(route.view));
    const d = clampDepth(s);
    assert.ok(d >= MIN_DEPTH && d <= MAX_DEPTH && Number.isInteger(d));
  }
});
