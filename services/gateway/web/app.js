// BA-Agent dashboard: runs list, live run timeline over SSE with resume,
// usage and cost, start form, answers to clarification/decision questions,
// and the tenant's skills (list by layer, upload, delete, disable).
// Plain browser JavaScript, no build step. Untrusted text is only ever set
// with textContent.
"use strict";

const $ = (id) => document.getElementById(id);
const TERMINAL = new Set(["complete", "error", "cancelled"]);
const ENDED_STATES = new Set(["RUN_STATE_COMPLETED", "RUN_STATE_FAILED", "RUN_STATE_CANCELLED"]);
const state = {
  key: sessionStorage.getItem("baagent.key") || "",
  keysRequired: false,
  runId: "",
  es: null,
  lastSeq: 0,
  cursor: "",
  seen: new Set(),
  received: 0,
  duplicates: 0,
  answer: "",
  pending: null,
  ended: false,
  traceLink: "",
  spans: null,
  planState: null,
};

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (state.key) h["Authorization"] = "Bearer " + state.key;
  return h;
}

// api calls the HTTP/JSON API. opts: raw (a Blob sent as it is, with
// opts.type as its Content-Type) and headers (extra request headers).
async function api(method, path, body, opts) {
  opts = opts || {};
  // Every call that changes something says JSON, body or not: without API
  // keys the gateway refuses anything else (cross-site protection), but
  // for a skill upload, which says what it is.
  const type = opts.raw ? opts.type : "application/json";
  const init = { method, headers: headers(Object.assign(method !== "GET" ? { "Content-Type": type } : {}, opts.headers || {})) };
  if (opts.raw) init.body = opts.raw;
  else if (body) init.body = JSON.stringify(body);
  const r = await fetch(path, init);
  const text = await r.text();
  let data = {};
  try { data = text ? JSON.parse(text) : {}; } catch (err) { data = {}; }
  if (!r.ok) {
    const e = new Error((data.error && data.error.message) || r.statusText || ("HTTP " + r.status));
    e.status = r.status;
    throw e;
  }
  return data;
}

function setConn(text) { $("conn").textContent = text; }

function shortState(s) { return (s || "").replace("RUN_STATE_", ""); }

function setPill(el, s) {
  el.textContent = shortState(s).toLowerCase();
  el.className = "pill state-" + shortState(s);
}

async function whoami() {
  try {
    const w = await api("GET", "/v1/whoami");
    state.keysRequired = w.keys_required;
    state.traceLink = w.trace_link_template || "";
    $("tenant").textContent = "tenant " + w.tenant;
    $("key-form").hidden = !w.keys_required;
    return true;
  } catch (e) {
    $("key-form").hidden = false;
    $("tenant").textContent = e.status === 401 ? "API key required" : e.message;
    return false;
  }
}

async function refreshRuns() {
  let data;
  try { data = await api("GET", "/v1/runs?page_size=50"); } catch (e) { return; }
  const ul = $("runs");
  ul.replaceChildren();
  for (const run of data.runs || []) {
    const li = document.createElement("li");
    li.dataset.runId = run.run_id;
    if (run.run_id === state.runId) li.classList.add("selected");
    const input = document.createElement("span");
    input.className = "input";
    input.textContent = run.input || run.run_id;
    const pill = document.createElement("span");
    setPill(pill, run.state);
    li.append(input, pill);
    li.addEventListener("click", () => selectRun(run.run_id));
    ul.append(li);
    if (run.run_id === state.runId) setPill($("run-state"), run.state);
  }
}

function resetTimeline() {
  $("timeline").replaceChildren();
  $("final").textContent = "";
  $("answer-box").hidden = true;
  $("question").hidden = true;
  for (const id of ["u-in", "u-out", "u-cost", "u-events"]) $(id).textContent = "0";
  state.lastSeq = 0; state.cursor = ""; state.seen = new Set(); state.answer = ""; state.ended = false;
  state.received = 0; state.duplicates = 0;
  state.unpricedCalls = 0;
  state.spans = newSpans();
  state.planState = newPlanState(); renderPlan();
  $("gantt").hidden = true;
  $("gantt-rows").replaceChildren();
  showTrace("");
  showCounts();
}

// showTrace shows the run's trace id, as a link into the tracing UI when
// the gateway has a link template (-trace-link-template).
function showTrace(id) {
  const link = $("trace-link"), code = $("trace-id");
  $("trace").hidden = !id;
  $("trace").dataset.traceId = id || "";
  link.hidden = !(id && state.traceLink);
  code.hidden = !id || !link.hidden;
  if (!id) return;
  if (state.traceLink) {
    link.href = state.traceLink.split("{trace_id}").join(encodeURIComponent(id));
    link.textContent = id;
  } else {
    code.textContent = id;
  }
}

// The timeline chart: steps, model calls and tool calls as bars on one
// time axis, from the events' timestamps (no tracing backend needed).
function newSpans() { return { t0: 0, t1: 0, rows: [], open: {} }; }

function tsMs(ts) {
  if (!ts) return 0;
  // Protobuf JSON timestamps may carry nanoseconds; Date.parse wants ms.
  return Date.parse(String(ts).replace(/(\.\d{3})\d+/, "$1"));
}

function spanEvent(ev) {
  const sp = state.spans, t = tsMs(ev.ts), p = ev[ev.type] || {};
  if (!t) return false;
  if (!sp.t0 || t < sp.t0) sp.t0 = t;
  sp.t1 = Math.max(sp.t1, t);
  const open = (key, kind, label) => {
    const row = { kind, label, start: t, end: 0, failed: false };
    sp.rows.push(row);
    sp.open[key] = row;
  };
  const close = (key, failed) => {
    const row = sp.open[key];
    if (!row) return;
    row.end = t; row.failed = !!failed;
    delete sp.open[key];
  };
  switch (ev.type) {
    case "step_start":
      open("step", "step", "step " + p.step_number);
      open("model", "model", "model");
      return true;
    case "cost_update": close("model"); return true;
    case "act": close("model"); open("tool:" + p.tool_call_id, "tool", p.tool_name); return true;
    case "observe": close("tool:" + p.tool_call_id, !p.success); return true;
    case "skill_activated": close("tool:" + p.activation_id); return true;
    case "step_end": close("model"); close("step"); return true;
    case "complete": case "error": case "cancelled":
      for (const k of Object.keys(sp.open)) close(k);
      return true;
  }
  return false;
}

function renderGantt() {
  const sp = state.spans, rows = $("gantt-rows");
  if (!sp || !sp.rows.length) return;
  const span = Math.max(1, sp.t1 - sp.t0);
  rows.replaceChildren();
  for (const r of sp.rows) {
    const row = document.createElement("div");
    row.className = "g-row";
    const label = document.createElement("span");
    label.className = "g-label";
    label.textContent = (r.kind === "step" ? "" : "\u00a0\u00a0") + r.label;
    const track = document.createElement("div");
    track.className = "g-track";
    const bar = document.createElement("div");
    const end = r.end || sp.t1;
    bar.className = "bar bar-" + r.kind + (r.failed ? " failed" : "") + (r.end ? "" : " open");
    bar.style.left = ((r.start - sp.t0) / span * 100).toFixed(2) + "%";
    bar.style.width = (Math.max(0, end - r.start) / span * 100).toFixed(2) + "%";
    bar.title = r.label + ": " + Math.round(end - r.start) + " ms";
    bar.dataset.ms = String(Math.round(end - r.start));
    track.append(bar);
    row.append(label, track);
    rows.append(row);
  }
  const axis = $("gantt-axis");
  axis.replaceChildren();
  for (const f of [0, 0.5, 1]) {
    const s = document.createElement("span");
    s.textContent = Math.round(span * f) + " ms";
    axis.append(s);
  }
  $("gantt").hidden = false;
}

// showCounts keeps the delivery counters on the timeline element, where
// tests (and curious people, in the inspector) can read them.
function showCounts() {
  const tl = $("timeline").dataset;
  tl.received = String(state.received);
  tl.duplicates = String(state.duplicates);
  tl.lastSeq = String(state.lastSeq);
  tl.distinct = String(state.seen.size);
  $("u-events").textContent = String(state.seen.size);
}

function selectRun(runId) {
  if (state.es) { state.es.close(); state.es = null; }
  state.runId = runId;
  location.hash = runId;
  resetTimeline();
  $("run-head").hidden = false;
  $("run-title").textContent = runId;
  setExportLinks(runId);
  document.querySelectorAll("#runs li").forEach((li) => li.classList.toggle("selected", li.dataset.runId === runId));
  $("cancel").disabled = false;
  api("GET", "/v1/runs/" + encodeURIComponent(runId)).then((d) => {
    setPill($("run-state"), d.run.state);
    if (d.run.trace_id && runId === state.runId) showTrace(d.run.trace_id);
    if (runId === state.runId) planFromRun(d.run);
    if (ENDED_STATES.has(d.run.state)) $("cancel").disabled = true;
  }).catch(() => {});
  // A fresh view replays everything retained, so a reload misses nothing.
  connect("earliest");
}

// exportURL is the download of the selected run in format (claude, openai
// or events); with API keys it carries a fresh stream token, as links
// cannot send the key.
async function exportURL(format) {
  let url = "/v1/runs/" + encodeURIComponent(state.runId) + "/export?format=" + encodeURIComponent(format);
  if (state.keysRequired) {
    const t = await api("POST", "/v1/auth/stream-token");
    url += "&token=" + encodeURIComponent(t.token);
  }
  return url;
}

// setExportLinks points the export links at runId (without a token: one is
// added when a link is clicked).
function setExportLinks(runId) {
  for (const a of document.querySelectorAll("#export a")) {
    a.href = "/v1/runs/" + encodeURIComponent(runId) + "/export?format=" + encodeURIComponent(a.dataset.format);
    a.download = "run-" + runId + "." + a.dataset.format + (a.dataset.format === "events" ? ".jsonl" : ".json");
  }
}

for (const a of document.querySelectorAll("#export a")) {
  a.addEventListener("click", async (e) => {
    if (!state.keysRequired) return; // the plain link works
    e.preventDefault();
    try {
      const link = document.createElement("a");
      link.href = await exportURL(a.dataset.format);
      link.download = a.download;
      document.body.append(link);
      link.click();
      link.remove();
    } catch (err) {
      setConn("export failed: " + err.message);
    }
  });
}

async function streamURL(cursor) {
  let url = "/v1/runs/" + encodeURIComponent(state.runId) + "/events?cursor=" + encodeURIComponent(cursor);
  if (state.keysRequired) {
    const t = await api("POST", "/v1/auth/stream-token");
    url += "&token=" + encodeURIComponent(t.token);
  }
  return url;
}

async function connect(cursor) {
  const runId = state.runId;
  let url;
  try { url = await streamURL(cursor); } catch (e) { setConn("auth failed"); return; }
  if (runId !== state.runId || state.ended) return;
  const es = new EventSource(url);
  state.es = es;
  setConn("connecting");
  es.onopen = () => setConn("live");
  es.onmessage = () => {};
  const types = ["start", "thought", "thought_delta", "text_delta", "act", "observe", "skill_activated",
    "context_compressed", "clarification_asked", "clarification_answered", "decision_asked",
    "decision_answered", "permission_asked", "permission_replied", "doom_loop_detected", "cost_update", "step_start", "step_end", "complete",
    "error", "cancelled", "stream_reset", "doom_loop_intervened", "subagent_assigned",
    "memory_recalled"];
  for (const t of types) es.addEventListener(t, (m) => onEvent(JSON.parse(m.data)));
  for (const t of PLAN_EVENT_TYPES) es.addEventListener(t, (m) => onEvent(JSON.parse(m.data)));
  es.addEventListener("slow_consumer", () => setConn("catching up"));
  es.onerror = () => {
    if (state.ended) return;
    if (es.readyState === EventSource.CLOSED) {
      // Not retried by the browser (e.g. an expired token): reconnect
      // ourselves from the last cursor.
      setConn("reconnecting");
      setTimeout(() => { if (state.es === es) connect(state.cursor || "earliest"); }, 1000);
    } else {
      setConn("reconnecting");
    }
  };
}

function item(ev, title, detail) {
  const li = document.createElement("li");
  li.className = "ev-" + ev.type;
  const seq = document.createElement("span");
  seq.className = "seq";
  if (ev.seq) {
    li.dataset.seq = String(ev.seq);
    seq.textContent = "#" + ev.seq;
  }
  const t = document.createElement("span");
  t.className = "t";
  t.textContent = ev.type;
  li.append(seq, t, document.createTextNode(title || ""));
  if (detail) {
    const pre = document.createElement("pre");
    pre.textContent = detail;
    li.append(pre);
  }
  $("timeline").append(li);
  return li;
}

function onEvent(ev) {
  if (ev.type !== "stream_reset") {
    const seq = Number(ev.seq || 0);
    state.received++;
    if (state.seen.has(seq)) { // never show an event twice
      state.duplicates++;
      showCounts();
      return;
    }
    state.seen.add(seq);
    state.lastSeq = Math.max(state.lastSeq, seq);
  }
  if (ev.cursor) state.cursor = ev.cursor;
  showCounts();
  if (ev.trace_id && $("trace").dataset.traceId !== ev.trace_id) showTrace(ev.trace_id);
  if (ev.subagent_run_id) { subAgentEvent(ev); return; }
  if (state.spans && spanEvent(ev)) renderGantt();
  planEvent(ev);
  const p = ev[ev.type] || {};
  switch (ev.type) {
    case "start":
      item(ev, " " + (p.model || "") + (p.scripted_model ? " (scripted model)" : ""), p.input);
      setPill($("run-state"), "RUN_STATE_RUNNING");
      break;
    case "thought": item(ev, "", p.thought); break;
    case "thought_delta": break;
    case "text_delta":
      state.answer += p.delta || "";
      $("final").textContent = state.answer;
      $("answer-box").hidden = false;
      break;
    case "act":
      item(ev, " " + p.tool_name + " #" + p.tool_call_id, JSON.stringify(p.tool_input || p.raw_arguments || {}, null, 2));
      break;
    case "observe":
      item(ev, " " + p.tool_name + " " + (p.success ? "ok" : "failed " + (p.error_code || "")) + " in " + Math.round(p.duration_ms || 0) + " ms", p.observation);
      break;
    case "skill_activated": item(ev, " " + p.skill_name); break;
    case "context_compressed":
      item(ev, " " + (p.compression_strategy || "") + " " + (p.original_message_count || 0) + " → " + (p.final_message_count || 0) + " messages");
      break;
    case "clarification_asked": askQuestion(p.question_id, p.question, (p.options || []).map((o) => o.label)); item(ev, " " + p.question); break;
    case "decision_asked": askQuestion(p.decision_id, p.context, (p.options || []).map((o) => o.label)); item(ev, " " + p.context); break;
    case "permission_asked": {
      const d = p.decision || {};
      askQuestion(d.decision_id, p.tool_name + " needs your approval to run with " + (p.arguments || "{}"), (d.options || []).map((o) => o.label));
      item(ev, " " + p.tool_name + " #" + p.tool_call_id, p.arguments);
      break;
    }
    case "permission_replied":
      $("question").hidden = true; item(ev, " " + p.tool_name + ": " + (p.reply || "") + (p.timed_out ? " (timed out)" : "")); break;
    case "clarification_answered": case "decision_answered":
      $("question").hidden = true; item(ev, " " + (p.answer || (p.timed_out ? "timed out" : ""))); break;
    case "doom_loop_detected": item(ev, " " + p.tool_name + " ×" + p.repeat_count); break;
    case "doom_loop_intervened":
      item(ev, " " + p.tool_name + ": " + (p.timed_out ? "no answer in time" : p.choice) + " → " +
        String(p.intervention || "").replace("DOOM_LOOP_INTERVENTION_", "").toLowerCase());
      break;
    case "subagent_assigned":
      item(ev, " " + p.subagent_type + " → run " + p.child_run_id, p.description || p.prompt);
      break;
    case "memory_recalled": item(ev, recalledTitle(p), recalledDetail(p)); break;
    case "cost_update":
      $("u-in").textContent = String(p.total_input_tokens || 0);
      $("u-out").textContent = String(p.total_output_tokens || 0);
      // A call without a price leaves the total incomplete: say so rather
      // than show a total that looks whole (price_known is absent when false).
      if (!p.price_known && !(p.step_cost_usd > 0)) state.unpricedCalls++;
      $("u-cost").textContent = costText(Number(p.total_cost_usd || 0), state.unpricedCalls);
      break;
    case "step_start": item(ev, " step " + p.step_number); break;
    case "step_end": item(ev, " step " + p.step_number + " " + Math.round(p.duration_ms || 0) + " ms"); break;
    case "complete":
      $("final").textContent = p.content || state.answer;
      $("answer-box").hidden = false;
      item(ev, " final answer");
      break;
    case "error": item(ev, " " + (p.code || ""), p.message); break;
    case "cancelled": item(ev, " " + (p.reason || "")); break;
    case "stream_reset":
      item(ev, " events before seq " + p.earliest_seq + " are no longer retained (" + p.reason + ")");
      break;
  }
  if (TERMINAL.has(ev.type)) {
    state.ended = true;
    $("cancel").disabled = true;
    if (state.es) { state.es.close(); state.es = null; }
    setConn("ended");
    setPill($("run-state"), { complete: "RUN_STATE_COMPLETED", error: "RUN_STATE_FAILED", cancelled: "RUN_STATE_CANCELLED" }[ev.type]);
    refreshRuns();
  }
}

// A sub-agent's event mirrored into this run's stream (subagent_run_id is
// the child): shown indented under the child's short id. It never ends the
// run, asks here or touches the run's answer, usage or spans; a child's
// question is answered on the child's run.
function subAgentEvent(ev) {
  const p = ev[ev.type] || {};
  const child = ev.subagent_run_id;
  let title = "", detail;
  switch (ev.type) {
    case "cost_update": case "step_end": return;
    case "start": title = p.model || ""; break;
    case "step_start": title = "step " + p.step_number; break;
    case "thought": detail = p.thought; break;
    case "act": title = p.tool_name + " #" + p.tool_call_id; detail = JSON.stringify(p.tool_input || p.raw_arguments || {}, null, 2); break;
    case "observe": title = p.tool_name + " " + (p.success ? "ok" : "failed " + (p.error_code || "")); detail = p.observation; break;
    case "clarification_asked": title = (p.question || "") + " (answer on run " + child + ")"; break;
    case "decision_asked": title = (p.context || "") + " (answer on run " + child + ")"; break;
    case "complete": title = "finished"; detail = p.content; break;
    case "error": title = p.code || ""; detail = p.message; break;
    case "cancelled": title = p.reason || ""; break;
    case "subagent_assigned": title = p.subagent_type + " → run " + p.child_run_id; break;
    case "memory_recalled": title = recalledTitle(p); detail = recalledDetail(p); break;
  }
  const li = item(ev, " ↳ …" + child.slice(-8) + " " + title, detail);
  li.classList.add("sub");
  li.title = "sub-agent run " + child;
}

// A memory_recalled event as a line: how many entities the query
// recalled and the first names; the detail lists each with its type and
// fused score.
function recalledTitle(p) {
  const es = p.entities || [];
  const names = es.slice(0, 3).map((e) => e.name).join(", ");
  return " " + es.length + " for \"" + (p.query || "") + "\"" + (names ? ": " + names : "") + (es.length > 3 ? ", …" : "");
}

function recalledDetail(p) {
  return (p.entities || []).map((e) => e.name + " [" + (e.type || "") + "] " + Number(e.score || 0).toFixed(3)).join("\n");
}

function askQuestion(id, text, options) {
  state.pending = id;
  $("q-text").textContent = text || "";
  const box = $("q-options");
  box.replaceChildren();
  for (const label of options) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", () => submitAnswer(label));
    box.append(b);
  }
  $("question").hidden = false;
}

async function submitAnswer(answer) {
  if (!state.pending) return;
  try {
    await api("POST", "/v1/runs/" + encodeURIComponent(state.runId) + "/input", { input: { input_id: state.pending, answer } });
    $("question").hidden = true;
  } catch (e) { alert(e.message); }
}

$("answer-form").addEventListener("submit", (e) => { e.preventDefault(); submitAnswer($("answer").value); });

$("start-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const spec = { input: $("input").value };
  if ($("model").value) spec.model = $("model").value;
  if ($("max-steps").value) spec.max_steps = Number($("max-steps").value);
  $("start-error").hidden = true;
  try {
    const d = await api("POST", "/v1/runs", { spec });
    await refreshRuns();
    selectRun(d.run.run_id);
  } catch (err) {
    $("start-error").textContent = err.message;
    $("start-error").hidden = false;
  }
});

$("cancel").addEventListener("click", () => {
  if (state.runId) api("POST", "/v1/runs/" + encodeURIComponent(state.runId) + "/cancel", { reason: "cancelled from the dashboard" }).catch((e) => alert(e.message));
});

$("key-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  state.key = $("api-key").value;
  sessionStorage.setItem("baagent.key", state.key);
  if (await whoami()) { refreshRuns(); refreshSkills(); if (state.runId) selectRun(state.runId); }
});

// Skills: the tenant's skills by layer, uploads (a SKILL.md, or a zip,
// tar or tar.gz of the skill folder), deletion of tenant and project
// skills, and disabling a system skill for the tenant or a project.

const SKILL_UPLOAD_TYPES = [
  [".tar.gz", "application/gzip"], [".tgz", "application/gzip"], [".gz", "application/gzip"],
  [".zip", "application/zip"], [".tar", "application/x-tar"], [".md", "text/markdown"],
];

function skillUploadType(fileName) {
  const lower = fileName.toLowerCase();
  for (const [ext, type] of SKILL_UPLOAD_TYPES) if (lower.endsWith(ext)) return [ext, type];
  return ["", "application/octet-stream"];
}

function short(enumName, prefix) { return (enumName || "").replace(prefix, "").toLowerCase() || "-"; }

function skillsParams(extra) {
  const p = new URLSearchParams(extra || {});
  const project = $("skills-project").value.trim();
  if (project) p.set("project", project);
  const q = p.toString();
  return q ? "?" + q : "";
}

function setSkillsStatus(text, kind) {
  const el = $("skills-status");
  el.textContent = text;
  el.className = kind === "error" ? "error" : "muted";
  el.dataset.kind = kind || "";
}

async function refreshSkills() {
  const scope = $("skills-scope").value;
  const table = $("skills-table");
  table.setAttribute("aria-busy", "true");
  setSkillsStatus("Loading skills…", "loading");
  let data;
  try {
    data = await api("GET", "/v1/skills" + skillsParams(scope ? { scope } : {}));
  } catch (e) {
    $("skills-rows").replaceChildren();
    table.removeAttribute("aria-busy");
    setSkillsStatus("Could not list skills: " + e.message, "error");
    return;
  }
  const rows = [];
  for (const sk of data.skills || []) rows.push(skillRow(sk));
  $("skills-rows").replaceChildren(...rows);
  table.removeAttribute("aria-busy");
  const n = rows.length;
  setSkillsStatus(n ? n + (n === 1 ? " skill" : " skills") : "No skills in this scope.", n ? "ok" : "empty");
}

function cell(text, className) {
  const td = document.createElement("td");
  if (className) td.className = className;
  if (text !== undefined) td.textContent = text;
  return td;
}

function flag(text, kind) {
  const span = document.createElement("span");
  span.className = "pill flag-" + kind;
  span.textContent = text;
  return span;
}

function skillRow(sk) {
  const tr = document.createElement("tr");
  const layer = short(sk.scope, "SKILL_SCOPE_");
  tr.dataset.name = sk.name;
  tr.dataset.layer = layer;
  tr.dataset.disabled = String(!!sk.is_disabled);
  tr.dataset.overridden = String(!!sk.is_overridden);
  tr.dataset.revision = sk.revision || "";
  const name = cell();
  const code = document.createElement("code");
  code.textContent = sk.name;
  name.append(code);
  if (sk.description) name.title = sk.description;
  const flags = cell();
  if (sk.is_disabled) flags.append(flag("disabled", "disabled"));
  if (sk.is_overridden) flags.append(flag("overridden", "overridden"));
  if (!sk.is_disabled && !sk.is_overridden) flags.append(flag("active", "active"));
  const warnings = cell();
  if ((sk.warnings || []).length) {
    const ul = document.createElement("ul");
    for (const w of sk.warnings) { const li = document.createElement("li"); li.textContent = w; ul.append(li); }
    warnings.append(ul);
  } else {
    warnings.textContent = "-";
  }
  const actions = cell();
  if (layer === "system") {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.action = sk.is_disabled ? "enable" : "disable";
    b.textContent = sk.is_disabled ? "Enable" : "Disable";
    b.setAttribute("aria-label", b.textContent + " system skill " + sk.name);
    b.addEventListener("click", () => setSkillState(sk.name, !sk.is_disabled, b));
    actions.append(b);
  } else if (sk.source === "SKILL_SOURCE_STORE") {
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.action = "delete";
    b.textContent = "Delete";
    b.setAttribute("aria-label", "Delete " + layer + " skill " + sk.name);
    b.addEventListener("click", () => deleteSkill(sk, b));
    actions.append(b);
  }
  tr.append(name, cell(layer), cell(short(sk.source, "SKILL_SOURCE_")), cell(sk.revision || "-", "revision"), flags, warnings, actions);
  return tr;
}

async function setSkillState(name, disabled, button) {
  button.disabled = true;
  try {
    await api("PUT", "/v1/skills/" + encodeURIComponent(name) + "/state" + skillsParams(), { disabled });
    setSkillsStatus((disabled ? "Disabled " : "Enabled ") + name + ".", "ok");
  } catch (e) {
    button.disabled = false;
    setSkillsStatus("Could not " + (disabled ? "disable " : "enable ") + name + ": " + e.message, "error");
    return;
  }
  await refreshSkills();
}

async function deleteSkill(sk, button) {
  if (!confirm("Delete the " + short(sk.scope, "SKILL_SCOPE_") + " skill " + sk.name + "?")) return;
  button.disabled = true;
  // If-Match: only the revision shown is deleted, not one uploaded since.
  const opts = sk.revision ? { headers: { "If-Match": '"' + sk.revision + '"' } } : {};
  try {
    await api("DELETE", "/v1/skills/" + encodeURIComponent(sk.name) + skillsParams(), null, opts);
  } catch (e) {
    button.disabled = false;
    setSkillsStatus("Could not delete " + sk.name + ": " + e.message, "error");
    return;
  }
  await refreshSkills();
  setSkillsStatus("Deleted " + sk.name + ".", "ok");
}

// A SKILL.md names its skill in its front matter; an archive is named
// after its file until the user says otherwise.
$("skill-file").addEventListener("change", async () => {
  const f = $("skill-file").files[0];
  if (!f) return;
  const [ext] = skillUploadType(f.name);
  let name = f.name.slice(0, f.name.length - ext.length).toLowerCase();
  if (ext === ".md") {
    const m = /^---\r?\n[\s\S]*?^name:\s*["']?([a-z0-9-]+)["']?\s*$/m.exec(await f.text());
    if (m) name = m[1];
  }
  if (name && name !== "skill") $("skill-name").value = name;
});

$("skill-upload").addEventListener("submit", async (e) => {
  e.preventDefault();
  const f = $("skill-file").files[0];
  const name = $("skill-name").value.trim();
  if (!f || !name) return;
  const [, type] = skillUploadType(f.name);
  const button = $("skill-upload-button");
  button.disabled = true;
  setSkillsStatus("Uploading " + name + "…", "loading");
  try {
    const d = await api("PUT", "/v1/skills/" + encodeURIComponent(name) + skillsParams(), null, { raw: f, type });
    const sk = d.skill || {};
    const warn = (sk.warnings || []).length ? " Warnings: " + sk.warnings.join("; ") : "";
    await refreshSkills();
    setSkillsStatus((d.replaced ? "Replaced " : "Uploaded ") + name + " (revision " + (sk.revision || "-") + ")." + warn, "ok");
    $("skill-upload").reset();
  } catch (err) {
    setSkillsStatus("Could not upload " + name + ": " + err.message, "error");
  } finally {
    button.disabled = false;
  }
});

$("skills-refresh").addEventListener("click", refreshSkills);
$("skills-scope").addEventListener("change", refreshSkills);
$("skills-project").addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); refreshSkills(); } });

(async function main() {
  if (await whoami()) { await refreshRuns(); refreshSkills(); }
  const fromHash = decodeURIComponent(location.hash.slice(1));
  if (fromHash) selectRun(fromHash);
  setInterval(refreshRuns, 3000);
})();

// costText is the dashboard's run cost: the priced calls' dollars, with
// "unknown" for the part no price covers.
function costText(usd, unpriced) {
  if (!unpriced) return usd.toFixed(4);
  return usd > 0 ? usd.toFixed(4) + " + unknown" : "unknown";
}
