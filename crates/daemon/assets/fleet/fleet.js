// The fleet console's page: reads /api/approvals, /api/machines, /api/sessions and
// /api/position (how many Events it is behind) every few seconds (the console follows the
// stream, so each read is current), a clicked session's timeline from /api/timeline, and
// answers approvals through /api/act, showing the owning host's ack, and what one asks through
// /api/asks when its button is clicked. Text only goes in through
// textContent.

import { cost } from "./view.js";

const $ = (id) => document.getElementById(id);
const REFRESH_MS = 2000;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return e;
}

function ago(time, now) {
  const t = Date.parse(time);
  if (Number.isNaN(t)) return "-";
  const s = Math.max(0, Math.round(((now ? Date.parse(now) : Date.now()) - t) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

// "1 run", "2 runs": a number with its noun.
function count(n, noun) {
  return `${n ?? 0} ${noun}${n === 1 ? "" : "s"}`;
}

// An Event's time as the reader's local clock (the full time on hover).
function clock(time) {
  const t = new Date(time);
  return Number.isNaN(t.getTime()) ? String(time) : t.toLocaleTimeString();
}

async function get(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  if (r.status === 401) { location.reload(); throw new Error("signed out"); }
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
  return r.json();
}

function say(text, ok) {
  const p = el("p", { class: ok ? "ok" : "bad" }, text);
  $("feedback").prepend(p);
  while ($("feedback").children.length > 5) $("feedback").lastChild.remove();
}

async function act(a, body, buttons) {
  buttons.forEach((b) => (b.disabled = true));
  try {
    const r = await fetch("/api/act", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ host: a.host, session: a.session, request: a.id, ...body }),
    });
    const v = await r.json();
    if (!r.ok) say(`${body.action} ${a.short} on ${a.host}: not sent: ${v.detail ?? v.error ?? r.status}`, false);
    else if (v.ack?.type === "control.accepted" && v.effect === "nothing") say(`${body.action} ${a.short} on ${a.host}: ${v.detail}`, false);
    else if (v.ack?.type === "control.accepted") say(`${body.action} ${a.short} on ${a.host}: accepted${v.effect ? ` → ${v.effect}` : ""}`, true);
    else say(`${body.action} ${a.short} on ${a.host}: rejected (${v.ack?.data?.reason ?? "unknown"})`, false);
  } catch (e) {
    say(`${body.action} ${a.short} on ${a.host}: ${e.message}`, false);
  } finally {
    buttons.forEach((b) => (b.disabled = false));
    refresh();
  }
}

// What each approval asks, once asked (kept across refreshes; the page asks only on a click).
const asked = new Map();

async function ask(a, box, button) {
  button.disabled = true;
  const q = new URLSearchParams({ host: a.host, session: a.session, request: a.id });
  try {
    const r = await fetch(`/api/asks?${q}`, { credentials: "same-origin" });
    const v = await r.json();
    asked.set(a.id, r.ok ? { lines: v.lines } : { why: v.detail ?? v.error ?? `HTTP ${r.status}` });
  } catch (e) {
    asked.set(a.id, { why: e.message });
  }
  button.disabled = false;
  showAsked(a, box);
}

function showAsked(a, box) {
  const got = asked.get(a.id);
  if (!got) return;
  box.replaceChildren(got.lines !== undefined
    ? el("pre", { class: "command asks" }, got.lines)
    : el("p", { class: "muted" }, `what it asks is not shown: ${got.why}`));
}

function renderApprovals(v) {
  const list = $("approval-list");
  list.replaceChildren();
  $("approval-count").textContent = v.approvals.length ? `(${v.approvals.length})` : "";
  $("no-approvals").hidden = v.approvals.length > 0;
  for (const a of v.approvals) {
    const what = el("div", { class: "what" }, `${a.host} · ${a.tool ?? a.kind} · ${a.short}`);
    const facts = el("div", { class: "muted" }, `session ${a.session} · waiting ${ago(a.time, v.now)}`
      + (a.workspace ? ` · ${a.workspace}` : "") + (a.policy ? ` · policy ${a.policy.answer} (${a.policy.rule})` : ""));
    const row = el("div", { class: "row" });
    if (a.answerable) {
      const yes = el("button", { class: "approve", type: "button" }, "Approve");
      const no = el("button", { class: "deny", type: "button" }, "Deny");
      yes.onclick = () => act(a, { action: "approve" }, [yes, no]);
      no.onclick = () => act(a, { action: "deny" }, [yes, no]);
      row.append(yes, no);
    } else {
      row.append(el("span", { class: "muted" }, "answer in Cline: control is off on that machine"));
    }
    const box = el("div", { class: "asked" });
    const show = el("button", { class: "asks", type: "button" }, "What it asks");
    show.onclick = () => ask(a, box, show);
    row.append(show);
    showAsked(a, box);
    const li = el("li", {}, what, facts);
    if (a.prompt) li.append(el("pre", { class: "command" }, a.prompt));
    li.append(box, row);
    list.append(li);
  }
}

function renderMachines(v) {
  const rows = $("machine-rows");
  rows.replaceChildren();
  for (const m of v.machines) {
    const r = m.record;
    const sinks = r ? Object.entries(r.sinks ?? {}).map(([k, s]) => `${k}=${s}`).join(", ") : "-";
    const spool = r ? (r.spool?.files ? `${r.spool.files} (${r.spool.bytes} bytes)` : "0") : "-";
    rows.append(el("tr", {},
      el("td", {}, m.host),
      el("td", {}, el("span", { class: `badge status-${m.status === "online" ? "accepted" : m.status === "offline" ? "failed" : "pending"}` }, m.status)),
      el("td", {}, r ? `${ago(r.time, v.now)} ago` : "-"),
      el("td", {}, r?.version ?? "-"),
      el("td", {}, r ? (r.control ? "on" : "off") : "-"),
      el("td", { class: "num" }, String(r ? r.sessions?.live ?? 0 : m.sessions_live)),
      el("td", { class: "num" }, String(m.waiting)),
      el("td", {}, sinks),
      el("td", {}, spool)));
  }
}

function renderSessions(v) {
  const select = $("host");
  const chosen = select.value;
  const known = [...select.options].map((o) => o.value);
  for (const h of v.hosts) if (!known.includes(h)) select.append(el("option", { value: h }, h));
  $("count").textContent = `(${v.matching} of ${v.total})`;
  const rows = $("session-rows");
  rows.replaceChildren();
  for (const s of v.sessions) {
    const tokens = (s.input_tokens ?? 0) + (s.cache_read_tokens ?? 0) + (s.output_tokens ?? 0);
    rows.append(el("tr", {},
      el("td", {}, s.host),
      el("td", { class: "mono" }, sessionButton(s.host, s.session)),
      el("td", {}, el("span", { class: `badge state-${s.state}` }, s.denied_by ? `${s.state}, denied by ${s.denied_by}` : s.state)),
      el("td", {}, s.workspace ?? "-"),
      el("td", {}, `${ago(s.last)} ago`),
      el("td", { class: "num" }, String(s.runs)),
      el("td", { class: "num" }, String(s.tool_calls)),
      el("td", { class: "num" }, String(s.failures)),
      el("td", { class: "num" }, tokens ? String(tokens) : "-"),
      el("td", { class: "num" }, cost(s)),
      el("td", {}, s.model ?? "-")));
  }
  select.value = chosen;
}

// The session whose timeline is shown ({host, session}), read again at each refresh.
let open = null;

function sessionButton(host, session) {
  const b = el("button", { class: "link", type: "button" }, session);
  b.onclick = () => { open = { host, session }; showTimeline(); };
  return b;
}

async function showTimeline() {
  if (!open) return;
  const { host, session } = open;
  const q = `host=${encodeURIComponent(host)}&session=${encodeURIComponent(session)}`;
  $("detail").hidden = false;
  $("detail-name").textContent = `${session} on ${host}`;
  try {
    const t = await get(`/api/timeline?${q}`);
    const s = t.summary;
    $("detail-facts").textContent = [s.state, count(s.runs, "run"), count(s.tool_calls, "tool call"),
      count(s.failures, "failure"), count(s.denied ?? 0, "denied"), `model ${s.model ?? "-"}`].join(" · ");
    // Which guardrail acted, and why: the rule, its line, its reason (the operator's words).
    const guard = (e) => ["by", "rule", "line", "budget", "reason"]
      .filter((k) => e.detail && e.detail[k] != null && typeof e.detail[k] !== "object")
      .map((k) => ` ${k}=${e.detail[k]}`).join("");
    $("timeline").replaceChildren(...t.timeline.map((e) => el("li", { class: `entry kind-${e.kind}` },
      el("time", { datetime: e.time, title: e.time }, clock(e.time)),
      ` ${e.kind} ${e.name} ${e.status}` + (e.duration_ms != null ? ` (${e.duration_ms} ms)` : "") + guard(e))));
    $("earlier").textContent = t.earlier
      ? `${t.earlier} earlier entries not shown (aep-cline fleet show ${session} --host ${host} prints them all)` : "";
  } catch (e) {
    $("detail-facts").textContent = `cannot show it: ${e.message}`;
  }
}

async function refresh() {
  const host = encodeURIComponent($("host").value);
  const ended = $("show-ended").checked ? "" : "&ended=0";
  try {
    const [a, m, s, p] = await Promise.all([
      get("/api/approvals"), get("/api/machines"), get(`/api/sessions?host=${host}${ended}`), get("/api/position"),
    ]);
    renderApprovals(a);
    renderMachines(m);
    renderSessions(s);
    if (!document.body.dataset.firstPaintMs) {
      // Navigation to the first rows drawn, for the benchmarks (bench/fleet_page.sh).
      document.body.dataset.firstPaintMs = String(Math.round(performance.now()));
    }
    showTimeline();
    const behind = p.behind ? `, ${p.behind} Events behind` : "";
    $("conn").textContent = `updated ${new Date().toLocaleTimeString()}${behind}`;
    $("conn").classList.remove("down");
  } catch (e) {
    $("conn").textContent = `not current: ${e.message}`;
    $("conn").classList.add("down");
  }
}

$("host").onchange = refresh;
$("show-ended").onchange = refresh;
refresh();
setInterval(refresh, REFRESH_MS);
