// One skill of one layer (/skills/<layer>/<name>): its metadata, state and
// SKILL.md, with what can be done to it; and its editor
// (/skills/<layer>/<name>/edit), which saves a tenant or project skill's
// SKILL.md at the revision it read, or overrides a system skill with a
// tenant or project skill of the same name.
import { useEffect, useId, useMemo, useState, type ReactNode } from "react";
import { ApiError } from "../lib/api.ts";
import { buildSkillMd, frontMatterName, layerOf, resolveLayers, skillPath, sourceOf, splitFrontMatter, writeErrorText, type Layer, type SkillMetadata, type SkillRow } from "../lib/skills.ts";
import { skillsApi, type SkillDoc } from "../lib/skillsApi.ts";
import { useAsync } from "../lib/useAsync.ts";
import { linkProps, navigate } from "../router.ts";
import { Markdown } from "./Markdown.tsx";
import { ErrorBox, Loading } from "./States.tsx";
import { ConfirmDialog } from "./ConfirmDialog.tsx";
import { OutcomeLine, StatePill, withProject, type Outcome } from "./SkillsCommon.tsx";

interface Loaded {
  row: SkillRow | undefined;
  doc: SkillDoc | null;
  docError: unknown;
}

// loadSkill reads the layer's listing (for the state) and the skill itself.
// GET /v1/skills/{name} answers the effective skill: a project's for
// ?project=, else the tenant's, else the system one. A skill hidden by a
// higher layer (or a disabled system skill) cannot be read that way.
async function loadSkill(layer: Layer, name: string, project: string, signal: AbortSignal): Promise<Loaded> {
  const [list, doc] = await Promise.all([
    skillsApi.list("all", project, signal),
    skillsApi.get(name, layer === "project" ? project : "", signal).then((d) => ({ d, e: null as unknown }), (e: unknown) => ({ d: null, e })),
  ]);
  const row = resolveLayers(list.skills ?? []).find((r) => r.layer === layer && r.meta.name === name);
  const same = doc.d && layerOf(doc.d.metadata?.scope) === layer;
  return { row, doc: same ? doc.d : null, docError: doc.e ?? (doc.d && !same ? "hidden" : null) };
}

function Field({ label, children }: { label: string; children: ReactNode }) {
  return (<><dt>{label}</dt><dd>{children}</dd></>);
}

function MetaList({ meta, row }: { meta: SkillMetadata; row: SkillRow | undefined }) {
  const md = Object.entries(meta.metadata ?? {});
  const extra = Object.entries(meta.extra ?? {});
  return (
    <dl className="skill-meta">
      <Field label="Layer">{layerOf(meta.scope) || "?"}</Field>
      {row && <Field label="State"><StatePill row={row} /></Field>}
      <Field label="Source">{sourceOf(meta.source) || "?"}</Field>
      <Field label="Revision"><code data-testid="skill-revision">{meta.revision || "?"}</code></Field>
      {meta.version && <Field label="Version">{meta.version}</Field>}
      {meta.license && <Field label="License">{meta.license}</Field>}
      {meta.compatibility && <Field label="Compatibility">{meta.compatibility}</Field>}
      {meta.allowed_tools?.length ? <Field label="Allowed tools">{meta.allowed_tools.map((t) => <code key={t} className="tool">{t}</code>)}</Field> : null}
      {meta.triggers?.length ? <Field label="Triggers">{meta.triggers.join(" · ")}</Field> : null}
      {meta.model && <Field label="Model">{meta.model}</Field>}
      {meta.disable_model_invocation && <Field label="Invocation">only by the user or a trigger (disable-model-invocation)</Field>}
      {meta.catalog_tokens !== undefined && <Field label="Catalogue tokens">{String(meta.catalog_tokens)}</Field>}
      {md.length > 0 && <Field label="Metadata">{md.map(([k, v]) => <span key={k} className="kv">{k}: {v}</span>)}</Field>}
      {extra.length > 0 && <Field label="Other keys">{extra.map(([k, v]) => <span key={k} className="kv">{k}: {v}</span>)}</Field>}
      {meta.resources?.length ? <Field label="Resources">{meta.resources.map((r) => <code key={r} className="res">{r}</code>)}</Field> : null}
    </dl>
  );
}

function Warnings({ warnings }: { warnings: string[] | undefined }) {
  if (!warnings?.length) return null;
  return (
    <div className="notice warning" data-testid="skill-warnings">
      <p>Loaded despite:</p>
      <ul>{warnings.map((w, i) => <li key={i}>{w}</li>)}</ul>
    </div>
  );
}

// frontMatterOf is the front matter part of the SKILL.md the metadata
// rebuilds.
function frontMatterOf(meta: SkillMetadata): string {
  const s = splitFrontMatter(buildSkillMd(meta, ""));
  return s.ok ? "---\n" + s.frontMatter + "---" : "";
}

function hiddenText(row: SkillRow | undefined, layer: Layer, err: unknown): string {
  if (err === "hidden") return `The API reads only the skill a run would use; for this name that is ${row?.overriddenBy ? "the " + row.overriddenBy + " skill" : "another layer's skill"}, so this ${layer} skill's SKILL.md cannot be shown.`;
  return "Its SKILL.md could not be read: " + (err instanceof Error ? err.message : String(err));
}

export function SkillDetail({ layer, name, project }: { layer: Layer; name: string; project: string }) {
  const st = useAsync((signal) => loadSkill(layer, name, project, signal), [layer, name, project]);
  const [outcome, setOutcome] = useState<Outcome>(null);
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const back = withProject("/skills", project);

  if (st.status === "loading" && !st.data) return <Loading what={"the skill " + name} />;
  if (st.status === "error" && !st.data) return <ErrorBox what={"The skill " + name} error={st.error} retry={st.reload} />;
  const { row, doc, docError } = st.data!;
  const meta = doc?.metadata ?? row?.meta;
  const target = layer === "project" ? project : "";
  const store = meta?.source === "SKILL_SOURCE_STORE";

  const setDisabled = async (disabled: boolean) => {
    setBusy(true);
    setOutcome(null);
    try {
      await skillsApi.setDisabled(name, project, disabled);
      setOutcome({ kind: "ok", text: `${disabled ? "Disabled" : "Enabled"} ${name} for ${project ? "project " + project : "the tenant"}.` });
      st.reload();
    } catch (e) {
      setOutcome({ kind: "error", text: writeErrorText(e instanceof ApiError ? e.status : 0, e instanceof Error ? e.message : String(e), `Could not ${disabled ? "disable" : "enable"} ${name}`) });
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    setOutcome(null);
    try {
      await skillsApi.remove(name, target, meta?.revision ?? "");
      navigate(back);
    } catch (e) {
      setOutcome({ kind: "error", text: writeErrorText(e instanceof ApiError ? e.status : 0, e instanceof Error ? e.message : String(e), "Could not delete " + name) });
      setBusy(false);
    }
  };

  return (
    <div className="skill-detail" data-testid="skill-detail" data-layer={layer} data-name={name} data-revision={meta?.revision ?? ""} data-state={row?.state ?? ""}>
      <p><a {...linkProps(back)}>← All skills</a></p>
      <div className="detail-head">
        <h1><code>{name}</code> <span className="tag">{layer}{layer === "project" ? " " + project : ""}</span></h1>
        <span className="spacer" />
        {st.status === "loading" && <span className="muted small" role="status">Reloading…</span>}
      </div>
      {!row && !doc && <p className="error" role="alert">There is no {layer} skill named {name}{project ? " (project " + project + ")" : ""}.</p>}
      {meta?.description && <p className="description">{meta.description}</p>}
      <div className="row-actions">
        {layer === "system" && row && (
          <>
            <button type="button" data-testid="toggle-state" disabled={busy} onClick={() => void setDisabled(row.state !== "disabled")}>
              {row.state === "disabled" ? "Enable" : "Disable"} for {project ? "project " + project : "the tenant"}
            </button>
            {doc && <a className="button secondary" data-testid="override" {...linkProps(withProject(skillPath("system", name, true), project))}>Override…</a>}
          </>
        )}
        {layer !== "system" && store && doc && (
          <>
            <a className="button secondary" data-testid="edit" {...linkProps(withProject(skillPath(layer, name, true), project))}>Edit SKILL.md</a>
            <button type="button" className="danger" data-testid="delete" disabled={busy} onClick={() => setConfirming(true)}>Delete…</button>
          </>
        )}
      </div>
      <OutcomeLine outcome={outcome} />
      {meta && <MetaList meta={meta} row={row} />}
      <Warnings warnings={meta?.warnings} />
      <section className="card skill-body" aria-label="SKILL.md">
        <h2>SKILL.md</h2>
        {doc?.metadata && (
          <details className="front-matter">
            <summary>Front matter (rebuilt from the metadata the API gives)</summary>
            <pre className="code" data-testid="front-matter">{frontMatterOf(doc.metadata)}</pre>
          </details>
        )}
        {doc ? (doc.body ? <Markdown text={doc.body} /> : <p className="muted">The body is empty.</p>) : <p className="muted" data-testid="body-hidden">{hiddenText(row, layer, docError)}</p>}
      </section>
      <ConfirmDialog
        open={confirming}
        testId="skill-confirm"
        title={`Delete the ${layer} skill ${name}?`}
        confirmLabel="Delete"
        onConfirm={() => {
          setConfirming(false);
          void remove();
        }}
        onCancel={() => setConfirming(false)}
      >
        <p>Revision {meta?.revision ?? "?"} is deleted; if someone stored a newer one since, nothing is deleted.{layer !== "project" && row?.winner === layer ? " Runs fall back to the system skill of that name, if there is one." : ""}</p>
      </ConfirmDialog>
    </div>
  );
}

// SkillEditor edits a stored tenant or project skill's SKILL.md (saved with
// If-Match at the revision read), or, from a system skill, starts a tenant
// or project skill of the same name from its SKILL.md (saved create-only).
export function SkillEditor({ layer, name, project }: { layer: Layer; name: string; project: string }) {
  const id = useId();
  const override = layer === "system";
  const st = useAsync((signal) => loadSkill(layer, name, project, signal), [layer, name, project]);
  const [text, setText] = useState<string | null>(null);
  const [revision, setRevision] = useState("");
  const [target, setTarget] = useState<"tenant" | "project">(project ? "project" : "tenant");
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);
  const [stale, setStale] = useState(false);

  const doc = st.data?.doc ?? null;
  useEffect(() => {
    if (st.status === "ready" && doc?.metadata) {
      setText(buildSkillMd(doc.metadata, doc.body ?? ""));
      setRevision(doc.metadata.revision ?? "");
      setStale(false);
    }
  }, [st.status, doc]);
  const split = useMemo(() => (text === null ? null : splitFrontMatter(text)), [text]);

  const back = withProject(skillPath(layer, name), project);
  if (st.status === "loading" && text === null) return <Loading what={"the skill " + name} />;
  if (st.status === "error" && text === null) return <ErrorBox what={"The skill " + name} error={st.error} retry={st.reload} />;
  const row = st.data?.row;
  const meta = doc?.metadata;

  let cannot = "";
  if (!doc) cannot = hiddenText(row, layer, st.data?.docError);
  else if (!override && meta?.source !== "SKILL_SOURCE_STORE") cannot = "This skill comes from the skills folder (files), not the store: it is changed where it is kept, not here.";
  else if (meta?.resources?.length) cannot = `This skill has resource files (${meta.resources.join(", ")}): saving its SKILL.md alone would drop them. Upload an archive of the whole folder instead${override ? " as the override" : ""}.`;
  if (cannot) {
    return (
      <div className="skill-editor">
        <p><a {...linkProps(back)}>← {name}</a></p>
        <h1>{override ? "Override" : "Edit"} <code>{name}</code></h1>
        <p className="notice warning" data-testid="cannot-edit">{cannot}</p>
      </div>
    );
  }

  const fmName = split?.ok ? frontMatterName(split.frontMatter) : "";
  let problem = "";
  if (split && !split.ok) problem = split.error + ".";
  else if (fmName !== name) problem = `The front matter's name must stay ${name} (it says ${fmName || "nothing"}).`;
  const toLayer: Layer = override ? (target === "project" && project ? "project" : "tenant") : layer;
  const toProject = toLayer === "project" ? project : "";

  const save = async () => {
    if (problem || text === null) return;
    setBusy(true);
    setOutcome(null);
    const what = override ? `Could not store the ${toLayer} override of ${name}` : `Could not save ${name}`;
    try {
      const res = await skillsApi.put(name, toProject, text, "text/markdown", override ? { create: true } : { ifMatch: revision });
      if (override) {
        navigate(withProject(skillPath(toLayer, name), project));
        return;
      }
      setRevision(res.skill?.revision ?? "");
      setOutcome({ kind: "ok", text: `Saved ${name}: revision ${res.skill?.revision ?? "?"}.`, warnings: res.skill?.warnings ?? [] });
    } catch (e) {
      if (e instanceof ApiError && e.status === 412) setStale(true);
      setOutcome({ kind: "error", text: e instanceof ApiError ? writeErrorText(e.status, e.message, what) : what + ": " + String(e) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="skill-editor" data-testid="skill-editor" data-revision={revision} onSubmit={(e) => { e.preventDefault(); void save(); }}>
      <p><a {...linkProps(back)}>← {name}</a></p>
      <h1>{override ? "Override" : "Edit"} <code>{name}</code> {!override && <span className="tag">{layer}{layer === "project" ? " " + project : ""} · revision <span data-testid="editor-revision">{revision}</span></span>}</h1>
      {override ? (
        <fieldset className="target">
          <legend>Store the override as</legend>
          <label><input type="radio" name={id + "-t"} checked={toLayer === "tenant"} onChange={() => setTarget("tenant")} /> a tenant skill</label>
          <label><input type="radio" name={id + "-t"} checked={toLayer === "project"} disabled={!project} onChange={() => setTarget("project")} /> a skill of project {project || "(choose a project on the list)"}</label>
          <p className="hint">It is created only if that layer has no skill of this name; it then wins over the system skill.</p>
        </fieldset>
      ) : null}
      <p className="hint">The API gives a skill's parsed front matter, not its text: the front matter below is rebuilt from it (comments and layout are not kept).</p>
      <div className="editor-panes">
        <div className="pane">
          <label htmlFor={id + "-text"}>SKILL.md</label>
          <textarea id={id + "-text"} data-testid="editor-text" spellCheck={false} value={text ?? ""} onChange={(e) => setText(e.target.value)} />
        </div>
        <section className="pane card preview" aria-label="Preview of the body">
          <h2>Preview</h2>
          {split?.ok ? <Markdown text={split.body} /> : <p className="muted">No body to show.</p>}
        </section>
      </div>
      {problem && <p className="error" data-testid="editor-problem">{problem}</p>}
      <div className="row-actions">
        <button type="submit" data-testid="editor-save" disabled={busy || !!problem}>{busy ? "Saving…" : override ? `Create the ${toLayer} skill` : "Save"}</button>
        {stale && <button type="button" className="secondary" data-testid="editor-reload" onClick={() => { setText(null); setOutcome(null); st.reload(); }}>Reload (drops your changes)</button>}
        <a className="button secondary" {...linkProps(back)}>Cancel</a>
      </div>
      <OutcomeLine outcome={outcome} />
    </form>
  );
}
