// BA-Agent dashboard, the work plan panel: a run's query complexity (a
// badge), its work plan as a checklist that ticks off live, and its
// warnings. Loaded after app.js, whose onEvent calls planEvent once per
// distinct seq, resetTimeline resets it and selectRun hands it the run
// record (planFromRun). Untrusted text is only ever set with textContent.
"use strict";

// The panel is a pure function of the run's events (onEvent has already
// dropped any seq seen before), so a reload or a full replay rebuilds it
// identically; Run.plan fills it in for a run whose early events are no
// longer retained.
const PLAN_EVENT_TYPES = ["work_plan", "plan_step_start", "plan_step_end", "warning"];
const PLAN_STEP_LOOK = {
  PLAN_STEP_STATUS_PENDING: { key: "pending", mark: "\u2610", label: "pending" },
  PLAN_STEP_STATUS_IN_PROGRESS: { key: "running", mark: "\u25B6", label: "running" },
  PLAN_STEP_STATUS_COMPLETED: { key: "done", mark: "\u2713", label: "done" },
  PLAN_STEP_STATUS_FAILED: { key: "failed", mark: "\u2717", label: "failed" },
  PLAN_STEP_STATUS_SKIPPED: { key: "skipped", mark: "\u2717", label: "skipped" },
};
// How far along a status is: a snapshot never moves a step back.
const PLAN_RANK = {
  PLAN_STEP_STATUS_PENDING: 0, PLAN_STEP_STATUS_IN_PROGRESS: 1,
  PLAN_STEP_STATUS_COMPLETED: 2, PLAN_STEP_STATUS_FAILED: 2, PLAN_STEP_STATUS_SKIPPED: 2,
};
const PLAN_STEP_ENDED = new Set(["PLAN_STEP_STATUS_COMPLETED", "PLAN_STEP_STATUS_FAILED", "PLAN_STEP_STATUS_SKIPPED"]);
// Bounds on what a (possibly hostile) event may make the page hold.
const PLAN_MAX_STEPS = 200;
const PLAN_MAX_WARNINGS = 100;

function newPlanState() {
  return {
    complexity: "", signals: [], mode: "",
    plan: null, // { id, revision, reason, steps: [step], current }
    reasons: {}, // revision -> reason, for the revisions seen
    warnings: new Map(), // seq -> { code, message }
    seen: false, // an event of this run has been applied
    gap: false, // early events are gone (stream_reset, or the first seq > 1)
    ended: false, // the terminal event has been applied
    record: null, // the run record's plan (Run.plan), used only as planFromRun says
    stale: false, // the latest plan_step_start was of an older revision
    source: "events", // where the plan shown came from: events, or run (Run.plan)
    recordUsed: null, // the record whose plan useRecordPlan has considered
  };
}

function planStep(s) {
  const n = Math.trunc(Number(s.step_number || 0));
  return {
    n,
    description: String(s.description || ""),
    expected: String(s.expected_output || ""),
    status: PLAN_STEP_LOOK[s.status] ? s.status : "PLAN_STEP_STATUS_PENDING",
    summary: String(s.summary || ""),
    iterations: Number(s.iterations || 0),
    durationMs: Number(s.duration_ms || 0),
  };
}

// adoptWorkPlan replaces the plan with a work_plan event's (or Run.plan's),
// unless it is an older revision than the one shown.
function adoptWorkPlan(ps, wp) {
  const revision = Math.max(1, Math.trunc(Number(wp.revision || 1)));
  if (ps.plan && revision < ps.plan.revision) return false;
  const steps = [];
  for (const s of (wp.steps || []).slice(0, PLAN_MAX_STEPS)) {
    const st = planStep(s);
    if (st.n >= 1 && !steps.some((x) => x.n === st.n)) steps.push(st);
  }
  steps.sort((a, b) => a.n - b.n);
  ps.plan = { id: String(wp.plan_id || ""), revision, reason: String(wp.reason || ""), steps, current: Math.trunc(Number(wp.current_step || 0)) };
  if (wp.reason) ps.reasons[revision] = String(wp.reason);
  return true;
}

// planStepFor finds step n of the plan shown, making room for it when the
// work_plan that listed it is not known (not retained).
function planStepFor(ps, n, total, revision) {
  if (!ps.plan) ps.plan = { id: "", revision: revision || 1, reason: "", steps: [], current: 0 };
  const steps = ps.plan.steps;
  const want = Math.min(PLAN_MAX_STEPS, Math.max(n, total || 0));
  for (let k = 1; k <= want; k++) {
    if (!steps.some((x) => x.n === k)) steps.push(planStep({ step_number: k, description: "Step " + k }));
  }
  steps.sort((a, b) => a.n - b.n);
  return steps.find((x) => x.n === n) || null;
}

// planEvent applies one event to the run's plan state and redraws the
// panel. Called by onEvent once per distinct seq.
function planEvent(ev) {
  const ps = state.planState;
  // A sub-agent's event mirrored into this stream is the child's, not this
  // run's plan (a sub-agent does not plan).
  if (!ps || ev.subagent_run_id) return;
  const p = ev[ev.type] || {};
  if (ev.type !== "stream_reset" && !ps.seen) {
    ps.seen = true;
    if (Number(ev.seq || 0) > 1) ps.gap = true; // the replay starts after seq 1
  }
  if (TERMINAL.has(ev.type)) ps.ended = true;
  const fromRecord = useRecordPlan(ps);
  switch (ev.type) {
    case "start":
      ps.complexity = String(p.query_complexity || "");
      ps.signals = (p.complexity_signals || []).map(String);
      ps.mode = String(p.plan_mode || "");
      break;
    case "work_plan":
      if (adoptWorkPlan(ps, p)) {
        ps.source = "events";
        item(ev, " revision " + ps.plan.revision + ", " + ps.plan.steps.length + " steps" + (ps.plan.reason ? ": " + ps.plan.reason : ""),
          ps.plan.steps.map((s) => s.n + ". " + s.description).join("\n"));
      }
      break;
    case "plan_step_start": case "plan_step_end": {
      const n = Math.trunc(Number(p.step_number || 0));
      if (n < 1 || n > PLAN_MAX_STEPS) break;
      // A step of an older revision than the plan shown is history.
      // plan_step_end carries no revision: it ends the step its start began.
      if (ev.type === "plan_step_start") ps.stale = !!(ps.plan && p.revision && p.revision < ps.plan.revision);
      if (ps.stale) break;
      const st = planStepFor(ps, n, Math.trunc(Number(p.total_steps || 0)), Math.trunc(Number(p.revision || 0)));
      if (!st) break;
      if (ev.type === "plan_step_start") {
        if (p.description) st.description = String(p.description);
        if (p.expected_output) st.expected = String(p.expected_output);
        st.status = "PLAN_STEP_STATUS_IN_PROGRESS";
        ps.plan.current = n;
        item(ev, " " + n + "/" + (p.total_steps || ps.plan.steps.length) + " " + st.description);
      } else {
        st.status = PLAN_STEP_ENDED.has(p.status) ? p.status : (p.success ? "PLAN_STEP_STATUS_COMPLETED" : "PLAN_STEP_STATUS_FAILED");
        if (p.summary) st.summary = String(p.summary);
        st.iterations = Number(p.iterations || st.iterations);
        st.durationMs = Number(p.duration_ms || st.durationMs);
        if (ps.plan.current === n) ps.plan.current = 0;
        item(ev, " " + n + " " + PLAN_STEP_LOOK[st.status].label + (st.durationMs ? " in " + Math.round(st.durationMs) + " ms" : ""), st.summary);
      }
      break;
    }
    case "warning":
      if (ps.warnings.size < PLAN_MAX_WARNINGS) ps.warnings.set(String(ev.seq || ps.warnings.size), { code: String(p.code || ""), message: String(p.message || "") });
      item(ev, " " + (p.code || ""), p.message);
      break;
    case "stream_reset": ps.gap = true; useRecordPlan(ps); break;
    default: if (!fromRecord) return;
  }
  renderPlan();
}

// planFromRun takes the run record's complexity and plan, for what the
// events do not (or no longer) say.
function planFromRun(run) {
  const ps = state.planState;
  if (!ps || !run) return;
  if (!ps.complexity && run.query_complexity) {
    ps.complexity = String(run.query_complexity);
    ps.signals = (run.complexity_signals || []).map(String);
  }
  ps.record = run.plan || null;
  useRecordPlan(ps);
  renderPlan();
}

// useRecordPlan shows the run record's plan when the events cannot rebuild
// it: their start is gone, or the run ended without a plan in them. While
// the events can, the record (a snapshot, often ahead of a replay still
// under way) is not shown, so that the checklist never jumps back.
function useRecordPlan(ps) {
  if (!ps.record || ps.recordUsed === ps.record) return false;
  if (!(ps.gap || (ps.ended && !ps.plan))) return false;
  ps.recordUsed = ps.record;
  const events = ps.plan;
  const revision = Math.max(1, Math.trunc(Number(ps.record.revision || 1)));
  if (events && events.revision > revision) return false; // the events know a newer plan
  ps.plan = null;
  adoptWorkPlan(ps, ps.record);
  ps.source = "run";
  if (!events || events.revision !== revision) return true;
  // The record is a snapshot; keep what the events already said beyond it.
  for (const st of ps.plan.steps) {
    const e = events.steps.find((x) => x.n === st.n);
    if (!e || e.status === "PLAN_STEP_STATUS_PENDING" || PLAN_RANK[e.status] < PLAN_RANK[st.status]) continue;
    st.status = e.status;
    st.summary = e.summary || st.summary;
    st.iterations = e.iterations || st.iterations;
    st.durationMs = e.durationMs || st.durationMs;
  }
  if (events.current) ps.plan.current = events.current;
  return true;
}

function renderPlan() {
  const ps = state.planState;
  const badge = $("complexity");
  const level = ps.complexity.replace("QUERY_COMPLEXITY_", "").toLowerCase();
  badge.hidden = !level || level === "unspecified";
  badge.textContent = level;
  badge.className = "pill complexity-" + level;
  badge.title = ps.signals.length ? "signals: " + ps.signals.join(", ") : "";
  badge.setAttribute("aria-label", "query complexity " + level + (ps.signals.length ? " (" + ps.signals.join(", ") + ")" : ""));

  const warnings = $("warning-list");
  if (warnings.children.length !== ps.warnings.size) {
    warnings.replaceChildren();
    for (const [seq, w] of ps.warnings) {
      const li = document.createElement("li");
      li.dataset.seq = seq;
      if (w.code) {
        const code = document.createElement("code");
        code.textContent = w.code;
        li.append(code, " ");
      }
      li.append(w.message);
      warnings.append(li);
    }
  }
  $("warnings").hidden = ps.warnings.size === 0;

  const plan = ps.plan, box = $("plan");
  box.hidden = !plan;
  if (!plan) return;
  box.dataset.revision = String(plan.revision);
  box.dataset.source = ps.source;
  const rev = $("plan-revision");
  rev.hidden = plan.revision < 2;
  rev.textContent = "revision " + plan.revision;
  const reason = $("plan-reason");
  reason.hidden = !plan.reason;
  reason.textContent = plan.reason ? "Revised: " + plan.reason : "";
  const ol = $("plan-steps");
  // Update the items in place, so that focus and open details survive.
  while (ol.children.length > plan.steps.length) ol.lastElementChild.remove();
  plan.steps.forEach((s, i) => renderPlanStep(ol.children[i] || ol.appendChild(newPlanItem()), s, plan.current === s.n));
  $("plan-progress").textContent = planProgress(plan);
}

function newPlanItem() {
  const li = document.createElement("li");
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  const mark = document.createElement("span");
  mark.className = "plan-mark";
  mark.setAttribute("aria-hidden", "true");
  const desc = document.createElement("span");
  desc.className = "plan-desc";
  const status = document.createElement("span");
  status.className = "plan-status";
  summary.append(mark, desc, status);
  const more = document.createElement("dl");
  details.append(summary, more);
  li.append(details);
  return li;
}

function renderPlanStep(li, s, current) {
  const look = PLAN_STEP_LOOK[s.status];
  li.className = "plan-step st-" + look.key;
  li.dataset.step = String(s.n);
  li.dataset.status = look.key;
  if (current) li.setAttribute("aria-current", "step"); else li.removeAttribute("aria-current");
  const [mark, desc, status] = li.querySelector("summary").children;
  mark.textContent = look.mark;
  desc.textContent = s.n + ". " + s.description;
  status.textContent = look.label;
  const rows = [["Expected", s.expected], ["Result", s.summary]];
  if (PLAN_STEP_ENDED.has(s.status) && (s.durationMs || s.iterations)) {
    rows.push(["Took", Math.round(s.durationMs) + " ms, " + s.iterations + " iteration" + (s.iterations === 1 ? "" : "s")]);
  }
  const dl = li.querySelector("dl");
  dl.replaceChildren();
  for (const [k, v] of rows) {
    if (!v) continue;
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = k; dd.textContent = v;
    dl.append(dt, dd);
  }
}

function planProgress(plan) {
  const count = (st) => plan.steps.filter((s) => s.status === st).length;
  const total = plan.steps.length, done = count("PLAN_STEP_STATUS_COMPLETED");
  const failed = count("PLAN_STEP_STATUS_FAILED"), skipped = count("PLAN_STEP_STATUS_SKIPPED");
  let text = done + " of " + total + " steps done";
  if (failed) text += ", " + failed + " failed";
  if (skipped) text += ", " + skipped + " skipped";
  const cur = plan.steps.find((s) => s.n === plan.current && s.status === "PLAN_STEP_STATUS_IN_PROGRESS");
  if (cur) text += "; step " + cur.n + " running: " + cur.description;
  return text;
}
