//! The history report (`aep-cline usage`): every model call on disk, grouped by day, week,
//! month, session or model, with token classes and cost.
//!
//! Sessions are read in parallel by a small pool of threads, each with its own read buffer
//! and its own partial rows, merged at the end; a session's calls are folded into the rows as
//! they are parsed, so memory follows the number of rows (days, models, or sessions asked
//! for), never the number of calls.

use crate::history::{History, Source};
use crate::index::{Looks, Lookup};
use crate::messages::CallRef;
use crate::model::{Agent, Tokens};
use crate::problem::Problem;
use cline_stream::{PriceTable, Pricing};
use jiff::civil::Date;
use jiff::tz::TimeZone;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// How rows are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Daily,
    /// Weeks starting on Monday, keyed by that Monday.
    Weekly,
    Monthly,
    Session,
    Model,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Daily => "daily",
            Group::Weekly => "weekly",
            Group::Monthly => "monthly",
            Group::Session => "session",
            Group::Model => "model",
        }
    }
}

/// What to report.
#[derive(Debug, Clone)]
pub struct Options {
    pub group: Group,
    /// Calls on or after this date (in `timezone`).
    pub since: Option<Date>,
    /// Calls on or before this date.
    pub until: Option<Date>,
    pub timezone: TimeZone,
    /// Only sessions whose workspace is this folder or inside it.
    pub workspace: Option<PathBuf>,
    /// Reading threads.
    pub threads: usize,
}

impl Options {
    /// Whether calls are placed on dates: a range, or rows by day, week or month.
    pub fn dated(&self) -> bool {
        self.since.is_some() || self.until.is_some() || !matches!(self.group, Group::Session | Group::Model)
    }
}

/// One model's part of a row.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPart {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub calls: u64,
    pub tokens: Tokens,
    /// `None`: no price is known for this model.
    pub cost: Option<f64>,
    pub cost_note: Option<String>,
}

/// One subagent's part of a session row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentPart {
    /// Its agent id (`agent_<…>`).
    pub agent: String,
    /// The agent that spawned it, from the sessions database when it says.
    pub parent_agent: Option<String>,
    pub calls: u64,
    pub tokens: Tokens,
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// `2026-12-01` (daily, weekly: the Monday), `2026-12` (monthly), the session id, or
    /// `provider/model`.
    pub key: String,
    pub sessions: u64,
    /// Sessions Cline is still running.
    pub running: u64,
    pub calls: u64,
    pub tokens: Tokens,
    pub models: Vec<ModelPart>,
    /// Session rows: the session's workspace, start and subagents, and the app on Cline's SDK
    /// that ran it (its session file's `source`: `cli`, `vscode`, `jetbrains`, ...).
    pub workspace: Option<String>,
    pub app: Option<String>,
    pub started_ms: Option<i64>,
    pub subagents: Vec<SubagentPart>,
    /// What Cline itself recorded (2.x `totalCost`), summed over the sessions that say; session
    /// rows and their total only (Cline records it per task, not per day or model).
    pub cline_cost: Option<f64>,
}

impl Row {
    /// The row's cost: `None` when a model in it has no price (its tokens still count).
    pub fn cost(&self) -> Option<f64> {
        self.models.iter().try_fold(0.0, |a, m| m.cost.map(|c| a + c))
    }

    /// The cost of the models that have a price.
    pub fn priced_cost(&self) -> f64 {
        self.models.iter().filter_map(|m| m.cost).fold(0.0, |a, b| a + b)
    }
}

/// The whole report.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub totals: Option<Row>,
    /// Every file that could not be used, once each.
    pub problems: Vec<Problem>,
    /// Models with no price (`provider`, `model`, why), once each.
    pub unpriced: Unpriced,
    pub sessions_read: u64,
}

/// A row being filled.
#[derive(Default)]
struct Acc {
    sessions: u64,
    running: u64,
    calls: u64,
    tokens: Tokens,
    /// Few per row: a linear search on borrowed names costs no allocation per call.
    models: Vec<(Option<String>, Option<String>, u64, Tokens)>,
    workspace: Option<String>,
    app: Option<String>,
    started_ms: Option<i64>,
    subagents: Vec<SubagentPart>,
    cline_cost: Option<f64>,
}

impl Acc {
    fn add(&mut self, c: &CallRef<'_>) {
        self.calls += c.calls;
        self.tokens += c.tokens;
        self.add_model(c.provider, c.model, c.calls, c.tokens);
    }

    /// `n` calls of one model into its part, its names copied only the first time it is seen.
    fn add_model(&mut self, provider: Option<&str>, model: Option<&str>, n: u64, t: Tokens) {
        let found = self
            .models
            .iter_mut()
            .find(|(p, m, _, _)| p.as_deref() == provider && m.as_deref() == model);
        match found {
            Some((_, _, n2, t2)) => {
                *n2 += n;
                *t2 += t;
            }
            None => self
                .models
                .push((provider.map(str::to_string), model.map(str::to_string), n, t)),
        }
    }

    /// Adds `o`'s counts, models and Cline's cost, not its workspace, app or subagents (the
    /// totals row), copying a model's names only the first time it is seen.
    fn add_counts(&mut self, o: &Acc) {
        self.cline_cost = match (self.cline_cost, o.cline_cost) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.sessions += o.sessions;
        self.running += o.running;
        self.calls += o.calls;
        self.tokens += o.tokens;
        for (p, m, n, t) in &o.models {
            self.add_model(p.as_deref(), m.as_deref(), *n, *t);
        }
    }

    fn merge(&mut self, mut o: Acc) {
        if self.workspace.is_none() {
            self.workspace = o.workspace.take();
        }
        if self.app.is_none() {
            self.app = o.app.take();
        }
        self.started_ms = self.started_ms.or(o.started_ms);
        self.add_counts(&o);
        self.subagents.extend(o.subagents);
    }
}

/// Keys sort as they read (dates, ids, model names).
type Partial = HashMap<String, Acc>;

/// Reads every history and builds the report.
pub fn build(history: &History, opts: &Options, prices: &PriceTable) -> Report {
    build_indexed(history, opts, prices, &Lookup::none).0
}

/// [`build`], the 3.x store's files looked up through `lookup` (one per reading thread): what
/// is unchanged is taken from the index, not read. Returns what the lookups found, for the
/// next index ([`crate::index::next_entries`]).
pub fn build_indexed<'a>(
    history: &History,
    opts: &Options,
    prices: &PriceTable,
    lookup: &(dyn Fn() -> Lookup<'a> + Sync),
) -> (Report, Looks) {
    let mut problems = Vec::new();
    let subagent_rows = match crate::db::subagents(&history.store.database()) {
        Ok(rows) => rows,
        Err(p) => {
            problems.push(p);
            HashMap::new()
        }
    };
    let (ids, unlisted) = history.sessions();
    problems.extend(unlisted);
    let next = AtomicUsize::new(0);
    let merged: Mutex<(Partial, Vec<Problem>, u64, Looks)> = Mutex::new((HashMap::new(), Vec::new(), 0, Vec::new()));
    let threads = opts.threads.clamp(1, 16).min(ids.len().max(1));
    let dated = opts.dated();
    // A row per session: room for them at once, not grown (and moved) by doubling.
    let per_thread = if opts.group == Group::Session {
        ids.len() / threads + 1
    } else {
        0
    };
    merged.lock().expect("not yet shared").0.reserve(per_thread * threads);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut rows: Partial = HashMap::with_capacity(per_thread);
                let mut found = Vec::new();
                let mut read = 0u64;
                let mut buf = Vec::new();
                let mut look = lookup();
                if dated {
                    look.zone(opts.timezone.clone());
                }
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((source, id)) = ids.get(i) else { break };
                    read += 1;
                    scan(
                        history,
                        (*source, id),
                        opts,
                        &subagent_rows,
                        &mut buf,
                        &mut look,
                        &mut rows,
                        &mut found,
                    );
                }
                let mut m = merged.lock().expect("no reader panics");
                for (k, acc) in rows {
                    match m.0.entry(k) {
                        std::collections::hash_map::Entry::Occupied(mut o) => o.get_mut().merge(acc),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(acc);
                        }
                    }
                }
                m.1.extend(found);
                m.2 += read;
                m.3.push((look.hits, look.fresh));
            });
        }
    });
    let (rows, found, read, looks) = merged.into_inner().expect("no reader panics");
    problems.extend(found);
    (finish(rows, problems, read, prices), looks)
}

/// One session into the partial rows.
#[allow(clippy::too_many_arguments)] // one session, and the reading thread's state
fn scan(
    history: &History,
    (source, id): (Source, &str),
    opts: &Options,
    subagent_rows: &HashMap<String, crate::db::Subagent>,
    buf: &mut Vec<u8>,
    look: &mut Lookup<'_>,
    rows: &mut Partial,
    problems: &mut Vec<Problem>,
) {
    let in_range = |date: Date| opts.since.is_none_or(|s| date >= s) && opts.until.is_none_or(|u| date <= u);
    let date_of = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms)
            .ok()
            .map(|t| opts.timezone.to_datetime(t).date())
    };
    let mut session_acc = Acc::default();
    // This session's share of each row, merged once its workspace is known to be wanted.
    let mut local: Vec<(String, Acc)> = Vec::new();
    let mut agents: Vec<(String, u64, Tokens)> = Vec::new();
    let group = opts.group;
    // The zone conversion only where a date is asked for.
    let dated = opts.dated();
    let session = history.scan(source, id, buf, look, &mut |agent, c| {
        let date = if dated { c.time_ms.and_then(date_of) } else { None };
        // A call without a time cannot be placed in a range, or on a day: left out of those.
        if dated {
            match date {
                Some(d) if in_range(d) => {}
                _ => return,
            }
        }
        let key = match group {
            Group::Session => None,
            Group::Model => Some(model_key(c.provider, c.model)),
            Group::Daily => date.map(|d| d.to_string()),
            Group::Weekly => date.map(|d| monday(d).to_string()),
            Group::Monthly => date.map(|d| format!("{:04}-{:02}", d.year(), d.month())),
        };
        match key {
            None => session_acc.add(&c),
            // Few keys per session: a short search, one allocation per key, not per call.
            Some(k) => match local.iter_mut().find(|(key, _)| *key == k) {
                Some((_, acc)) => acc.add(&c),
                None => {
                    let mut acc = Acc::default();
                    acc.add(&c);
                    local.push((k, acc));
                }
            },
        }
        if let Agent::Subagent(a) = agent {
            match agents.iter_mut().find(|(x, _, _)| x == a) {
                Some((_, n, t)) => {
                    *n += c.calls;
                    *t += c.tokens;
                }
                None => agents.push((a.clone(), c.calls, c.tokens)),
            }
        }
    });
    problems.extend(session.problems.iter().cloned());
    if let Some(w) = &opts.workspace {
        let inside = session
            .workspace
            .as_deref()
            .is_some_and(|ws| std::path::Path::new(ws).starts_with(w));
        if !inside {
            return;
        }
    }
    let running = u64::from(session.running);
    match group {
        Group::Session => {
            if session_acc.calls == 0 && (opts.since.is_some() || opts.until.is_some()) {
                return;
            }
            session_acc.sessions = 1;
            session_acc.running = running;
            session_acc.workspace = session.workspace.clone();
            session_acc.app = session.app.clone();
            session_acc.started_ms = session.started_ms;
            session_acc.cline_cost = session.cline_cost;
            session_acc.subagents = agents
                .into_iter()
                .map(|(agent, calls, tokens)| SubagentPart {
                    parent_agent: subagent_rows
                        .get(&format!("{id}__{agent}"))
                        .and_then(|r| r.parent_agent_id.clone()),
                    agent,
                    calls,
                    tokens,
                })
                .collect();
            rows.insert(id.to_string(), session_acc);
        }
        _ => {
            for (k, mut acc) in local {
                acc.sessions = 1;
                acc.running = running;
                rows.entry(k).or_default().merge(acc);
            }
        }
    }
}

/// `provider/model` (`?` for an unnamed one).
fn model_key(provider: Option<&str>, model: Option<&str>) -> String {
    format!("{}/{}", provider.unwrap_or("?"), model.unwrap_or("?"))
}

fn monday(d: Date) -> Date {
    let back = i64::from(d.weekday().to_monday_zero_offset());
    d.checked_sub(jiff::Span::new().days(back)).unwrap_or(d)
}

/// Prices every row's models, sorts the rows and adds the totals. Everything is in one order
/// whatever order the reading threads merged in, so two runs over one history print the same
/// bytes: the rows by start then key, the totals summed in that order (float costs included),
/// the unpriced models by name. The totals row's `started` is the earliest start of any row,
/// its `workspace` the one workspace every row that names one shares, else none.
fn finish(rows: Partial, mut problems: Vec<Problem>, read: u64, prices: &PriceTable) -> Report {
    let mut unpriced = Vec::new();
    let mut accs: Vec<(String, Acc)> = rows.into_iter().collect();
    accs.sort_by(|(ka, a), (kb, b)| a.started_ms.cmp(&b.started_ms).then_with(|| ka.cmp(kb)));
    let mut workspaces = accs.iter().filter_map(|(_, a)| a.workspace.as_deref());
    let first = workspaces.next().map(str::to_string);
    let shared = first.filter(|w| workspaces.all(|o| o == w));
    let mut total = Acc::default();
    let mut out = Vec::with_capacity(accs.len());
    for (key, acc) in accs {
        total.started_ms = match (total.started_ms, acc.started_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        total.add_counts(&acc);
        out.push(to_row(key, acc, prices, &mut unpriced));
    }
    total.workspace = shared;
    let totals = (!out.is_empty()).then(|| to_row("total".to_string(), total, prices, &mut unpriced));
    unpriced.sort();
    problems.sort_by(|a, b| {
        a.path
            .cmp(&b.path)
            .then_with(|| a.kind.to_string().cmp(&b.kind.to_string()))
    });
    problems.dedup();
    Report {
        rows: out,
        totals,
        problems,
        unpriced,
        sessions_read: read,
    }
}

/// Unpriced models, once each: `(provider, model, why)`.
type Unpriced = Vec<(Option<String>, Option<String>, String)>;

/// A row from its sums, taken (a report of 10,000 sessions has as many rows: copying each
/// one's names was a warm run's cost).
fn to_row(key: String, acc: Acc, prices: &PriceTable, unpriced: &mut Unpriced) -> Row {
    let mut models: Vec<ModelPart> = acc
        .models
        .into_iter()
        .map(|(p, m, calls, tokens)| {
            let (cost, note) = match prices.cost(p.as_deref(), m.as_deref(), &tokens.classes()) {
                Pricing::Priced(c) => (Some(c.total), None),
                Pricing::Unknown(note) => {
                    if !unpriced.iter().any(|(p2, m2, _)| *p2 == p && *m2 == m) {
                        unpriced.push((p.clone(), m.clone(), note.clone()));
                    }
                    (None, Some(note))
                }
            };
            ModelPart {
                provider: p,
                model: m,
                calls,
                tokens,
                cost,
                cost_note: note,
            }
        })
        .collect();
    models.sort_by(|a, b| {
        b.tokens
            .total()
            .cmp(&a.tokens.total())
            .then_with(|| a.model.cmp(&b.model))
            .then_with(|| a.provider.cmp(&b.provider))
    });
    Row {
        key,
        sessions: acc.sessions,
        running: acc.running,
        calls: acc.calls,
        tokens: acc.tokens,
        models,
        workspace: acc.workspace,
        app: acc.app,
        started_ms: acc.started_ms,
        subagents: acc.subagents,
        cline_cost: acc.cline_cost,
    }
}
