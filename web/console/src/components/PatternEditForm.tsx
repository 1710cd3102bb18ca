// The edit form of a pattern: name, description, steps and the best tool
// chain, the fields PATCH /v1/patterns/{id} accepts. It sends only what
// changed, with If-Match of the version it was opened at; a 412 (changed
// since) is shown with a button that reloads the pattern.
import { useId, useState } from "react";
import {
  checkPatch, formOf, isEmptyPatch, isStale, MAX_STEPS, patchOf, patternsApi,
  type EditForm, type Pattern, type StepForm,
} from "../lib/patterns.ts";

export function PatternEditForm({ pattern, version, onSaved, onCancel, onReload }: {
  pattern: Pattern;
  version: number;
  onSaved: (p: Pattern, version: number) => void;
  onCancel: () => void;
  onReload: () => void;
}) {
  const [form, setForm] = useState<EditForm>(() => formOf(pattern));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [stale, setStale] = useState(false);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const id = useId();
  const patch = patchOf(pattern, form);
  const set = (f: Partial<EditForm>) => setForm((x) => ({ ...x, ...f }));
  const setStep = (i: number, f: Partial<StepForm>) => setForm((x) => ({ ...x, steps: x.steps.map((s, j) => (j === i ? { ...s, ...f } : s)) }));
  const moveStep = (i: number, d: -1 | 1) =>
    setForm((x) => {
      const steps = [...x.steps];
      const a = steps[i];
      const b = steps[i + d];
      if (!a || !b) return x;
      steps[i] = b;
      steps[i + d] = a;
      return { ...x, steps };
    });
  const fieldError = (k: string) => errors[k] && <span className="error small" id={id + k}>{errors[k]}</span>;
  const described = (k: string) => (errors[k] ? id + k : undefined);

  const save = async () => {
    const e = checkPatch(patch);
    setErrors(e);
    setError("");
    if (Object.keys(e).length > 0 || isEmptyPatch(patch)) return;
    setBusy(true);
    try {
      const r = await patternsApi.update(pattern.id, version, patch);
      onSaved(r.pattern, r.version);
    } catch (err) {
      if (isStale(err)) setStale(true);
      else setError(err instanceof Error ? err.message : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form
      className="card pat-edit"
      aria-label="Edit the pattern"
      data-testid="edit-form"
      onSubmit={(e) => {
        e.preventDefault();
        void save();
      }}
    >
      <h2>Edit the pattern <span className="muted small">at version {version}</span></h2>
      {stale && (
        <div className="pat-stale" role="alert" data-testid="stale">
          <p>This pattern changed since you opened it (it is no longer version {version}) — reload it to edit the current version. Your changes here are not saved.</p>
          <button type="button" onClick={onReload}>Reload</button>
        </div>
      )}
      <label htmlFor={id + "name"}>Name</label>
      <input id={id + "name"} name="name" autoFocus value={form.name} onChange={(e) => set({ name: e.target.value })} aria-describedby={described("name")} required />
      {fieldError("name")}
      <label htmlFor={id + "desc"}>Description</label>
      <textarea id={id + "desc"} name="description" rows={2} value={form.description} onChange={(e) => set({ description: e.target.value })} aria-describedby={described("description")} />
      {fieldError("description")}
      <label htmlFor={id + "chain"}>Best tool chain <span className="muted small">(tool names, in order, separated by commas)</span></label>
      <input id={id + "chain"} name="tool_chain" value={form.toolChain} onChange={(e) => set({ toolChain: e.target.value })} aria-describedby={described("tool_chain")} />
      {fieldError("tool_chain")}
      {Object.entries(errors).filter(([k]) => k.startsWith("tool_chain[")).map(([k, v]) => <span key={k} className="error small">{k}: {v}</span>)}
      <fieldset className="pat-steps">
        <legend>Steps</legend>
        {fieldError("steps")}
        {form.steps.map((s, i) => (
          <fieldset key={i} className="pat-step-edit" data-testid="step-edit">
            <legend>Step {i + 1}</legend>
            <label htmlFor={`${id}s${i}d`}>What it does</label>
            <input id={`${id}s${i}d`} value={s.description} onChange={(e) => setStep(i, { description: e.target.value })} aria-describedby={described(`steps[${i}].description`)} />
            {fieldError(`steps[${i}].description`)}
            <label htmlFor={`${id}s${i}t`}>Tools <span className="muted small">(separated by commas)</span></label>
            <input id={`${id}s${i}t`} value={s.tools} onChange={(e) => setStep(i, { tools: e.target.value })} />
            {Object.entries(errors).filter(([k]) => k.startsWith(`steps[${i}].tools`)).map(([k, v]) => <span key={k} className="error small">{v}</span>)}
            <label htmlFor={`${id}s${i}o`}>Expected output</label>
            <input id={`${id}s${i}o`} value={s.expected_output} onChange={(e) => setStep(i, { expected_output: e.target.value })} />
            {fieldError(`steps[${i}].expected_output`)}
            <label htmlFor={`${id}s${i}c`}>Corrections <span className="muted small">(one a line)</span></label>
            <textarea id={`${id}s${i}c`} rows={2} value={s.corrections} onChange={(e) => setStep(i, { corrections: e.target.value })} />
            {fieldError(`steps[${i}].corrections`)}
            <div className="pat-actions">
              <button type="button" className="secondary" disabled={i === 0} onClick={() => moveStep(i, -1)}>Move up</button>
              <button type="button" className="secondary" disabled={i === form.steps.length - 1} onClick={() => moveStep(i, 1)}>Move down</button>
              <button type="button" className="secondary" disabled={form.steps.length <= 1} onClick={() => setForm((x) => ({ ...x, steps: x.steps.filter((_, j) => j !== i) }))}>Remove step {i + 1}</button>
            </div>
          </fieldset>
        ))}
        <button
          type="button"
          className="secondary"
          disabled={form.steps.length >= MAX_STEPS}
          onClick={() => setForm((x) => ({ ...x, steps: [...x.steps, { description: "", tools: "", expected_output: "", corrections: "" }] }))}
        >
          Add a step
        </button>
      </fieldset>
      {error && <p className="error" role="alert">The pattern could not be saved: {error}</p>}
      <p className="muted small" data-testid="changed">
        {isEmptyPatch(patch) ? "Nothing changed yet." : "Will change: " + Object.keys(patch).map((k) => k.replace("_", " ")).join(", ") + "."}
      </p>
      <div className="pat-actions">
        <button type="submit" disabled={busy || stale || isEmptyPatch(patch)} data-testid="save">{busy ? "Saving…" : "Save"}</button>
        <button type="button" className="secondary" onClick={onCancel} disabled={busy}>Cancel</button>
      </div>
    </form>
  );
}
