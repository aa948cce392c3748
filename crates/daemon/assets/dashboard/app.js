// The dashboard: the session list and pending approvals, live; a session's timeline; the
// buttons that answer, cancel and send input (only where control is on and the session is
// live). Everything comes from the daemon's /api routes; the login cookie rides along.
import { el, ago, when, tokens, cost, stateLabel, entryItem, linkedSession, askedBlock } from './view.js';

const PAGE = 100;
const $ = (id) => document.getElementById(id);

const state = {
  control: false,
  sessions: new Map(), // session id -> summary (the rows loaded)
  order: [],           // the ids shown, in order
  total: 0,
  matching: 0,
  approvals: [],
  about: new Map(),    // session id -> { title, folder } (the daemon's local view)
  limit: PAGE,
  open: null,          // the session whose timeline is shown
  openSummary: null,
  firstPaint: null,
};

// The time left before the policy answers a request nobody answered (`expires_at`).
function timeLeft(x) {
  const s = Math.max(0, Math.round((Date.parse(x.at) - Date.now()) / 1000));
  const left = s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m` : `${Math.floor(s / 3600)}h`;
  return `${x.answer} on timeout in ${left}`;
}

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: 'same-origin', ...options });
  if (response.status === 401) {
    signedOut();
    throw new Error('signed out');
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || `HTTP ${response.status}`);
  return body;
}

function signedOut() {
  $('conn').textContent = 'signed out: run `aep-cline open` again';
  $('conn').classList.add('down');
}

// ---- the list ----

async function loadList() {
  const ended = $('show-ended').checked ? 1 : 0;
  const body = await api(`/api/sessions?limit=${state.limit}&ended=${ended}`);
  state.control = body.control;
  state.total = body.total;
  state.matching = body.matching;
  state.sessions = new Map(body.sessions.map((s) => [s.session, s]));
  state.order = body.sessions.map((s) => s.session);
  state.approvals = body.approvals;
  learn(body.about);
  render();
  if (state.firstPaint === null) {
    state.firstPaint = performance.now();
    document.body.dataset.ready = '1';
    document.body.dataset.firstPaintMs = String(Math.round(state.firstPaint));
  }
}

// Titles and folders come beside the summaries (never in them: the logs do not hold them).
function learn(about) {
  for (const [id, a] of Object.entries(about || {})) state.about.set(id, a);
}

function row(s) {
  const a = state.about.get(s.session) || {};
  return el('tr', { 'data-session': s.session },
    el('td', {}, el('a', { href: `#/s/${encodeURIComponent(s.session)}`, class: 'mono' }, s.session),
      a.title ? el('div', { class: 'title' }, a.title) : ''),
    el('td', {}, el('span', { class: `badge state-${s.state}` }, stateLabel(s))),
    el('td', { class: 'mono', title: a.folder ? s.workspace : undefined }, a.folder || s.workspace || '-'),
    el('td', {}, when(s.started)),
    el('td', { title: s.last }, ago(s.last)),
    el('td', { class: 'num' }, s.runs),
    el('td', { class: 'num' }, s.tool_calls),
    el('td', { class: 'num' }, s.failures),
    el('td', { class: 'num' }, tokens(s)),
    el('td', { class: 'num' }, cost(s)),
    el('td', {}, s.model || '-'));
}

// Rows are kept by session id and redrawn only when their summary changed, so a live update
// never takes away the row (or the focus) a person is on.
const rowCache = new Map(); // session id -> { key, tr }
function renderRows() {
  const body = $('session-rows');
  const wanted = [];
  for (const id of state.order) {
    const s = state.sessions.get(id);
    if (!s) continue;
    const key = JSON.stringify(s) + JSON.stringify(state.about.get(id) || {}) + ago(s.last);
    let cached = rowCache.get(id);
    if (!cached) {
      cached = { key, tr: row(s) };
      rowCache.set(id, cached);
    } else if (cached.key !== key) {
      cached.tr.replaceChildren(...row(s).childNodes);
      cached.key = key;
    }
    wanted.push(cached.tr);
  }
  const keep = new Set(wanted);
  for (const [id, c] of rowCache) if (!keep.has(c.tr)) { c.tr.remove(); rowCache.delete(id); }
  wanted.forEach((tr, i) => { if (body.children[i] !== tr) body.insertBefore(tr, body.children[i] || null); });
}

function render() {
  const n = state.approvals.length;
  document.title = n ? `(${n}) waiting · aep-cline` : 'aep-cline';
  $('control').textContent = state.control ? 'control on' : 'control off (hub approvals answered in Cline)';
  $('control').title = state.control
    ? 'Approvals can be answered and runs cancelled from here'
    : 'Start the daemon with AEP_CLINE_HUB_CONTROL=1 to answer approvals and cancel runs from here';
  renderApprovals();
  renderRows();
  $('count').textContent = `${state.order.length} of ${state.matching}` + (state.matching < state.total ? ` (${state.total} with ended)` : '');
  $('empty').hidden = state.total > 0;
  $('more').hidden = state.order.length >= state.matching;
  if (state.open) renderFacts();
}

// Approvals are kept by request id: a live update never clears an answer being typed.
const approvalCache = new Map(); // request id -> { key, li }
function renderApprovals() {
  const list = $('approval-list');
  const items = state.approvals.map((p) => {
    const live = state.sessions.get(p.session)?.state !== 'ended';
    const key = `${state.control}/${p.held}/${p.answerable}/${live}/${JSON.stringify(p.detail || null)}`;
    const cached = approvalCache.get(p.id);
    if (cached && cached.key === key) {
      cached.li.querySelector('.waited').textContent = ` · waiting ${ago(p.time).replace(' ago', '')} · id `;
      return cached.li;
    }
    const li = approvalItem(p, live);
    // What changed (answerable, the detail) is drawn anew: the old item goes, or it would stay
    // in the list after its request was answered.
    if (cached) cached.li.remove();
    approvalCache.set(p.id, { key, li });
    return li;
  });
  const keep = new Set(items);
  for (const [id, c] of approvalCache) if (!keep.has(c.li)) { c.li.remove(); approvalCache.delete(id); }
  items.forEach((li, i) => { if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null); });
  $('approvals').hidden = items.length === 0;
  $('approvals-h').textContent = items.length === 1 ? '1 approval waiting for you' : `${items.length} approvals waiting for you`;
}

function approvalItem(p, live) {
  // A call the daemon holds at its hook (an ask rule) is answered here, control on or off.
  const canAnswer = (state.control || p.held) && p.answerable && live;
  const item = el('li', { 'data-request': p.id },
    el('div', {}, el('span', { class: 'what' }, `${p.tool || p.kind} `), 'asks in ',
      el('a', { href: `#/s/${encodeURIComponent(p.session)}`, class: 'mono' }, p.session),
      el('span', { class: 'muted waited' }, ` · waiting ${ago(p.time).replace(' ago', '')} · id `),
      el('span', { class: 'mono' }, p.short)),
    // As text, its lines kept (pre.command): the daemon escaped what would hide (\u{202e}).
    p.detail ? askedBlock(p.detail) : (p.prompt ? el('pre', { class: 'command mono' }, p.prompt) : ''),
    p.policy ? el('div', { class: 'muted policy' }, `policy rule ${p.policy.rule}: ${p.policy.answer}`) : '',
    p.expires ? el('div', { class: 'muted expires', 'data-at': p.expires.at }, timeLeft(p.expires)) : '');
  if (canAnswer) {
    const text = el('input', { type: 'text', 'aria-label': `Answer ${p.short} in words`, placeholder: 'or answer in words (other text denies, as the reason)', size: 44 });
    item.append(el('div', { class: 'row' },
      el('button', { type: 'button', class: 'approve', onclick: (ev) => act(ev.target, `Approve ${p.short}`, { action: 'approve', session: p.session, request: p.id }) }, 'Approve'),
      el('button', { type: 'button', class: 'deny', onclick: (ev) => act(ev.target, `Deny ${p.short}`, { action: 'deny', session: p.session, request: p.id }) }, 'Deny'),
      el('form', { class: 'row', onsubmit: (ev) => { ev.preventDefault(); if (text.value.trim()) act(ev.submitter, `Answer ${p.short}`, { action: 'answer', session: p.session, request: p.id, text: text.value }); } },
        text, el('button', { type: 'submit' }, 'Send answer'))));
  } else {
    item.append(el('div', { class: 'muted' }, state.control || p.held ? 'Answer it in Cline.' : 'Answer it in Cline (control is off here).'));
  }
  return item;
}

// ---- a session ----

async function loadSession(id) {
  const body = await api(`/api/sessions/${encodeURIComponent(id)}`);
  if (state.open !== id) return;
  state.control = body.control;
  state.openSummary = body.summary;
  if (body.about) state.about.set(id, body.about);
  renderFacts();
  $('timeline').replaceChildren(...body.timeline.map(entryItem));
  $('earlier').hidden = body.earlier === 0;
  $('earlier').textContent = `${body.earlier} earlier entries not shown (aep-cline show ${id} prints them all)`;
}

function renderFacts() {
  const s = state.sessions.get(state.open) || state.openSummary;
  if (!s) return;
  state.openSummary = s;
  $('session-h').textContent = `Session ${s.session}`;
  const a = state.about.get(s.session) || {};
  const facts = [...(a.title ? [['Title', a.title]] : []), ...(a.folder ? [['Folder', a.folder]] : []),
    ['State', stateLabel(s)], ['Workspace', s.workspace || '-'], ['Started', `${when(s.started)} UTC`],
    ['Last moved', ago(s.last)], ['Runs', s.runs], ['Tool calls', s.tool_calls], ['Failures', s.failures],
    ['Denied', s.denied || 0], ['Cancelled', s.cancelled || 0],
    ['Tokens', tokens(s)], ['Cost', cost(s)], ['Model', s.model || '-']];
  $('facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, String(v))]));
  renderActions(s);
}

function renderActions(s) {
  const live = s.state !== 'ended';
  const box = $('actions');
  // Ending a stuck session touches only the daemon's record, so it is offered with control off too.
  const end = () => el('div', {}, el('button', { type: 'button', class: 'end', title: 'Only when its Cline is gone: the daemon could not tell',
    onclick: (ev) => act(ev.target, 'End the session', { action: 'end', session: s.session }) }, 'End this session (stuck open)'));
  if (!state.control || !live) {
    box.dataset.session = '';
    box.replaceChildren(el('p', { class: 'muted' }, !live ? 'This session has ended.'
      : 'Observe only: start the daemon with AEP_CLINE_HUB_CONTROL=1 to cancel runs and send input from here.'), live ? end() : '');
    return;
  }
  if (box.dataset.session === s.session && box.dataset.running === String(Boolean(s.active_run))) return;
  box.dataset.session = s.session;
  box.dataset.running = String(Boolean(s.active_run));
  const text = el('textarea', { id: 'send-text', 'aria-label': 'Input to send to the session', maxlength: 4000 });
  const steer = el('input', { type: 'checkbox', id: 'send-steer' });
  box.replaceChildren(
    s.active_run ? el('div', {}, el('button', { type: 'button', class: 'cancel', onclick: (ev) => act(ev.target, 'Cancel the run', { action: 'cancel', session: s.session }) }, 'Cancel the running run')) : '',
    el('form', { onsubmit: (ev) => { ev.preventDefault(); if (text.value.trim()) act(ev.submitter, steer.checked ? 'Steer' : 'Send input', { action: 'send', session: s.session, text: text.value, steer: steer.checked }).then((ok) => { if (ok) text.value = ''; }); } },
      el('label', { for: 'send-text' }, 'Send input'), text,
      el('label', { class: 'check' }, steer, ' steer the running run (otherwise queued after it)'),
      el('div', {}, el('button', { type: 'submit' }, 'Send'))), end());
}

// ---- actions: the ack first, then the outcome ----

function say(text, kind = '') {
  const p = el('p', { class: kind }, text);
  $('feedback').prepend(p);
  while ($('feedback').children.length > 6) $('feedback').lastChild.remove();
  return p;
}

async function act(button, what, body) {
  if (button) button.disabled = true;
  const line = say(`${what}: sending…`);
  line.dataset.pending = '1';
  try {
    const r = await api('/api/act', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (!r.ack) {
      line.textContent = `${what}: no ack yet; it may still be decided (the timeline will show it)`;
      return false;
    }
    const data = r.ack.data || {};
    if (r.ack.type === 'control.accepted' && r.effect === 'nothing') {
      // A cancel the hub took but the run outlived (its client may be gone): say so, and what to do.
      line.textContent = `${what}: ${r.detail || 'accepted, but nothing happened: the run is still open'}`;
      line.className = 'bad';
      return false;
    }
    if (r.ack.type === 'control.accepted') {
      const then = r.outcome ? ` → ${describe(r.outcome)}` : r.effect ? ` → ${r.effect}` : ' (the outcome will show in the timeline)';
      line.textContent = `${what}: control.accepted${then}`;
      line.className = 'ok';
      return true;
    }
    // The logged detail, else the daemon's words for this machine's sender (r.detail).
    const why = data.detail || r.detail;
    line.textContent = `${what}: control.rejected (${data.reason || 'no reason'})` + (why ? `: ${why}` : '');
    line.className = 'bad';
    return false;
  } catch (e) {
    line.textContent = `${what}: not sent: ${e.message}`;
    line.className = 'bad';
    return false;
  } finally {
    delete line.dataset.pending;
    if (button) button.disabled = false;
  }
}

function describe(e) {
  const d = e.data || {};
  if (e.type === 'attention.answered') return `${e.type} (${d.answer?.option || 'answered'} via ${d.via || 'control'}${d.by === 'policy' ? `, by policy rule ${d['cline.policy_rule']}` : ''})`;
  if (e.type === 'run.cancelled') return `${e.type} (by ${d.by})`;
  if (e.type === 'session.ended') return `${e.type} (${d.reason || 'normal'})`;
  if (e.type === 'x.cline.input.sent') return `${e.type} (${d.delivery})`;
  return e.type;
}

// ---- routing and the live feed ----

function route() {
  const link = linkedSession(location.hash);
  // What an action said belongs to the page it was taken on: another page starts clean
  // (an action still on its way keeps its line, to say how it ended).
  if (link.id !== state.open) {
    for (const p of [...$('feedback').children]) if (!p.dataset.pending) p.remove();
  }
  state.open = link.id;
  if (link.bad !== undefined) say(`no such session: the link #/s/${link.bad} names none`, 'bad');
  $('list-view').hidden = Boolean(state.open);
  $('session-view').hidden = !state.open;
  if (state.open) {
    $('actions').dataset.session = '';
    $('timeline').replaceChildren();
    loadSession(state.open).catch((e) => say(`cannot load the session: ${e.message}`, 'bad'));
  }
}

let timelineTimer = null;
function refreshOpen() {
  if (!state.open || timelineTimer) return;
  timelineTimer = setTimeout(() => {
    timelineTimer = null;
    loadSession(state.open).catch(() => {});
  }, 250);
}

let renderQueued = false;
function renderSoon() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

function follow() {
  const source = new EventSource('/api/live');
  source.addEventListener('open', () => { $('conn').textContent = 'live'; $('conn').classList.remove('down'); });
  source.addEventListener('reset', () => { loadList().catch(() => {}); refreshOpen(); });
  source.addEventListener('session', (ev) => {
    let update;
    try {
      update = JSON.parse(ev.data);
    } catch (e) {
      console.warn('a live update this page cannot read, skipped', e);
      return; // the next update, or a reload, brings the state
    }
    const { summary, approvals } = update;
    state.approvals = approvals;
    learn(update.about);
    // The most recently moved first: a session that moves comes to the top, and a page that is
    // full lets its last row go.
    if (!state.sessions.has(summary.session)) {
      state.order.unshift(summary.session);
      state.matching += 1;
      state.total += 1;
    }
    state.sessions.set(summary.session, summary);
    state.order.sort((a, b) => (state.sessions.get(b).last || '').localeCompare(state.sessions.get(a).last || ''));
    for (const id of state.order.splice(state.limit)) state.sessions.delete(id);
    if (summary.session === state.open) { state.openSummary = summary; refreshOpen(); }
    renderSoon();
  });
  source.addEventListener('error', () => {
    $('conn').textContent = 'reconnecting…';
    $('conn').classList.add('down');
    if (source.readyState === EventSource.CLOSED) {
      // The daemon restarted or refused: check the sign-in, then follow again.
      setTimeout(() => api('/api/status').then(() => { follow(); loadList(); }).catch(() => setTimeout(follow, 2000)), 1000);
    }
  });
}

function theme() {
  const saved = localStorage.getItem('aep-cline-theme');
  if (saved) document.documentElement.dataset.theme = saved;
  $('theme').addEventListener('click', () => {
    const dark = document.documentElement.dataset.theme
      ? document.documentElement.dataset.theme === 'dark'
      : matchMedia('(prefers-color-scheme: dark)').matches;
    const next = dark ? 'light' : 'dark';
    document.documentElement.dataset.theme = next;
    localStorage.setItem('aep-cline-theme', next);
  });
}

theme();
$('show-ended').addEventListener('change', () => { state.limit = PAGE; loadList().catch(() => {}); });
$('more').addEventListener('click', () => { state.limit += PAGE; loadList().catch(() => {}); });
window.addEventListener('hashchange', route);
setInterval(renderSoon, 15000); // the "ago" columns
loadList().then(route).catch((e) => say(`cannot load the sessions: ${e.message}`, 'bad'));
follow();
