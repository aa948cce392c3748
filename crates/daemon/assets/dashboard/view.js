// Formatting and DOM building for the dashboard. Data is only ever put into the page as text
// (textContent), never as HTML, so nothing a log holds can run in the page.

/** An element with attributes and children (strings become text nodes). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/**
 * The session a location hash links to: `{ id }` for `#/s/<id>`, `{ id: null }` for no session
 * link, `{ bad }` for a link whose id is not valid percent-encoding (`#/s/%E0`: no session has
 * it; decodeURIComponent would throw).
 */
export function linkedSession(hash) {
  const m = /^#\/s\/(.+)$/.exec(hash);
  if (!m) return { id: null };
  try {
    return { id: decodeURIComponent(m[1]) };
  } catch {
    return { id: null, bad: m[1] };
  }
}

/** `5s ago`, `3m ago`, `2h ago`, `4d ago`. */
export function ago(time, now = Date.now()) {
  const t = Date.parse(time);
  if (Number.isNaN(t)) return '-';
  const s = Math.max(0, Math.floor((now - t) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86400)}d ago`;
}

/** `MM-DD HH:MM` (UTC) of an Event time. */
export function when(time) {
  return typeof time === 'string' && time.length >= 16 ? time.slice(5, 16).replace('T', ' ') : '-';
}

/** `HH:MM:SS` (UTC). */
export function clock(time) {
  return typeof time === 'string' && time.length >= 19 ? time.slice(11, 19) : '-';
}

/** `812ms`, `1.5s`, `2m04s`. */
export function millis(ms) {
  if (typeof ms !== 'number') return '';
  if (ms < 1000) return `${ms}ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)}s`;
  return `${Math.floor(ms / 60000)}m${String(Math.floor(ms / 1000) % 60).padStart(2, '0')}s`;
}

/**
 * A token count: exact under a million, then three significant digits with M or B
 * (views/numbers.rs writes them the same way; tests/data/numbers.json holds both to it).
 */
export function count(n) {
  if (typeof n !== 'number') return '-';
  if (n < 1e6) return String(n);
  const [v, unit] = n < 1e9 ? [n / 1e6, 'M'] : [n / 1e9, 'B'];
  return `${v.toFixed(v < 9.995 ? 2 : v < 99.95 ? 1 : 0)}${unit}`;
}

/** Every token once: input (uncached, cache writes included), cache reads, output. */
export function tokens(s) {
  if (s.input_tokens === undefined && s.output_tokens === undefined) return '-';
  return count((s.input_tokens || 0) + (s.cache_read_tokens || 0) + (s.output_tokens || 0));
}

/**
 * Money: two decimals from a cent up, four significant digits under a cent, `$1.23` for US
 * dollars and `1.23 EUR` otherwise (as views/numbers.rs).
 */
export function money(amount, currency) {
  const abs = Math.abs(amount);
  const decimals = abs === 0 || abs >= 0.01 || !Number.isFinite(abs)
    ? 2 : Math.min(15, Math.max(2, 3 - Math.floor(Math.log10(abs))));
  const n = abs.toFixed(decimals);
  const sign = amount < 0 ? '-' : '';
  return currency === 'USD' ? `${sign}$${n}` : `${sign}${n} ${currency}`;
}

/** A session's spend, with what could not be priced said. */
export function cost(s) {
  if (!s.cost) return s.unpriced_runs ? 'no price' : '-';
  return money(s.cost.total, s.cost.currency) + (s.unpriced_runs ? ' + unpriced' : '');
}

export function stateLabel(s) {
  const state = s.state === 'waiting' ? `waiting (${s.pending.length})` : s.state;
  // The guardrail that acted, where people look first.
  return s.denied_by ? `${state}, denied by ${s.denied_by}` : state;
}

/** One value of an entry's detail, as text. */
export function detailText(key, v) {
  if (v === null || v === undefined) return '';
  if (key.endsWith('_ms') && typeof v === 'number') return millis(v);
  if (key === 'cost' && typeof v === 'object') return money(v.total, v.currency);
  if (Array.isArray(v)) return v.join(', ');
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** Content as text: strings as they are, anything else as JSON. */
export function contentText(v) {
  return typeof v === 'string' ? v : JSON.stringify(v, null, 2);
}

const DETAIL_SHOWN = ['by', 'rule', 'line', 'budget', 'reason', 'policy_rule', 'error_type', 'option', 'via', 'waited_ms', 'short', 'delivery',
  'resolution', 'trigger', 'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens', 'cost', 'kind', 'strategy'];

/** One timeline entry as a list item. */
export function entryItem(e) {
  const facts = [];
  for (const k of DETAIL_SHOWN) {
    if (e.detail && e.detail[k] !== undefined) {
      facts.push(`${k.replace('gen_ai.usage.', '').replace(/_ms$/, '')}=${detailText(k, e.detail[k])}`);
    }
  }
  const li = el('li', { class: e.run && e.kind !== 'run' ? 'in-run' : '', 'data-kind': e.kind, 'data-status': e.status },
    el('span', { class: 't mono' }, clock(e.time)),
    el('span', { class: 'kind' }, e.kind),
    el('span', { class: 'name' }, e.name),
    el('span', { class: `status-${e.status}` }, e.status),
    e.duration_ms !== undefined ? ` ${millis(e.duration_ms)}` : '',
    facts.length ? el('span', { class: 'muted' }, ` ${facts.join(' ')}`) : '');
  for (const [k, v] of Object.entries(e.content || {})) {
    li.append(el('div', { class: 'content mono' }, `${k}: ${contentText(v)}`));
  }
  return li;
}

/**
 * What a pending approval asks (the daemon's local view: `detail`), as a block: each command,
 * each file with the diff summary, the other arguments; or why it cannot be shown.
 */
export function askedBlock(d) {
  if (!d) return '';
  const box = el('div', { class: 'asked' });
  for (const c of d.commands || []) box.append(el('pre', { class: 'command mono' }, c));
  const diff = d.diff ? ` +${d.diff.added} \u2212${d.diff.removed} lines` : '';
  for (const [i, f] of (d.files || []).entries()) {
    box.append(el('div', { class: 'file' }, el('span', { class: 'mono' }, f), i === 0 && diff ? el('span', { class: 'diff' }, diff) : ''));
  }
  if (!(d.files || []).length && diff) box.append(el('div', { class: 'diff' }, diff.trim()));
  for (const a of d.args || []) box.append(el('div', { class: 'arg mono' }, `${a.name}: ${a.value}`));
  if (d.more) box.append(el('div', { class: 'muted' }, `and ${d.more} more`));
  if (d.unreadable) box.append(el('div', { class: 'muted' }, d.unreadable));
  return box.childNodes.length ? box : '';
}
