//! Usage at the edge: what a hook's run (or session) consumed, read from Cline's own session
//! store (`cline_usage`) in the folder the hook's environment names ([`Firing::cline_data`]),
//! and handed to the pure mapping as data (`cline_hooks::usage`).
//!
//! A Cline 2.x task is read from the same data folder's `tasks/<id>/` (its `ui_messages.json`,
//! `cline_usage::TaskStore`): its runs get their tokens the same way.
//!
//! Only the hooks that need it read anything: a run's terminal (`agent_end`, `agent_abort`,
//! `agent_error`), `session_shutdown` (the runs it closes, and the session), and the first hook
//! of a session (its model, from the small `<id>.json`). Cline runs those detached, so the
//! read never holds Cline up. The blocking `tool_call` and `prompt_submit` read it only with
//! budgets set ([`crate::guard`]: what a run without the hub has spent so far stops its next
//! step), bounded as every read here is.
//! A missing or unreadable store, or one larger than [`MAX_STORE_BYTES`], means no usage on
//! the event, never a failed hook.
//!
//! Cline's files are not ours: each is opened through `cline_usage::vendor_file` (a FIFO or a
//! device where a file should be is skipped, never waited on), the read runs on its own thread
//! and is given up after [`READ_TIMEOUT`], and a hook reads the store ([`read_store`]) before
//! it takes its session's lock ([`of`] then applies what it read under the lock), so a slow
//! or odd file never holds up the session's other hooks nor the spool drain.
//!
//! A run's share is the model calls whose time (`ts` of the assistant message that carries
//! the call's `metrics`) falls in the run: after its start hook's `timestamp`, up to its
//! terminal hook's. Windows rather than deltas of Cline's running totals, because a window
//! needs no reading at the run's start (a delta would, and a spooled hook ingested later
//! would see a later total), gives the same answer whenever it is read, and counts the
//! subagents, whose calls Cline's `aggregateUsage` leaves out. A lead agent's run counts every
//! call in its window, its subagents' included; a subagent's own run (its agent id names an
//! `agent_<id>.messages.json`) counts its own calls, reported as delegated.
//!
//! [`Firing::cline_data`]: crate::firing::Firing::cline_data

use cline_hooks::usage::{Cost, Counts, HookUsage, Usage};
use cline_hooks::{HookPayload, SessionTracker};
use cline_stream::{PriceTable, Pricing};
use cline_usage::{Agent, ModelCall, Session, Store, TaskStore};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

/// A session folder larger than this is not read on the hook path (its usage is left off the
/// event; `aep-cline usage` still reports it): the read must stay a few milliseconds.
pub const MAX_STORE_BYTES: u64 = 64 << 20;

/// How long a hook waits for the store to be read; past it, its events go without usage.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The prices runs are costed with: set once at start (`AEP_CLINE_PRICES` over the bundled
/// table, [`crate::prices`]), the bundled table if nobody set it.
static PRICES: OnceLock<PriceTable> = OnceLock::new();

/// Sets the prices for the daemon's life; a second call is ignored.
pub fn use_prices(prices: PriceTable) {
    let _ = PRICES.set(prices);
}

/// The prices in force (the budgets price the hub's usage with them too).
pub fn prices() -> &'static PriceTable {
    PRICES.get_or_init(PriceTable::bundled)
}

/// Whether `payload` is a hook whose events carry usage or the model, given the tracker.
pub fn wanted(payload: &HookPayload, tracker: &SessionTracker) -> bool {
    !tracker.has_started()
        || matches!(
            payload.hook_name.as_str(),
            "agent_end" | "agent_abort" | "agent_error" | "session_shutdown"
        )
}

/// What the store says for this hook; empty when it says nothing or cannot be read.
pub fn read(payload: &HookPayload, tracker: &SessionTracker, data_dir: Option<&str>) -> HookUsage {
    let (Some(dir), Some(session)) = (data_dir, payload.session_key()) else {
        return HookUsage::default();
    };
    if !wanted(payload, tracker) {
        return HookUsage::default();
    }
    of(payload, tracker, read_store(dir, session).as_ref())
}

/// Session `session` as the store in data folder `dir` holds it, read on a thread of its own
/// for at most [`READ_TIMEOUT`]; `None` when it is not there, too large, or not read in time.
pub fn read_store(dir: &str, session: &str) -> Option<Session> {
    if !cline_usage::is_plain_id(session) {
        return None; // not a name Cline gives a session: never a path out of the store
    }
    let store = Store::from_text(dir);
    // Cline 3.x keeps a session in `sessions/<id>/` (or `CLINE_SESSION_DATA_DIR`); 2.x a task
    // in `tasks/<id>/` of the data folder (`cline_usage::TaskStore`).
    let (folder, legacy) = match store.session_dir(session) {
        f if f.is_dir() => (f, false),
        _ => (store.data_dir().join("tasks").join(session), true),
    };
    if !folder.is_dir() {
        // Not in this store (another CLINE_DIR, or nothing written yet): nothing is known,
        // and nothing is claimed; an empty usage would say the run used no tokens.
        return None;
    }
    let bytes = folder_bytes(&folder);
    if bytes > MAX_STORE_BYTES {
        tracing::warn!(%session, bytes, "the session's store folder is too large to read on the hook path; its usage is left off the event");
        return None;
    }
    let (done, read) = std::sync::mpsc::sync_channel(1);
    let id = session.to_string();
    let reader = std::thread::Builder::new().name("cline-store".into()).spawn(move || {
        // Past the timeout nobody waits for it any more: then it is dropped.
        let _ = done.send(if legacy {
            TaskStore::open(store.data_dir()).0.read_task(&id)
        } else {
            store.read_session(&id)
        });
    });
    if let Err(e) = reader {
        tracing::warn!(%session, error = %e, "no thread to read the session's store; its usage is left off the event");
        return None;
    }
    match read.recv_timeout(READ_TIMEOUT) {
        Ok(s) => Some(s),
        Err(_) => {
            tracing::warn!(%session, folder = %folder.display(), "the session's store was not read within {READ_TIMEOUT:?}; its usage is left off the event");
            None
        }
    }
}

/// What the store `read` (by [`read_store`]) says for this hook, given the session's tracker.
pub fn of(payload: &HookPayload, tracker: &SessionTracker, read: Option<&Session>) -> HookUsage {
    let (Some(s), Some(session)) = (read, payload.session_key()) else {
        return HookUsage::default();
    };
    if !wanted(payload, tracker) {
        return HookUsage::default();
    }
    for p in &s.problems {
        tracing::debug!(%session, problem = %p, "the session store could not be read whole");
    }
    if s.calls.is_empty() && !s.problems.is_empty() {
        return HookUsage::default(); // unreadable: no usage, rather than a usage of zero
    }
    let mut out = HookUsage {
        model: s.model.clone(),
        provider: s.provider.clone(),
        app: s.app.clone(),
        ..HookUsage::default()
    };
    let end = payload
        .timestamp
        .as_deref()
        .and_then(|t| aep_core::time::epoch_ms(t, true))
        .unwrap_or(i64::MAX);
    let closing: Vec<(String, Option<i64>)> = match payload.hook_name.as_str() {
        "session_shutdown" => {
            out.session = Some(usage_of(s, |_| true, false));
            tracker.open_agents()
        }
        "agent_end" | "agent_abort" | "agent_error" => {
            let agent = payload.agent().to_string();
            let started = tracker.run_started_at(&agent);
            vec![(agent, started)]
        }
        _ => Vec::new(),
    };
    for (agent, started) in closing {
        // A run whose start is not known has no window: no share is claimed.
        let Some(start) = started else { continue };
        let in_window = |c: &ModelCall| c.time_ms.is_some_and(|t| t > start && t <= end);
        let usage = if s.subagents.contains(&agent) {
            usage_of(s, |c| in_window(c) && c.agent == Agent::Subagent(agent.clone()), true)
        } else {
            usage_of(s, in_window, false)
        };
        out.runs.insert(agent, usage);
    }
    out
}

/// What the whole session has cost so far as the store `read` holds it (every model call,
/// subagents' too, priced with [`prices`]); `None` when a call's model has no price or the
/// store could not be read (a part is not the cost), `Some(0.0)` before the first call.
pub fn session_cost(read: &Session) -> Option<f64> {
    if read.calls.is_empty() && !read.problems.is_empty() {
        return None;
    }
    match usage_of(read, |_| true, false) {
        Usage { cost: Some(c), .. } => Some(c.total),
        Usage { cost_note: Some(_), .. } => None,
        _ => Some(0.0),
    }
}

/// The usage of the calls `keep` selects, priced per model.
fn usage_of(s: &Session, keep: impl Fn(&ModelCall) -> bool, delegated: bool) -> Usage {
    let mut usage = Usage {
        delegated,
        ..Usage::default()
    };
    let mut by_model: BTreeMap<(Option<&str>, Option<&str>), cline_usage::Tokens> = BTreeMap::new();
    for c in s.calls.iter().filter(|c| keep(c)) {
        add(&mut usage.total, c);
        if c.agent != Agent::Lead {
            add(&mut usage.subagents, c);
        }
        *by_model.entry((c.provider.as_deref(), c.model.as_deref())).or_default() += c.tokens;
    }
    let mut cost = Cost {
        total: 0.0,
        prompt: 0.0,
        completion: 0.0,
        cache: 0.0,
    };
    for ((provider, model), tokens) in &by_model {
        match prices().cost(*provider, *model, &tokens.classes()) {
            Pricing::Priced(c) => {
                cost.total += c.total;
                cost.prompt += c.uncached_input;
                cost.completion += c.output;
                cost.cache += c.cached_input;
            }
            Pricing::Unknown(note) => {
                // One unpriced model makes the whole cost unknown: a part is not the cost.
                usage.cost_note = Some(note);
                return usage;
            }
        }
    }
    if !by_model.is_empty() {
        usage.cost = Some(cost);
    }
    usage
}

fn add(counts: &mut Counts, c: &ModelCall) {
    counts.input = counts.input.saturating_add(c.tokens.input);
    counts.output = counts.output.saturating_add(c.tokens.output);
    counts.cache_read = counts.cache_read.saturating_add(c.tokens.cache_read);
    counts.cache_write = counts.cache_write.saturating_add(c.tokens.cache_write);
    counts.calls += 1;
}

/// The bytes of the files directly in `folder`, links followed (0 when it cannot be listed).
fn folder_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::metadata(e.ok()?.path()).ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .fold(0, u64::saturating_add)
}
