// The upload form: a SKILL.md, or a zip, tar or tar.gz of the skill folder,
// sent with its media type to the tenant or the project. Create-only by
// default (If-None-Match: *); "replace" sends If-Match with the revision
// the listing showed, so a newer upload is never overwritten unseen.
import { useId, useRef, useState } from "react";
import { ApiError } from "../lib/api.ts";
import { nameFromFile, skillMdName, UPLOAD_ACCEPT, uploadType, validProject, validSkillName, writeErrorText, type SkillRow } from "../lib/skills.ts";
import { skillsApi } from "../lib/skillsApi.ts";
import { OutcomeLine, type Outcome } from "./SkillsCommon.tsx";

export function SkillsUpload({ project, rows, onDone }: { project: string; rows: readonly SkillRow[]; onDone: () => void }) {
  const id = useId();
  const fileRef = useRef<HTMLInputElement>(null);
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState("");
  const [target, setTarget] = useState<"tenant" | "project">("tenant");
  const [replace, setReplace] = useState(false);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);

  const toProject = target === "project" && project !== "";
  const layer = toProject ? "project" : "tenant";
  const existing = rows.find((r) => r.layer === layer && r.meta.name === name);
  const type = file ? uploadType(file.name) : null;
  let problem = "";
  if (!file) problem = "Choose a file.";
  else if (!type) problem = "A skill is a SKILL.md (.md) or a .zip, .tar, .tar.gz or .tgz of its folder.";
  else if (!validSkillName(name)) problem = "The name is 1–64 lowercase letters, digits and single hyphens (the SKILL.md's name).";
  else if (toProject && !validProject(project)) problem = "The project is 1–128 letters, digits, _ or -.";
  else if (replace && !existing) problem = `There is no ${layer} skill named ${name} to replace: untick "replace" to create it.`;
  else if (replace && existing?.meta.source !== "SKILL_SOURCE_STORE") problem = `The ${layer} skill ${name} comes from the skills folder, not the store: it cannot be replaced here.`;

  const choose = async (f: File | null) => {
    setFile(f);
    setOutcome(null);
    if (!f) return;
    const t = uploadType(f.name);
    if (t?.skillMd) {
      const n = skillMdName(await f.text());
      if (n) setName(n);
    } else {
      const n = nameFromFile(f.name);
      if (n) setName(n);
    }
  };

  const submit = async () => {
    if (problem || !file || !type) return;
    setBusy(true);
    setOutcome(null);
    const what = (replace ? "Could not replace " : "Could not upload ") + name;
    try {
      const res = await skillsApi.put(name, toProject ? project : "", file, type.contentType, replace && existing ? { ifMatch: existing.meta.revision ?? "" } : { create: true });
      const sk = res.skill;
      setOutcome({
        kind: "ok",
        text: `${res.replaced ? "Replaced" : "Uploaded"} ${layer} skill ${name} (revision ${sk?.revision ?? "?"}).`,
        warnings: sk?.warnings ?? [],
      });
      setFile(null);
      setReplace(false);
      if (fileRef.current) fileRef.current.value = "";
      onDone();
    } catch (e) {
      setOutcome({ kind: "error", text: e instanceof ApiError ? writeErrorText(e.status, e.message, what) : what + ": " + String(e) });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="card skill-upload" aria-labelledby={id + "-h"} onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <h2 id={id + "-h"}>Upload a skill</h2>
      <div className="fields">
        <label htmlFor={id + "-file"}>File (SKILL.md, .zip, .tar, .tar.gz)</label>
        <input id={id + "-file"} data-testid="upload-file" ref={fileRef} type="file" accept={UPLOAD_ACCEPT} onChange={(e) => void choose(e.currentTarget.files?.[0] ?? null)} />
        <label htmlFor={id + "-name"}>Skill name</label>
        <input id={id + "-name"} data-testid="upload-name" value={name} onChange={(e) => setName(e.target.value.trim())} autoComplete="off" spellCheck={false} />
      </div>
      <fieldset className="target">
        <legend>Store it for</legend>
        <label><input type="radio" data-testid="upload-to-tenant" name={id + "-target"} checked={!toProject} onChange={() => setTarget("tenant")} /> the tenant</label>
        <label><input type="radio" data-testid="upload-to-project" name={id + "-target"} checked={toProject} disabled={!project} onChange={() => setTarget("project")} /> project {project || "(choose a project above)"}</label>
      </fieldset>
      <label className="check">
        <input type="checkbox" data-testid="upload-replace" checked={replace} onChange={(e) => setReplace(e.target.checked)} />
        Replace the existing skill{existing ? ` (revision ${existing.meta.revision ?? "?"})` : ""}; without this, an existing skill of that name is never overwritten
      </label>
      {file && problem && <p className="muted small" data-testid="upload-problem">{problem}</p>}
      <div className="row-actions">
        <button type="submit" data-testid="upload-submit" disabled={busy || !!problem}>{busy ? "Uploading…" : replace ? "Replace" : "Upload"}</button>
      </div>
      <OutcomeLine outcome={outcome} />
    </form>
  );
}
