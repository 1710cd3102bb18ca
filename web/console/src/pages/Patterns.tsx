// The Patterns page: the tenant's interaction patterns (and those shared
// with it) with their scores, state and quality gates, filtered, sorted
// and paged (/patterns); one pattern whole, edited, marked useless,
// deleted or shared (/patterns/<id>). Everything comes from the patterns
// API (docs/concepts/patterns.md#the-patterns-api).
import { useEffect, useMemo, useRef, useState } from "react";
import { ConfirmDialog } from "../components/ConfirmDialog.tsx";
import { PatternEditForm } from "../components/PatternEditForm.tsx";
import { GateChips, StateWhy } from "../components/PatternGates.tsx";
import { PatternGrants } from "../components/PatternGrants.tsx";
import { Empty, ErrorBox, Loading } from "../components/States.tsx";
import {
  effectiveRate, fmtDuration, fmtRate, fmtTime, gates, num, patternsApi, sortPatterns, STATES, TASK_TYPES,
  type Pattern, type SortKey,
} from "../lib/patterns.ts";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps } from "../router.ts";
import "./Patterns.css";

const PAGE_SIZE = 50;

export default function PatternsPage({ path }: { path: string }) {
  const id = decodeURIComponent(path.slice("/patterns/".length));
  return <div className="pat-page">{id ? <PatternDetail key={id} id={id} /> : <PatternList />}</div>;
}

function signature(p: Pattern): string {
  const t = (p.task_type ?? "").replace(/_/g, " ");
  return p.entity_types?.length ? `${t} of ${p.entity_types.join(", ")}` : t;
}

// --- the list ---

const COLUMNS: { key: SortKey; label: string }[] = [
  { key: "uses", label: "Uses" },
  { key: "rate", label: "Success rate" },
  { key: "last_used", label: "Last used" },
  { key: "version", label: "Version" },
];

function PatternList() {
  const [taskType, setTaskType] = useState("");
  const [state, setState] = useState("");
  const [shared, setShared] = useState(false);
  const [tokens, setTokens] = useState<string[]>([""]); // the page tokens so far; the last is shown
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({ key: "updated", desc: true });
  const token = tokens[tokens.length - 1] ?? "";
  const list = useAsync(
    (signal) => patternsApi.list({ task_type: taskType, state, include_shared: shared, page_size: PAGE_SIZE, page_token: token }, signal),
    [taskType, state, shared, token],
  );
  const now = useMemo(() => Date.now(), [list.data]);
  const rows = useMemo(() => sortPatterns(list.data?.patterns ?? [], sort.key, sort.desc, now), [list.data, sort, now]);
  const filter = (f: () => void) => {
    f();
    setTokens([""]);
  };
  // A new column sorts highest first (names from A); again, the other way.
  const sortBy = (key: SortKey) => setSort((s) => (s.key === key ? { key, desc: !s.desc } : { key, desc: key !== "name" }));
  const ariaSort = (key: SortKey) => (sort.key === key ? (sort.desc ? "descending" : "ascending") : undefined);
  const filtered = taskType !== "" || state !== "" || shared;

  return (
    <section aria-labelledby="pat-title">
      <div className="pat-head">
        <h1 id="pat-title">Interaction patterns</h1>
        <p className="muted small">Reusable ways of doing one kind of task, learned from successful runs. Only <strong>active</strong> patterns (every gate passed) are offered to runs.</p>
      </div>
      <form className="pat-filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Task type
          <select value={taskType} onChange={(e) => filter(() => setTaskType(e.target.value))} name="task_type">
            <option value="">any</option>
            {TASK_TYPES.map((t) => <option key={t} value={t}>{t.replace("_", " ")}</option>)}
          </select>
        </label>
        <label>
          State
          <select value={state} onChange={(e) => filter(() => setState(e.target.value))} name="state">
            <option value="">any</option>
            {STATES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </label>
        <label className="pat-check">
          <input type="checkbox" checked={shared} onChange={(e) => filter(() => setShared(e.target.checked))} name="include_shared" />
          Include patterns shared with this tenant
        </label>
        <span className="spacer" />
        <button type="button" className="secondary" onClick={list.reload} disabled={list.status === "loading"}>Refresh</button>
      </form>
      {list.status === "error" && <ErrorBox what="The patterns" error={list.error} retry={list.reload} />}
      {list.status === "loading" && !list.data && <Loading what="the patterns" />}
      {list.data && rows.length === 0 && (
        <Empty>{filtered || tokens.length > 1 ? "No patterns match these filters." : "No patterns yet. The agent learns one from successful runs of the same kind of task; after three, the pattern is offered to the next run."}</Empty>
      )}
      {rows.length > 0 && (
        <div className="pat-table-wrap" aria-busy={list.status === "loading"}>
          <table className="pat-table" data-testid="patterns">
            <caption className="sr-only">Patterns, {sort.key === "updated" ? "most recently updated first" : "sorted by " + sort.key}</caption>
            <thead>
              <tr>
                <th scope="col" aria-sort={ariaSort("name")}>
                  <button type="button" className="pat-sort" onClick={() => sortBy("name")}>Pattern{sortMark(sort, "name")}</button>
                </th>
                {COLUMNS.map((c) => (
                  <th key={c.key} scope="col" aria-sort={ariaSort(c.key)} className="num">
                    <button type="button" className="pat-sort" onClick={() => sortBy(c.key)}>{c.label}{sortMark(sort, c.key)}</button>
                  </th>
                ))}
                <th scope="col">State and gates</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((p) => {
                const gs = gates(p, now);
                return (
                  <tr key={p.id} data-id={p.id} data-state={p.state} data-version={num(p.version)} data-shared={p.shared ? "true" : undefined}>
                    <td data-label="Pattern">
                      <a {...linkProps("/patterns/" + encodeURIComponent(p.id))} className="pat-name">{p.name || p.id}</a>
                      {p.shared && <span className="tag pat-shared" title={"shared by tenant " + (p.tenant ?? "")}>shared by {p.tenant}</span>}
                      {signature(p) !== p.name && <div className="muted small">{signature(p)}</div>}
                      {p.description && <div className="small pat-desc">{p.description}</div>}
                    </td>
                    <td data-label="Uses" className="num">
                      {num(p.usage_count)}
                      <div className="muted small">{num(p.success_count)} ok · {num(p.failure_count)} failed</div>
                    </td>
                    <td data-label="Success rate" className="num">{fmtRate(effectiveRate(p, now))}</td>
                    <td data-label="Last used" className="num small">{fmtTime(p.last_used_at)}</td>
                    <td data-label="Version" className="num">{num(p.version)}</td>
                    <td data-label="State and gates">
                      <StateWhy state={p.state} gates={gs} />
                      <GateChips gates={gs} compact />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {(tokens.length > 1 || list.data?.next_page_token) && (
        <nav className="pat-pager" aria-label="Pages of patterns">
          <button type="button" className="secondary" disabled={tokens.length <= 1} onClick={() => setTokens((t) => t.slice(0, -1))}>Previous page</button>
          <span className="muted small">page {tokens.length}</span>
          <button type="button" className="secondary" disabled={!list.data?.next_page_token} onClick={() => setTokens((t) => [...t, list.data?.next_page_token ?? ""])}>Next page</button>
        </nav>
      )}
    </section>
  );
}

function sortMark(sort: { key: SortKey; desc: boolean }, key: SortKey): string {
  return sort.key === key ? (sort.desc ? " ▼" : " ▲") : "";
}

// --- one pattern ---

type Gone = { how: "useless" | "deleted"; name: string; signature: string };

function PatternDetail({ id }: { id: string }) {
  const loaded = useAsync((signal) => patternsApi.get(id, signal), [id]);
  const [saved, setSaved] = useState<{ pattern: Pattern; version: number } | null>(null);
  const [editing, setEditing] = useState(false);
  const [notice, setNotice] = useState("");
  const [confirm, setConfirm] = useState<"" | "useless" | "delete">("");
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [actionError, setActionError] = useState("");
  const [gone, setGone] = useState<Gone | null>(null);
  const cur = saved ?? loaded.data;
  const now = useMemo(() => Date.now(), [cur]);
  // A saved edit closes the form: the focus goes to what says so.
  const noticeRef = useRef<HTMLParagraphElement>(null);
  useEffect(() => {
    if (notice) noticeRef.current?.focus();
  }, [notice]);

  const reload = () => {
    setSaved(null);
    setNotice("");
    loaded.reload();
  };

  if (gone)
    return (
      <section className="card pat-gone" role="status" data-testid="pattern-gone" data-how={gone.how}>
        <h1>{gone.how === "useless" ? "Marked useless" : "Deleted"}</h1>
        <p>
          The pattern <strong>{gone.name}</strong> is deleted{gone.how === "useless" ? (
            <>, and tasks of its kind (<em>{gone.signature}</em>) will not be learned into a new pattern for 180 days.</>
          ) : (
            <>, with its grants. A later successful run of the same kind of task may learn it again.</>
          )}
        </p>
        <a {...linkProps("/patterns")}>Back to the patterns</a>
      </section>
    );
  if (!cur) {
    if (loaded.status === "error") return <><Back /><ErrorBox what="The pattern" error={loaded.error} retry={loaded.reload} /></>;
    return <><Back /><Loading what="the pattern" /></>;
  }
  const { pattern: p, version } = cur;
  const gs = gates(p, now);
  const owned = !p.shared;

  const act = async () => {
    setBusy(true);
    setActionError("");
    try {
      if (confirm === "useless") await patternsApi.markUseless(p.id, reason.trim());
      else await patternsApi.remove(p.id);
      setGone({ how: confirm === "useless" ? "useless" : "deleted", name: p.name || p.id, signature: signature(p) });
      setConfirm("");
    } catch (e) {
      setActionError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <article className="pat-detail" data-testid="pattern" data-id={p.id} data-version={version} data-state={p.state} aria-labelledby="pat-name">
      <Back />
      <header className="pat-detail-head">
        <h1 id="pat-name">{p.name || p.id}</h1>
        <StateWhy state={p.state} gates={gs} />
        {p.shared && <span className="tag pat-shared">shared by {p.tenant} · read-only</span>}
        <span className="muted small">version <span data-testid="version">{version}</span> · <code>{p.id}</code></span>
      </header>
      {loaded.status === "error" && <ErrorBox what="The pattern" error={loaded.error} retry={loaded.reload} />}
      {notice && <p className="pat-notice" role="status" data-testid="notice" tabIndex={-1} ref={noticeRef}>{notice}</p>}
      {owned && !editing && (
        <div className="pat-actions pat-toolbar">
          <button type="button" onClick={() => { setEditing(true); setNotice(""); }} data-testid="edit">Edit</button>
          <button type="button" className="secondary" onClick={() => { setConfirm("useless"); setActionError(""); }} data-testid="mark-useless">Mark useless</button>
          <button type="button" className="secondary danger-text" onClick={() => { setConfirm("delete"); setActionError(""); }} data-testid="delete">Delete</button>
        </div>
      )}
      {editing && (
        <PatternEditForm
          key={version}
          pattern={p}
          version={version}
          onSaved={(np, nv) => {
            setSaved({ pattern: np, version: nv });
            setEditing(false);
            setNotice(`Saved: the pattern is now version ${nv}.`);
          }}
          onCancel={() => setEditing(false)}
          onReload={reload}
        />
      )}
      <div className="pat-grid">
        <section className="card pat-section" aria-labelledby="pat-what">
          <h2 id="pat-what">What it does</h2>
          <p>{p.description || <span className="muted">No description.</span>}</p>
          <dl className="pat-dl">
            <dt>Signature</dt><dd>{signature(p) || "–"}</dd>
            <dt>Task type</dt><dd>{p.task_type || "–"}</dd>
            <dt>Entity types</dt><dd>{p.entity_types?.join(", ") || "–"}</dd>
            <dt>Entities</dt><dd>{p.entities?.join(", ") || "–"}</dd>
            {p.shared && <><dt>Owner</dt><dd>{p.tenant}</dd></>}
          </dl>
        </section>
        <section className="card pat-section" aria-labelledby="pat-scores">
          <h2 id="pat-scores">Scores</h2>
          <dl className="pat-dl" data-testid="scores">
            <dt>Uses</dt><dd data-testid="uses">{num(p.usage_count)}</dd>
            <dt>Successes</dt><dd>{num(p.success_count)}</dd>
            <dt>Failures</dt><dd>{num(p.failure_count)}</dd>
            <dt>Failures in a row</dt><dd>{num(p.consecutive_failures)}</dd>
            <dt>Success rate</dt><dd>{fmtRate(p.success_rate ?? 0)}</dd>
            <dt>Effective success rate</dt><dd title="as retrieval reads it now: × 0.8 for every full 90 days untouched">{fmtRate(effectiveRate(p, now))}</dd>
            <dt>Average duration</dt><dd>{fmtDuration(num(p.avg_duration_ms))}</dd>
          </dl>
        </section>
        <section className="card pat-section" aria-labelledby="pat-gates">
          <h2 id="pat-gates">Quality gates</h2>
          <GateChips gates={gs} />
          <p className="muted small">Demoted when any of the first three fails; offered to runs (active) when all pass.</p>
        </section>
        <section className="card pat-section" aria-labelledby="pat-times">
          <h2 id="pat-times">Times</h2>
          <dl className="pat-dl">
            <dt>Learned</dt><dd>{fmtTime(p.created_at)}</dd>
            <dt>Updated</dt><dd>{fmtTime(p.updated_at)}</dd>
            <dt>Last used</dt><dd>{fmtTime(p.last_used_at)}</dd>
            <dt>Last queried</dt><dd>{fmtTime(p.last_queried_at)}</dd>
          </dl>
        </section>
      </div>
      <section className="card pat-section" aria-labelledby="pat-steps">
        <h2 id="pat-steps">Steps</h2>
        {(p.steps ?? []).length === 0 ? <Empty>No steps.</Empty> : (
          <ol className="pat-step-list" data-testid="steps">
            {(p.steps ?? []).map((s, i) => (
              <li key={i}>
                <span>{s.description}</span>
                {s.tools?.length ? <span className="pat-tools"> {s.tools.map((t, j) => <code key={j}>{t}</code>)}</span> : null}
                {s.expected_output && <div className="muted small">Expected: {s.expected_output}</div>}
                {s.corrections?.length ? (
                  <ul className="small pat-corrections" aria-label={`Corrections of step ${i + 1}`}>{s.corrections.map((c, j) => <li key={j}>{c}</li>)}</ul>
                ) : null}
              </li>
            ))}
          </ol>
        )}
      </section>
      <section className="card pat-section" aria-labelledby="pat-chains">
        <h2 id="pat-chains">Tool chains <span className="muted small">(best first)</span></h2>
        {(p.tool_chains ?? []).length === 0 ? <Empty>No tool chain.</Empty> : (
          <ol className="pat-chains" data-testid="chains">
            {(p.tool_chains ?? []).map((c, i) => <li key={i}>{(c.tools ?? []).map((t, j) => <code key={j}>{t}</code>)}</li>)}
          </ol>
        )}
      </section>
      {(p.decisions ?? []).length > 0 && (
        <section className="card pat-section" aria-labelledby="pat-decisions">
          <h2 id="pat-decisions">Decisions users made</h2>
          <div className="table-wrap">
            <table>
              <thead><tr><th scope="col">Question</th><th scope="col">Recommended</th><th scope="col">Choices</th></tr></thead>
              <tbody>
                {(p.decisions ?? []).map((d, i) => (
                  <tr key={i}>
                    <td>{d.question}</td>
                    <td>{d.recommended}</td>
                    <td>{Object.entries(d.choices ?? {}).map(([k, v]) => `${k} × ${v}`).join(", ")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </section>
      )}
      {p.success_factors && (
        <section className="card pat-section" aria-labelledby="pat-factors">
          <h2 id="pat-factors">Success factors</h2>
          <dl className="pat-dl">
            <dt>Clarifications needed</dt><dd>{num(p.success_factors.clarifications_needed)}</dd>
            <dt>Critical decisions</dt><dd>{p.success_factors.critical_decisions?.join("; ") || "–"}</dd>
            <dt>Common corrections</dt><dd>{p.success_factors.common_corrections?.join("; ") || "–"}</dd>
          </dl>
        </section>
      )}
      {owned && <PatternGrants id={p.id} />}
      <ConfirmDialog
        open={confirm !== ""}
        title={confirm === "useless" ? "Mark this pattern useless?" : "Delete this pattern?"}
        confirmLabel={confirm === "useless" ? "Mark useless" : "Delete"}
        busy={busy}
        error={actionError}
        onConfirm={() => void act()}
        onCancel={() => setConfirm("")}
        focusField={confirm === "useless"}
        testId="pattern-confirm"
      >
        {confirm === "useless" ? (
          <>
            <p>It is deleted, and tasks of its kind (<em>{signature(p)}</em>) are not learned into a new pattern for 180 days.</p>
            <label htmlFor="pat-reason">Why (optional, kept in the logs)</label>
            <textarea id="pat-reason" rows={2} value={reason} maxLength={1024} onChange={(e) => setReason(e.target.value)} />
          </>
        ) : (
          <p>It is deleted with its grants; a later successful run of the same kind of task may learn it again.</p>
        )}
      </ConfirmDialog>
    </article>
  );
}

function Back() {
  return (
    <p className="pat-back">
      <a {...linkProps("/patterns")}>← All patterns</a>
    </p>
  );
}
