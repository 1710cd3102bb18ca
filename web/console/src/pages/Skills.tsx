// The Skills page: the tenant's skills by layer (system, tenant, and a
// project's), with each one's state — active, disabled, or overridden and
// by which layer — revision and warnings, and the skills refused by
// validation; uploads; disabling a system skill; one skill's view and its
// editor (components/SkillsDetail.tsx). Data: GET /v1/skills?scope=all.
import { useEffect, useId, useMemo, useState } from "react";
import { ErrorBox, Loading, Empty } from "../components/States.tsx";
import { ConfirmDialog } from "../components/ConfirmDialog.tsx";
import { OutcomeLine, setProject, StatePill, useProject, withProject, type Outcome } from "../components/SkillsCommon.tsx";
import { SkillDetail, SkillEditor } from "../components/SkillsDetail.tsx";
import { SkillsUpload } from "../components/SkillsUpload.tsx";
import { ApiError } from "../lib/api.ts";
import { filterRows, layerOf, LAYERS, parseSkillPath, resolveLayers, skillPath, sourceOf, validProject, writeErrorText, type Layer, type SkillRow } from "../lib/skills.ts";
import { skillsApi } from "../lib/skillsApi.ts";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps } from "../router.ts";
import "./Skills.css";

export default function SkillsPage({ path }: { path: string }) {
  const project = useProject();
  const route = parseSkillPath(path);
  if (route) {
    return route.edit
      ? <SkillEditor key={path} layer={route.layer} name={route.name} project={project} />
      : <SkillDetail key={path} layer={route.layer} name={route.name} project={project} />;
  }
  return <SkillsList project={project} />;
}

const TITLES: Record<Layer, string> = { system: "System skills", tenant: "Tenant skills", project: "Project skills" };

function SkillsList({ project }: { project: string }) {
  const id = useId();
  const st = useAsync((signal) => skillsApi.list("all", project, signal), [project]);
  const [draft, setDraft] = useState(project);
  const [filter, setFilter] = useState("");
  const [showUpload, setShowUpload] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);
  const [busy, setBusy] = useState("");
  const [deleting, setDeleting] = useState<SkillRow | null>(null);
  useEffect(() => setDraft(project), [project]);

  const rows = useMemo(() => resolveLayers(st.data?.skills ?? []), [st.data]);
  const shown = useMemo(() => filterRows(rows, filter), [rows, filter]);
  const invalid = (st.data?.invalid ?? []).filter((e) => !filter || [e.folder, e.reason].join(" ").toLowerCase().includes(filter.toLowerCase()));
  const draftOk = draft === "" || validProject(draft);

  const act = async (key: string, what: string, f: () => Promise<string>) => {
    if (busy) return;
    setBusy(key);
    setOutcome(null);
    try {
      setOutcome({ kind: "ok", text: await f() });
      st.reload();
    } catch (e) {
      setOutcome({ kind: "error", text: writeErrorText(e instanceof ApiError ? e.status : 0, e instanceof Error ? e.message : String(e), what) });
    } finally {
      setBusy("");
    }
  };
  const where = project ? "project " + project : "the tenant";
  const toggle = (r: SkillRow) => {
    const disable = r.state !== "disabled";
    void act("state:" + r.meta.name, `Could not ${disable ? "disable" : "enable"} ${r.meta.name}`, async () => {
      await skillsApi.setDisabled(r.meta.name, project, disable);
      return `${disable ? "Disabled" : "Enabled"} ${r.meta.name} for ${where}.`;
    });
  };
  const remove = (r: SkillRow) => {
    void act("delete:" + r.layer + r.meta.name, "Could not delete " + r.meta.name, async () => {
      const res = await skillsApi.remove(r.meta.name, r.layer === "project" ? project : "", r.meta.revision ?? "");
      return `Deleted the ${r.layer} skill ${r.meta.name} (revision ${res.revision ?? r.meta.revision ?? "?"}).`;
    });
  };

  return (
    <div className="skills">
      <div className="skills-head">
        <h1>Skills</h1>
        <form className="project-form" onSubmit={(e) => { e.preventDefault(); if (draftOk) setProject(draft.trim()); }}>
          <label htmlFor={id + "-project"}>Project</label>
          <input id={id + "-project"} data-testid="project" value={draft} placeholder="none" onChange={(e) => setDraft(e.target.value)} aria-invalid={!draftOk} autoComplete="off" />
          <button type="submit" disabled={!draftOk || draft.trim() === project}>Show</button>
        </form>
        <div className="filter">
          <label htmlFor={id + "-filter"}>Filter</label>
          <input id={id + "-filter"} data-testid="filter" type="search" value={filter} placeholder="name, description…" onChange={(e) => setFilter(e.target.value)} />
        </div>
        <span className="spacer" />
        <div className="head-actions">
          <button type="button" className="secondary" onClick={st.reload} disabled={st.status === "loading"}>Reload</button>
          <button type="button" data-testid="show-upload" aria-expanded={showUpload} aria-controls={id + "-upload"} onClick={() => setShowUpload((v) => !v)}>{showUpload ? "Close upload" : "Upload a skill…"}</button>
        </div>
      </div>
      {!draftOk && <p className="error small">A project is 1–128 letters, digits, _ or -.</p>}
      <div id={id + "-upload"}>{showUpload && <SkillsUpload project={project} rows={rows} onDone={st.reload} />}</div>
      <OutcomeLine outcome={outcome} />
      <div className="skills-status" data-testid="skills-status" data-status={st.status} aria-busy={st.status === "loading"}>
        {st.status === "loading" && <Loading what="the skills" />}
        {st.status === "error" && <ErrorBox what="The skills" error={st.error} retry={st.reload} />}
        {st.status === "ready" && <p className="muted small" role="status">{rows.length} skills in {project ? "the system, tenant and project " + project + " layers" : "the system and tenant layers"}{filter ? `, ${shown.length} match the filter` : ""}.</p>}
      </div>
      {st.data && LAYERS.map((layer) => (
        <section key={layer} className="layer" aria-labelledby={id + "-" + layer} data-testid={"layer-" + layer}>
          <h2 id={id + "-" + layer}>{TITLES[layer]}{layer === "project" && project ? ": " + project : ""}</h2>
          {layer === "project" && !project ? (
            <Empty>Choose a project above to see its skills.</Empty>
          ) : (
            <SkillCards rows={shown.filter((r) => r.layer === layer)} all={rows.filter((r) => r.layer === layer).length} project={project} busy={busy} where={where} onToggle={toggle} onDelete={setDeleting} />
          )}
        </section>
      ))}
      {invalid.length > 0 && (
        <section className="layer" aria-labelledby={id + "-invalid"} data-testid="invalid">
          <h2 id={id + "-invalid"}>Refused by validation</h2>
          <ul className="invalid-list">
            {invalid.map((e, i) => (
              <li key={i} className="card"><code>{e.folder}</code> <span className="tag">{layerOf(e.scope) || "?"}</span><p className="error small">{e.reason}</p></li>
            ))}
          </ul>
        </section>
      )}
      <ConfirmDialog
        open={deleting !== null}
        testId="skill-confirm"
        title={`Delete the ${deleting?.layer ?? ""} skill ${deleting?.meta.name ?? ""}?`}
        confirmLabel="Delete"
        onConfirm={() => {
          const r = deleting;
          setDeleting(null);
          if (r) remove(r);
        }}
        onCancel={() => setDeleting(null)}
      >
        <p>Revision {deleting?.meta.revision ?? "?"} is deleted; if someone stored a newer one since, nothing is deleted.</p>
      </ConfirmDialog>
    </div>
  );
}

function SkillCards({ rows, all, project, busy, where, onToggle, onDelete }: {
  rows: SkillRow[]; all: number; project: string; busy: string; where: string;
  onToggle: (r: SkillRow) => void; onDelete: (r: SkillRow) => void;
}) {
  if (all === 0) return <Empty>No skills in this layer.</Empty>;
  if (rows.length === 0) return <Empty>No skill of this layer matches the filter.</Empty>;
  return (
    <ul className="skill-cards">
      {rows.map((r) => {
        const m = r.meta;
        const store = m.source === "SKILL_SOURCE_STORE";
        return (
          <li key={r.layer + m.name} className={"card skill-card st-" + r.state} data-testid="skill" data-name={m.name} data-layer={r.layer} data-state={r.state} data-overridden-by={r.overriddenBy} data-revision={m.revision ?? ""}>
            <div className="card-head">
              <a className="name" {...linkProps(withProject(skillPath(r.layer, m.name), project))}><code>{m.name}</code></a>
              <StatePill row={r} />
              <span className="spacer" />
              <span className="muted small">{sourceOf(m.source)} · revision <code>{m.revision || "?"}</code></span>
            </div>
            {m.description && <p className="description">{m.description}</p>}
            {m.warnings && m.warnings.length > 0 && (
              <ul className="warnings" aria-label={"Warnings of " + m.name}>{m.warnings.map((w, i) => <li key={i}>{w}</li>)}</ul>
            )}
            <div className="row-actions">
              {r.layer === "system" && (
                <>
                  <button type="button" className="secondary" data-action={r.state === "disabled" ? "enable" : "disable"} aria-busy={busy === "state:" + m.name} onClick={() => onToggle(r)} aria-label={`${r.state === "disabled" ? "Enable" : "Disable"} ${m.name} for ${where}`}>
                    {r.state === "disabled" ? "Enable" : "Disable"}
                  </button>
                  {r.state === "active" && <a className="button secondary" data-action="override" {...linkProps(withProject(skillPath("system", m.name, true), project))} aria-label={"Override " + m.name}>Override…</a>}
                </>
              )}
              {r.layer !== "system" && store && (
                <>
                  <a className="button secondary" data-action="edit" {...linkProps(withProject(skillPath(r.layer, m.name, true), project))} aria-label={"Edit " + m.name}>Edit</a>
                  <button type="button" className="danger" data-action="delete" disabled={busy === "delete:" + r.layer + m.name} onClick={() => onDelete(r)} aria-label={`Delete the ${r.layer} skill ${m.name}`}>Delete…</button>
                </>
              )}
            </div>
          </li>
        );
      })}
    </ul>
  );
}
