// The Memory page: the tenant's knowledge graph through the memory API
// (docs/concepts/memory.md, "HTTP"). Its counts at the top; a search
// (/memory?q=&type=&mode=) with the hits grouped by entity type and the
// facts they carry; an entity (/memory/entities/<id>?depth=) with its
// attributes, aliases, relations and episodes and its neighbourhood as a
// Cytoscape graph beside a list of the neighbours (the keyboard's way
// through it); the episodes (/memory/episodes, paged; one at
// /memory/episodes/<id>, which can be deleted) and a form to record one;
// the memory switches (/memory/settings).
import { lazy, Suspense, useEffect, useMemo, useState, useSyncExternalStore, type FormEvent, type ReactNode } from "react";
import { ConfirmDialog } from "../components/ConfirmDialog.tsx";
import { Empty, ErrorBox, Loading } from "../components/States.tsx";
import {
  clampDepth, count, ENTITY_TYPES, entityPath, episodePath, graphElements, groupHits, MAX_DEPTH, memory, MIN_DEPTH, neighbours,
  parseRoute, parseSearch, SEARCH_MODES, searchUrl, shortEnum, typeColor, type MemEntity, type MemEpisode, type MemRelation,
  type MemSettings, type SearchParams, type SettingsPatch,
} from "../lib/memory.ts";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps, navigate } from "../router.ts";
import "./Memory.css";

const MemoryGraph = lazy(() => import("../components/MemoryGraph.tsx"));

function subscribe(cb: () => void): () => void {
  window.addEventListener("popstate", cb);
  return () => window.removeEventListener("popstate", cb);
}

// useLocationSearch is the URL's query, kept current across navigation.
function useLocationSearch(): string {
  return useSyncExternalStore(subscribe, () => location.search);
}

function errMsg(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function when(ts: string | undefined): string {
  if (!ts) return "";
  const d = new Date(ts);
  return Number.isNaN(d.getTime()) ? ts : d.toLocaleString();
}

export default function MemoryPage({ path }: { path: string }) {
  const route = parseRoute(path);
  const search = useLocationSearch();
  const [version, setVersion] = useState(0); // bumped by every change, so the counts follow
  const changed = () => setVersion((v) => v + 1);
  useTypeColours();
  const tab = route.view === "episode" ? "episodes" : route.view === "entity" ? "search" : route.view;
  const tabs: { view: string; path: string; title: string }[] = [
    { view: "search", path: "/memory", title: "Search" },
    { view: "episodes", path: "/memory/episodes", title: "Episodes" },
    { view: "settings", path: "/memory/settings", title: "Settings" },
  ];
  return (
    <div className="mem" data-testid="memory-page" data-view={route.view}>
      <div className="mem-head">
        <h1>Memory</h1>
        <nav aria-label="Memory" className="mem-tabs">
          {tabs.map((t) => (
            <a key={t.view} {...linkProps(t.path)} aria-current={tab === t.view ? "page" : undefined}>{t.title}</a>
          ))}
        </nav>
      </div>
      <Stats view={route.view + ":" + (route.view === "entity" || route.view === "episode" ? route.id : "") + ":" + version} />
      {route.view === "search" && <SearchView search={search} />}
      {route.view === "entity" && <EntityView id={route.id} depth={clampDepth(new URLSearchParams(search).get("depth"))} onChanged={changed} />}
      {route.view === "episodes" && <EpisodesView onChanged={changed} />}
      {route.view === "episode" && <EpisodeView id={route.id} onChanged={changed} />}
      {route.view === "settings" && <SettingsView />}
    </div>
  );
}

// --- stats ---

function Stats({ view }: { view: string }) {
  const st = useAsync((signal) => memory.stats(signal), [view]);
  if (st.status === "error" && !st.data) return <ErrorBox what="The memory's counts" error={st.error} retry={st.reload} />;
  const s = st.data;
  if (!s) return <Loading what="the memory's counts" />;
  const items: [string, string][] = [
    ["Episodes", count(s.episodes)], ["Pending", count(s.episodes_pending)], ["Failed", count(s.episodes_failed)],
    ["Entities", count(s.entities)], ["Relations", count(s.relations)], ["Communities", count(s.communities)],
  ];
  return (
    <section className="mem-stats" aria-label="Memory counts" data-testid="memory-stats">
      <dl>
        {items.map(([k, v]) => (
          <div key={k} data-stat={k.toLowerCase()}>
            <dt>{k}</dt>
            <dd>{v}</dd>
          </div>
        ))}
      </dl>
      <p className="muted small">
        {s.backend && <>store {s.backend}</>}
        {s.embedding_model && <> · embeddings {s.embedding_model}</>}
        {s.communities_updated_at && <> · communities updated {when(s.communities_updated_at)}</>}
      </p>
    </section>
  );
}

// --- search ---

function SearchView({ search }: { search: string }) {
  const params = useMemo(() => parseSearch(search), [search]);
  const [q, setQ] = useState(params.q);
  const [types, setTypes] = useState<string[]>(params.types);
  const [mode, setMode] = useState(params.mode);
  // Back and forward (and links) change the URL: the form follows it.
  useEffect(() => {
    setQ(params.q);
    setTypes(params.types);
    setMode(params.mode);
  }, [params]);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const next: SearchParams = parseSearch(searchUrl({ q: q.trim(), types, mode }));
    navigate("/memory" + searchUrl(next));
  };
  return (
    <section aria-label="Search" className="mem-search">
      <form className="card mem-search-form" role="search" onSubmit={submit}>
        <div className="mem-row">
          <label htmlFor="mem-q" className="sr-only">Search the memory</label>
          <input id="mem-q" type="search" placeholder="Search entities, e.g. a customer, a product, a region" value={q} onChange={(e) => setQ(e.target.value)} />
          <label htmlFor="mem-mode" className="sr-only">Search mode</label>
          <select id="mem-mode" value={mode} onChange={(e) => setMode(parseSearch("?mode=" + e.target.value).mode)}>
            {SEARCH_MODES.map((m) => <option key={m} value={m}>{m}</option>)}
          </select>
          <button type="submit" disabled={!q.trim()}>Search</button>
        </div>
        <fieldset className="mem-types">
          <legend>Entity types (none: all)</legend>
          {ENTITY_TYPES.map((t) => (
            <label key={t} className="mem-type">
              <input
                type="checkbox"
                checked={types.includes(t)}
                onChange={(e) => setTypes((old) => (e.target.checked ? [...old, t] : old.filter((x) => x !== t)))}
              />
              <span className="mem-swatch" data-type={t} />
              {t}
            </label>
          ))}
        </fieldset>
      </form>
      {params.q ? <SearchResults params={params} /> : <BrowseEntities />}
    </section>
  );
}

function SearchResults({ params }: { params: SearchParams }) {
  const res = useAsync((signal) => memory.search(params, signal), [params]);
  const grouped = useMemo(() => (res.data ? groupHits(res.data) : undefined), [res.data]);
  if (res.status === "loading") return <Loading what="the results" />;
  if (res.status === "error") return <ErrorBox what="The search" error={res.error} retry={res.reload} />;
  if (!grouped || grouped.count === 0) return <Empty>Nothing in memory matches “{params.q}”.</Empty>;
  return (
    <div className="mem-results" data-testid="memory-results" data-count={grouped.count}>
      <p className="muted small">{grouped.count} {grouped.count === 1 ? "entity" : "entities"}</p>
      {grouped.groups.map((g) => (
        <section key={g.type} className="mem-group" aria-label={`${g.type} (${g.hits.length})`} data-group={g.type}>
          <h2>{g.type} <span className="muted small">{g.hits.length}</span></h2>
          <ul className="mem-hits">
            {g.hits.map((h) => {
              const e = h.entity as MemEntity;
              return (
                <li key={e.id} className="card mem-hit" data-entity-id={e.id}>
                  <a {...linkProps(entityPath(e.id))} className="mem-hit-name">{e.name || e.id}</a>
                  <TypeTag type={e.type} />
                  {e.summary && <p className="mem-summary">{e.summary}</p>}
                  <p className="muted small">
                    score {(h.score ?? 0).toFixed(4)}
                    {(h.channels ?? []).map((c) => ` · ${c.channel ?? "?"} #${c.rank ?? "?"}`).join("")}
                    {h.community?.name ? ` · community ${h.community.name}` : ""}
                  </p>
                </li>
              );
            })}
          </ul>
        </section>
      ))}
      {grouped.facts.length > 0 && (
        <section className="mem-group" aria-label={`Facts (${grouped.facts.length})`} data-group="facts">
          <h2>Facts <span className="muted small">{grouped.facts.length}</span></h2>
          <ul className="mem-facts">
            {grouped.facts.map((f) => (
              <li key={f.id}>
                <a {...linkProps(entityPath(f.sourceId))}>{f.sourceName}</a> <span className="mem-rel">{f.type}</span>{" "}
                <a {...linkProps(entityPath(f.targetId))}>{f.targetName}</a>
                {f.fact && <span className="muted"> — {f.fact}</span>}
              </li>
            ))}
          </ul>
        </section>
      )}
    </div>
  );
}

// BrowseEntities lists the entities by name while nothing is searched.
function BrowseEntities() {
  const [prefix, setPrefix] = useState("");
  const [tokens, setTokens] = useState<string[]>([""]);
  const token = tokens[tokens.length - 1] ?? "";
  const list = useAsync((signal) => memory.entities(prefix.trim(), token, signal), [prefix, token]);
  const ents = list.data?.entities ?? [];
  const next = list.data?.next_page_token ?? "";
  return (
    <section className="card" aria-labelledby="mem-browse-title" data-testid="memory-browse">
      <div className="mem-row">
        <h2 id="mem-browse-title">Entities by name</h2>
        <span className="spacer" />
        <label htmlFor="mem-prefix" className="small">Name starts with</label>
        <input id="mem-prefix" className="mem-prefix" value={prefix} autoComplete="off" onChange={(e) => { setPrefix(e.target.value); setTokens([""]); }} />
      </div>
      {list.status === "error" && <ErrorBox what="The entities" error={list.error} retry={list.reload} />}
      {list.status === "loading" && !list.data && <Loading what="the entities" />}
      {list.data && ents.length === 0 && (
        <Empty>{prefix.trim() ? `No entity's name starts with “${prefix.trim()}”.` : "Nothing remembered yet: finished runs, the model's memory_add and the Episodes tab add to the memory."}</Empty>
      )}
      {ents.length > 0 && (
        <ul className="mem-chips" aria-busy={list.status === "loading"}>
          {ents.map((e) => (
            <li key={e.id} data-entity-id={e.id}><a {...linkProps(entityPath(e.id))}><span className="mem-swatch" data-type={e.type || "Other"} />{e.name || e.id}</a> <span className="muted small">{e.type}</span></li>
          ))}
        </ul>
      )}
      {(tokens.length > 1 || next) && (
        <div className="mem-pager">
          <button type="button" className="secondary" disabled={tokens.length <= 1} onClick={() => setTokens((t) => t.slice(0, -1))}>Previous page</button>
          <button type="button" className="secondary" disabled={!next || list.status === "loading"} onClick={() => setTokens((t) => [...t, next])}>Next page</button>
        </div>
      )}
    </section>
  );
}

function TypeTag({ type }: { type: string | undefined }) {
  const t = type || "Other";
  return <span className="tag mem-typetag" data-type={t}><span className="mem-swatch" data-type={t} />{t}</span>;
}

// The type swatches take their colour through the CSSOM (the CSP refuses
// style attributes), as they appear.
function useTypeColours() {
  useEffect(() => {
    const paint = () => {
      for (const el of document.querySelectorAll<HTMLElement>(".mem-swatch[data-type]")) {
        const c = typeColor(el.dataset.type ?? "");
        if (el.dataset.painted !== c) {
          el.style.backgroundColor = c;
          el.dataset.painted = c;
        }
      }
    };
    paint();
    const mo = new MutationObserver(paint);
    const root = document.querySelector("[data-testid=memory-page]");
    if (root) mo.observe(root, { childList: true, subtree: true });
    return () => mo.disconnect();
  }, []);
}

// useDeletion is the delete-after-confirmation of one entity or episode:
// the dialog's state, the call in flight, its error, and the message once
// deleted; it starts over when the id changes.
function useDeletion(id: string, onChanged: () => void) {
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [delError, setDelError] = useState("");
  const [deleted, setDeleted] = useState("");
  useEffect(() => {
    setConfirm(false);
    setDeleted("");
    setDelError("");
  }, [id]);
  // remove runs del, which answers what to say once deleted.
  const remove = (del: () => Promise<string>) => {
    setBusy(true);
    setDelError("");
    del().then(
      (msg) => {
        setBusy(false);
        setConfirm(false);
        setDeleted(msg);
        onChanged();
      },
      (err: unknown) => {
        setBusy(false);
        setDelError(errMsg(err));
      },
    );
  };
  return { confirm, setConfirm, busy, delError, deleted, remove };
}

// --- entity ---

function EntityView({ id, depth, onChanged }: { id: string; depth: number; onChanged: () => void }) {
  const loaded = useAsync((signal) => memory.entity(id, signal).then((resp) => ({ id, resp })), [id]);
  const ent = { ...loaded, data: loaded.data?.id === id ? loaded.data.resp : undefined };
  const { confirm, setConfirm, busy, delError, deleted, remove } = useDeletion(id, onChanged);
  if (deleted) {
    return (
      <section className="card" role="status" data-testid="memory-deleted">
        <p>{deleted}</p>
        <a {...linkProps("/memory")}>Back to the search</a>
      </section>
    );
  }
  if (ent.status === "error" && !ent.data) return <ErrorBox what="The entity" error={ent.error} retry={ent.reload} />;
  const d = ent.data;
  if (!d || !d.entity) return <Loading what="the entity" />;
  const e = d.entity;
  const names = d.related_names ?? {};
  const attrs = Object.entries(e.attributes ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const doDelete = () => remove(() => memory.deleteEntity(id).then((r) => `${e.name || id} was deleted, with ${count(r.relations_removed)} relations.`));
  return (
    <article className="mem-entity" data-testid="memory-entity" data-entity-id={e.id} aria-labelledby="mem-entity-name">
      <header className="mem-entity-head">
        <h2 id="mem-entity-name">{e.name || e.id}</h2>
        <TypeTag type={e.type} />
        <span className="muted small">{e.id} · {count(e.mention_count)} mentions{e.updated_at ? ` · updated ${when(e.updated_at)}` : ""}</span>
        <span className="spacer" />
        <button type="button" className="danger" onClick={() => setConfirm(true)}>Delete entity…</button>
      </header>
      {e.summary && <p className="mem-summary">{e.summary}</p>}
      <div className="mem-entity-grid">
        <section className="card" aria-label="Graph">
          <GraphSection id={e.id} name={e.name || e.id} depth={depth} />
        </section>
        <div className="mem-entity-side">
          <section className="card" aria-labelledby="mem-attrs">
            <h3 id="mem-attrs">Attributes</h3>
            {attrs.length === 0 ? <p className="muted">None.</p> : (
              <dl className="mem-attrs">
                {attrs.map(([k, v]) => (
                  <div key={k}><dt>{k}</dt><dd>{v}</dd></div>
                ))}
              </dl>
            )}
            <h3>Aliases</h3>
            {(e.aliases ?? []).length === 0 ? <p className="muted">None.</p> : <p>{(e.aliases ?? []).join(", ")}</p>}
            {d.community && (
              <>
                <h3>Community</h3>
                <p><strong>{d.community.name || d.community.id}</strong> <span className="muted small">{count(d.community.member_count)} members</span></p>
                {d.community.summary && <p className="muted">{d.community.summary}</p>}
              </>
            )}
          </section>
          <section className="card" aria-labelledby="mem-rels">
            <h3 id="mem-rels">Facts ({(d.relations ?? []).length})</h3>
            {(d.relations ?? []).length === 0 ? <p className="muted">No relations.</p> : (
              <ul className="mem-facts" data-testid="memory-relations">
                {(d.relations ?? []).map((r) => <RelationItem key={r.id || `${r.source_id}-${r.type}-${r.target_id}`} r={r} self={e} names={names} depth={depth} />)}
              </ul>
            )}
          </section>
          <section className="card" aria-labelledby="mem-eps">
            <h3 id="mem-eps">Episodes ({(d.episodes ?? []).length}{(d.episodes ?? []).length >= 20 ? ", the newest" : ""})</h3>
            {(d.episodes ?? []).length === 0 ? <p className="muted">None.</p> : (
              <ul className="mem-ep-list">
                {(d.episodes ?? []).map((ep) => <EpisodeItem key={ep.id} ep={ep} />)}
              </ul>
            )}
          </section>
        </div>
      </div>
      <ConfirmDialog
        testId="memory-confirm"
        open={confirm}
        title={`Delete ${e.name || e.id}?`}
        confirmLabel="Delete entity"
        busy={busy}
        error={delError}
        onConfirm={doDelete}
        onCancel={() => setConfirm(false)}
      >
        <p>The entity is removed with its relations, mentions and community membership, whatever episodes support it. The episodes stay.</p>
      </ConfirmDialog>
    </article>
  );
}

function RelationItem({ r, self, names, depth }: { r: MemRelation; self: MemEntity; names: Record<string, string>; depth: number }) {
  const name = (id: string | undefined) => (id === self.id ? self.name || id : (id && names[id]) || id || "?");
  const end = (id: string | undefined) =>
    id === self.id ? <strong>{name(id)}</strong> : <a {...linkProps(entityPath(id ?? "", depth))}>{name(id)}</a>;
  return (
    <li>
      {end(r.source_id)} <span className="mem-rel">{r.type || "RELATED_TO"}</span> {end(r.target_id)}
      {r.fact && <span className="muted"> — {r.fact}</span>}
      <span className="muted small"> (weight {(r.weight ?? 0).toFixed(2)}, {count(r.episode_count)} {count(r.episode_count) === "1" ? "episode" : "episodes"})</span>
    </li>
  );
}

function GraphSection({ id, name, depth }: { id: string; name: string; depth: number }) {
  // An answer is used only for the entity and depth it was asked for: the
  // previous one, kept while the next loads, would be drawn around the
  // wrong centre.
  const key = id + "@" + depth;
  const loaded = useAsync((signal) => memory.graph(id, depth, signal).then((resp) => ({ key, resp })), [key]);
  const graph = { ...loaded, data: loaded.data?.key === key ? loaded.data.resp : undefined };
  const elements = useMemo(() => graphElements(graph.data ?? {}, id), [graph.data, id]);
  const near = useMemo(() => neighbours(elements, id), [elements, id]);
  const depths = Array.from({ length: MAX_DEPTH - MIN_DEPTH + 1 }, (_, i) => MIN_DEPTH + i);
  return (
    <>
      <div className="mem-graph-head">
        <h3>Neighbourhood</h3>
        <label htmlFor="mem-depth">Depth</label>
        <select id="mem-depth" value={depth} onChange={(e) => navigate(entityPath(id, clampDepth(e.target.value)), true)}>
          {depths.map((d) => <option key={d} value={d}>{d} {d === 1 ? "hop" : "hops"}</option>)}
        </select>
        {graph.data?.truncated && <span className="pill st-waiting">cut at {elements.nodes.length} entities</span>}
        <span className="spacer" />
        <Legend types={[...new Set(elements.nodes.map((n) => n.data.type))].sort()} />
      </div>
      {graph.status === "error" && <ErrorBox what="The neighbourhood" error={graph.error} retry={graph.reload} />}
      {graph.status === "loading" && !graph.data && <Loading what="the neighbourhood" />}
      {graph.data && (
        <div className="mem-graph-wrap">
          {elements.nodes.length <= 1 ? (
            <Empty>{name} has no relations yet.</Empty>
          ) : (
            <Suspense fallback={<div className="mem-graph loading" role="status">Loading the graph…</div>}>
              <MemoryGraph
                elements={elements}
                centerId={id}
                label={`The neighbourhood of ${name}: ${elements.nodes.length} entities, ${elements.edges.length} relations. The list beside it has the same entities.`}
                onSelect={(other) => navigate(entityPath(other, depth))}
              />
            </Suspense>
          )}
          <nav className="mem-neighbours" aria-label={`Neighbours of ${name}`}>
            <h4>Neighbours ({near.length})</h4>
            {near.length === 0 ? <p className="muted">None within {depth} {depth === 1 ? "hop" : "hops"}.</p> : (
              <ul data-testid="memory-neighbours">
                {near.map((n) => (
                  <li key={n.id} data-entity-id={n.id}>
                    <a {...linkProps(entityPath(n.id, depth))}>
                      <span className="mem-swatch" data-type={n.type} />
                      <span className="mem-nb-name">{n.name}</span>
                    </a>
                    <span className="muted small"> {n.type}{n.hops > 0 ? ` · ${n.hops} ${n.hops === 1 ? "hop" : "hops"}` : ""}{n.relations.length ? " · " + n.relations.join(", ") : ""}</span>
                  </li>
                ))}
              </ul>
            )}
          </nav>
        </div>
      )}
    </>
  );
}

function Legend({ types }: { types: string[] }) {
  if (types.length === 0) return null;
  return (
    <ul className="mem-legend" aria-label="Entity types">
      {types.map((t) => <li key={t}><span className="mem-swatch" data-type={t} />{t}</li>)}
    </ul>
  );
}

// --- episodes ---

function EpisodeItem({ ep }: { ep: MemEpisode }) {
  const status = shortEnum(ep.status, "EPISODE_STATUS_");
  const text = (ep.content ?? "").replace(/\s+/g, " ");
  return (
    <li className="mem-ep" data-episode-id={ep.id}>
      <a {...linkProps(episodePath(ep.id))}>{text.length > 140 ? text.slice(0, 140) + "…" : text || ep.id}</a>
      <span className="muted small">
        {" "}<span className={"pill st-" + statusClass(status)}>{status || "unknown"}</span> {shortEnum(ep.source, "EPISODE_SOURCE_")} · {when(ep.created_at)}
      </span>
    </li>
  );
}

function statusClass(s: string): string {
  return s === "synced" ? "ok" : s === "failed" ? "failed" : s === "pending" || s === "processing" ? "running" : "";
}

function EpisodesView({ onChanged }: { onChanged: () => void }) {
  const [tokens, setTokens] = useState<string[]>([""]); // the page tokens of the pages seen, this one last
  const [tick, setTick] = useState(0);
  const token = tokens[tokens.length - 1] ?? "";
  const list = useAsync((signal) => memory.episodes(token, signal), [token, tick]);
  const eps = list.data?.episodes ?? [];
  const next = list.data?.next_page_token ?? "";
  return (
    <section aria-label="Episodes" className="mem-episodes">
      <RecordEpisode onRecorded={() => { setTokens([""]); setTick((t) => t + 1); onChanged(); }} />
      <section className="card" aria-labelledby="mem-ep-title">
        <h2 id="mem-ep-title">Episodes <span className="muted small">newest first · page {tokens.length}</span></h2>
        {list.status === "error" && <ErrorBox what="The episodes" error={list.error} retry={list.reload} />}
        {list.status === "loading" && !list.data && <Loading what="the episodes" />}
        {list.data && eps.length === 0 && <Empty>No episodes yet: finished runs, the model's memory_add and the form above add them.</Empty>}
        {eps.length > 0 && (
          <ul className="mem-ep-list" data-testid="memory-episodes" aria-busy={list.status === "loading"}>
            {eps.map((ep) => <EpisodeItem key={ep.id} ep={ep} />)}
          </ul>
        )}
        <div className="mem-pager">
          <button type="button" className="secondary" disabled={tokens.length <= 1} onClick={() => setTokens((t) => t.slice(0, -1))}>Previous page</button>
          <button type="button" className="secondary" disabled={!next || list.status === "loading"} onClick={() => setTokens((t) => [...t, next])}>Next page</button>
        </div>
      </section>
    </section>
  );
}

function RecordEpisode({ onRecorded }: { onRecorded: () => void }) {
  const [text, setText] = useState("");
  const [wait, setWait] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [done, setDone] = useState<ReactNode>(null);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError("");
    setDone(null);
    memory.addEpisode(text, wait).then(
      (r) => {
        setBusy(false);
        setText("");
        const ep = r.episode;
        setDone(
          r.skipped ? <>Not stored: the tenant's settings skip it.</> : ep ? (
            <>Recorded <a {...linkProps(episodePath(ep.id))}>{ep.id}</a>, {shortEnum(ep.status, "EPISODE_STATUS_") || "unknown"}{ep.redactions ? `, ${ep.redactions} redactions` : ""}{ep.error ? ` — ${ep.error}` : ""}.</>
          ) : <>Recorded.</>,
        );
        onRecorded();
      },
      (err: unknown) => {
        setBusy(false);
        setError(errMsg(err));
      },
    );
  };
  return (
    <form className="card mem-record" onSubmit={submit} aria-labelledby="mem-record-title">
      <h2 id="mem-record-title">Remember something</h2>
      <label htmlFor="mem-episode-text">Text to remember (an episode; at most 64 KiB; e-mails, phone numbers, card numbers and keys are scrubbed)</label>
      <textarea id="mem-episode-text" rows={3} value={text} onChange={(e) => setText(e.target.value)} maxLength={65536} />
      <div className="mem-row">
        <label className="mem-check"><input type="checkbox" checked={wait} onChange={(e) => setWait(e.target.checked)} /> Wait until it is processed</label>
        <span className="spacer" />
        <button type="submit" disabled={busy || !text.trim()}>{busy ? "Recording…" : "Record episode"}</button>
      </div>
      {error && <p className="error" role="alert">The episode could not be recorded: {error}</p>}
      {done && <p role="status" data-testid="memory-recorded">{done}</p>}
    </form>
  );
}

function EpisodeView({ id, onChanged }: { id: string; onChanged: () => void }) {
  const loaded = useAsync((signal) => memory.episode(id, signal).then((resp) => ({ id, resp })), [id]);
  const ep = { ...loaded, data: loaded.data?.id === id ? loaded.data.resp : undefined };
  const { confirm, setConfirm, busy, delError, deleted, remove } = useDeletion(id, onChanged);
  if (deleted) {
    return (
      <section className="card" role="status" data-testid="memory-deleted">
        <p>{deleted}</p>
        <a {...linkProps("/memory/episodes")}>Back to the episodes</a>
      </section>
    );
  }
  if (ep.status === "error" && !ep.data) return <ErrorBox what="The episode" error={ep.error} retry={ep.reload} />;
  const e = ep.data?.episode;
  if (!e) return <Loading what="the episode" />;
  const entities = ep.data?.entities ?? [];
  const status = shortEnum(e.status, "EPISODE_STATUS_");
  const doDelete = () =>
    remove(() => memory.deleteEpisode(id).then((r) => `Episode ${id} was deleted; ${count(r.entities_removed)} entities and ${count(r.relations_removed)} relations only it supported went with it.`));
  return (
    <article className="mem-episode card" data-testid="memory-episode" data-episode-id={e.id} aria-labelledby="mem-episode-title">
      <header className="mem-entity-head">
        <h2 id="mem-episode-title">Episode {e.id}</h2>
        <span className={"pill st-" + statusClass(status)}>{status || "unknown"}</span>
        <span className="spacer" />
        <button type="button" className="danger" onClick={() => setConfirm(true)}>Delete episode…</button>
      </header>
      <dl className="mem-attrs">
        <div><dt>source</dt><dd>{shortEnum(e.source, "EPISODE_SOURCE_") || "unknown"}</dd></div>
        <div><dt>recorded</dt><dd>{when(e.created_at)}</dd></div>
        {e.processed_at && <div><dt>processed</dt><dd>{when(e.processed_at)}</dd></div>}
        {e.conversation_id && <div><dt>conversation</dt><dd><a {...linkProps("/chat/" + encodeURIComponent(e.conversation_id))}>{e.conversation_id}</a></dd></div>}
        {e.run_id && <div><dt>run</dt><dd>{e.run_id}</dd></div>}
        {!!e.redactions && <div><dt>redactions</dt><dd>{e.redactions}</dd></div>}
        {e.error && <div><dt>error</dt><dd className="error">{e.error}</dd></div>}
      </dl>
      <h3>Content</h3>
      <pre className="code mem-content" data-testid="memory-episode-content">{e.content ?? ""}</pre>
      <h3>Entities it mentions ({entities.length})</h3>
      {entities.length === 0 ? <p className="muted">None.</p> : (
        <ul className="mem-chips">
          {entities.map((en) => (
            <li key={en.id}><a {...linkProps(entityPath(en.id))}><span className="mem-swatch" data-type={en.type || "Other"} />{en.name || en.id}</a> <span className="muted small">{en.type}</span></li>
          ))}
        </ul>
      )}
      <ConfirmDialog
        testId="memory-confirm"
        open={confirm}
        title="Delete this episode?"
        confirmLabel="Delete episode"
        busy={busy}
        error={delError}
        onConfirm={doDelete}
        onCancel={() => setConfirm(false)}
      >
        <p>The episode goes with its mentions, the entities no other episode mentions and the relations no other episode supports.</p>
      </ConfirmDialog>
    </article>
  );
}

// --- settings ---

type Switch = "capture_runs" | "tools_enabled" | "patterns_enabled";
const SWITCHES: { key: Switch; label: string; hint: string }[] = [
  { key: "capture_runs", label: "Capture runs", hint: "finished runs become episodes" },
  { key: "tools_enabled", label: "Memory tools", hint: "the model is offered memory_search and memory_add" },
  { key: "patterns_enabled", label: "Interaction patterns", hint: "patterns are learned and offered" },
];

function SettingsView() {
  const st = useAsync((signal) => memory.settings(signal), []);
  const [draft, setDraft] = useState<Partial<Record<Switch, boolean>>>({});
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [answer, setAnswer] = useState<MemSettings | null>(null);
  const current = answer ?? st.data?.settings ?? {};
  const changed = SWITCHES.filter((s) => draft[s.key] !== undefined && draft[s.key] !== !!current[s.key]);
  const send = (patch: SettingsPatch) => {
    setBusy(true);
    setError("");
    memory.updateSettings(patch).then(
      (r) => {
        setBusy(false);
        setAnswer(r.settings ?? {});
        setDraft({});
      },
      (err: unknown) => {
        setBusy(false);
        setError(errMsg(err));
      },
    );
  };
  if (st.status === "error" && !st.data) return <ErrorBox what="The memory settings" error={st.error} retry={st.reload} />;
  if (!st.data) return <Loading what="the memory settings" />;
  return (
    <section className="mem-settings" aria-label="Settings">
      <form
        className="card"
        aria-labelledby="mem-settings-title"
        onSubmit={(e) => {
          e.preventDefault();
          const patch: SettingsPatch = {};
          for (const s of changed) patch[s.key] = !!draft[s.key];
          send(patch);
        }}
      >
        <h2 id="mem-settings-title">This tenant's memory</h2>
        <p className="muted small">The switches never remove what is stored.</p>
        {SWITCHES.map((s) => {
          const on = draft[s.key] ?? !!current[s.key];
          return (
            <label key={s.key} className="mem-check mem-switch" data-key={s.key}>
              <input type="checkbox" checked={on} onChange={(e) => setDraft((d) => ({ ...d, [s.key]: e.target.checked }))} />
              <span><strong>{s.label}</strong> <span className="muted">({s.key}) — {s.hint}; now {current[s.key] ? "on" : "off"}</span></span>
            </label>
          );
        })}
        <div className="mem-row">
          <button type="submit" disabled={busy || changed.length === 0}>{busy ? "Saving…" : `Save ${changed.length || ""} change${changed.length === 1 ? "" : "s"}`}</button>
          <button type="button" className="secondary" disabled={busy || changed.length === 0} onClick={() => setDraft({})}>Undo</button>
        </div>
        <p className="muted small">
          Conversations not captured: {(current.capture_disabled_conversations ?? []).length} · without patterns: {(current.patterns_disabled_conversations ?? []).length}
        </p>
        {error && <p className="error" role="alert">The settings could not be changed: {error}</p>}
      </form>
      <ConversationSettings onSend={send} busy={busy} />
      {answer && (
        <section className="card" aria-labelledby="mem-answer-title">
          <h3 id="mem-answer-title">The API's answer</h3>
          <pre className="code" data-testid="memory-settings-answer">{JSON.stringify({ settings: answer }, null, 2)}</pre>
        </section>
      )}
    </section>
  );
}

function ConversationSettings({ onSend, busy }: { onSend: (p: SettingsPatch) => void; busy: boolean }) {
  const [conv, setConv] = useState("");
  const [capture, setCapture] = useState("");
  const [patterns, setPatterns] = useState("");
  const ok = conv.trim() !== "" && (capture !== "" || patterns !== "");
  return (
    <form
      className="card"
      aria-labelledby="mem-conv-title"
      onSubmit={(e) => {
        e.preventDefault();
        const p: SettingsPatch = { conversation_id: conv.trim() };
        if (capture) p.conversation_capture = capture === "on";
        if (patterns) p.conversation_patterns = patterns === "on";
        onSend(p);
      }}
    >
      <h2 id="mem-conv-title">One conversation</h2>
      <div className="mem-conv-grid">
        <label htmlFor="mem-conv">Conversation id</label>
        <input id="mem-conv" value={conv} onChange={(e) => setConv(e.target.value)} autoComplete="off" />
        <label htmlFor="mem-conv-capture">Capture its runs</label>
        <select id="mem-conv-capture" value={capture} onChange={(e) => setCapture(e.target.value)}>
          <option value="">unchanged</option><option value="on">on</option><option value="off">off</option>
        </select>
        <label htmlFor="mem-conv-patterns">Patterns</label>
        <select id="mem-conv-patterns" value={patterns} onChange={(e) => setPatterns(e.target.value)}>
          <option value="">unchanged</option><option value="on">on</option><option value="off">off</option>
        </select>
      </div>
      <button type="submit" disabled={busy || !ok}>Apply to the conversation</button>
    </form>
  );
}
