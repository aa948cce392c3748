//! The daemon side of budgets: where each cost comes from, and what crossing a limit does.
//!
//! Cost, soonest first (a run without the hub is also charged from Cline's store at each
//! `tool_call` and `prompt_submit` the guard decides: [`Watch::store_spend`]):
//! - A run Cline's hub hosts: the hub's `usage.updated`, sent after each model call with that
//!   call's tokens (`delta`), priced here with the daemon's table (`AEP_CLINE_PRICES` over the
//!   bundled one) and the session's model from the hub's `session.*` frames. It counts in
//!   the session's open run, its session and its UTC day as soon as the call is over, so a run
//!   is stopped at the first call that takes it past a limit. Cline's own `totalCost` is used
//!   only for a model the table does not price.
//! - Any other run (`cline` without the hub): Cline's store, read at the run's terminal hook
//!   ([`crate::lane::run_usage`]), so its cost is known when the run is over: it counts in the
//!   session and the day, and crossing a limit gives the notice only.
//!
//! Acting: each threshold crossed is an `attention.requested {kind: "other", respond_via:
//! ["oob"]}` notice ([`super::notice`]) naming the budget, its limit and the cost reached, resolved `auto` in the
//! same write (nothing waits on it: AEP-0002 §7.2 wants every request resolved before its
//! session ends). A run at or past a limit is cancelled once through the hub, as
//! `aep-cline cancel` is (`run.abort`, the lane's cancel note), so its terminal is
//! `run.cancelled {by: "policy"}` (a budget is the operator's rule, not a command: AEP-0002
//! §5.3), caused by the notice, with the same `budget` data.
//!
//! Never on the hook path: hub frames are handled on the tap's blocking thread, terminals on
//! the bus; each charge is O(1) under one short lock, taken inside the session's lock (the
//! only order here).

use super::account::{Applied, Budgets, Charge, Crossing, Ledger, Level, Outcome, Scope, CURRENCY, MAX_SESSIONS};
use super::kept::Kept;
use super::notice::{amounts, budget_data, notice, Act};
use crate::control::intake::withdraw;
use crate::control::{Kind, Link, Request};
use crate::lane::{Note, Sessions};
use crate::views::numbers::figure;
use aep_core::bounded::BoundedMap;
use aep_core::types::{ATTENTION_REQUESTED, RUN_CANCELLED, RUN_FAILED, RUN_FINISHED, SESSION_ENDED, SESSION_STARTED};
use aep_core::Capture;
use cline_hooks::Planned;
use cline_hub::frame::HubEvent;
use cline_hub::{control, CommandKey};
use cline_stream::{ClineUsage, Pricing, TokenClasses};
use parking_lot::{Mutex, RwLock};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The `source` of the cancels a budget asks for (never seen by a consumer: only the lane's
/// cancel note and the hub's `run.abort` carry it).
const SOURCE: &str = "aep-cline/budget";

/// What the daemon knows of a session for its budgets.
#[derive(Debug, Clone, Default)]
struct Facts {
    provider: Option<String>,
    model: Option<String>,
    workspace: Option<String>,
    /// Its cost comes from the hub: its terminals' store cost would count it twice.
    hub: bool,
    /// Said once that its model has no price.
    unpriced: bool,
    /// What Cline's store said the session had cost when last read at a hook (a run without
    /// the hub): the next read charges only what was added since.
    store_total: f64,
    /// The run those store charges went to, and how much of its cost they charged: its
    /// terminal then charges only the rest.
    store_run: Option<(String, f64)>,
}

/// Where a charge came from.
enum Origin<'a> {
    /// A hub `usage.updated`: the session's open run is charged, and may be cancelled.
    Hub { event: Option<&'a str> },
    /// A run terminal's store cost: that run is over.
    Terminal { run: Option<&'a str> },
}

pub struct Watch {
    budgets: RwLock<Arc<Budgets>>,
    /// Where the day's spend is kept across restarts (`None` in tests of the core).
    kept: Option<Kept>,
    ledger: Mutex<Ledger>,
    facts: Mutex<BoundedMap<String, Facts>>,
    /// The hub tap's command leg, when the tap is on: where cancels go.
    hub: Option<Link>,
    /// A budget reached at a tool call ends the run (`AEP_CLINE_BUDGET_STOP=run`), not only
    /// fails the tool.
    stops_run: std::sync::atomic::AtomicBool,
}

impl Watch {
    /// `kept`: the day's spend an earlier daemon kept is taken back (today's only), and each
    /// charge is kept there.
    pub fn new(budgets: Budgets, hub: Option<Link>, kept: Option<Kept>) -> Arc<Watch> {
        let mut ledger = Ledger::default();
        if let Some(kept) = &kept {
            match kept.load() {
                Ok(days) => {
                    let taken = ledger.restore_days(days, crate::lane::sessions::now_ms() as i64);
                    if taken > 0 {
                        tracing::info!(
                            days = taken,
                            day_cost = ledger.day(None, crate::lane::sessions::now_ms() as i64),
                            "budgets: today's spend so far taken back from the state folder"
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "budgets: the day's spend kept by an earlier daemon is not used: today starts at 0 (the file is rewritten at the next charge)")
                }
            }
        }
        Arc::new(Watch {
            budgets: RwLock::new(Arc::new(budgets)),
            kept,
            ledger: Mutex::new(ledger),
            facts: Mutex::new(BoundedMap::new(MAX_SESSIONS)),
            hub,
            stops_run: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Replaces the limits (the policy file's overrides, reloaded); what was spent stays.
    pub fn set_budgets(&self, budgets: Budgets) {
        *self.budgets.write() = Arc::new(budgets);
    }

    pub fn budgets(&self) -> Arc<Budgets> {
        self.budgets.read().clone()
    }

    fn facts(&self, session: &str, update: impl FnOnce(&mut Facts)) -> Facts {
        let mut all = self.facts.lock();
        let mut facts = all.remove(session).unwrap_or_default();
        update(&mut facts);
        all.insert(session.to_string(), facts.clone());
        facts
    }

    /// A hub `session.*` frame: the session's model and workspace folder, as its snapshot says.
    pub fn hub_session(&self, session: &str, event: &HubEvent) {
        let p = &event.payload;
        let snapshot = p.get("snapshot");
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let model = text(snapshot.and_then(|s| s.pointer("/model/modelId")))
            .or_else(|| text(p.pointer("/session/metadata/model")));
        let provider = text(snapshot.and_then(|s| s.pointer("/model/providerId")))
            .or_else(|| text(p.pointer("/session/metadata/provider")));
        let workspace = text(snapshot.and_then(|s| s.pointer("/workspace/root")))
            .or_else(|| text(p.pointer("/session/workspaceRoot")));
        if model.is_none() && workspace.is_none() {
            return;
        }
        self.facts(session, |f| {
            f.model = model.or(f.model.take());
            f.provider = provider.or(f.provider.take());
            f.workspace = workspace.or(f.workspace.take());
        });
    }

    /// A hub `usage.updated`: one model call's tokens (`delta`), priced and charged to the
    /// session's open run.
    pub fn hub_usage(&self, sessions: &Sessions, session: &str, event: &HubEvent) {
        if self.budgets().is_empty() {
            return;
        }
        let facts = self.facts(session, |f| f.hub = true);
        let delta = event
            .payload
            .get("delta")
            .cloned()
            .map(serde_json::from_value::<ClineUsage>);
        let Some(Ok(delta)) = delta else {
            tracing::warn!(%session, "hub usage.updated without a usable delta: not counted in the budgets");
            return;
        };
        let priced = crate::lane::run_usage::prices().cost(
            facts.provider.as_deref(),
            facts.model.as_deref(),
            &TokenClasses::from_cline(&delta),
        );
        let cost = match (priced, delta.total_cost) {
            (Pricing::Priced(c), _) => c.total,
            (Pricing::Unknown(_), Some(own)) if own > 0.0 => own,
            (Pricing::Unknown(note), _) => {
                if !facts.unpriced {
                    self.facts(session, |f| f.unpriced = true);
                    tracing::warn!(%session, why = %note, "a model call has no price: the budgets do not count it (AEP_CLINE_PRICES prices a model the bundled table lacks)");
                }
                return;
            }
        };
        // The daemon's clock names the day, not the frame's stamp: one frame stamped a day
        // ahead must not start a new day (or keep the old one) for every session.
        let at = crate::lane::sessions::now_ms() as i64;
        let from = Origin::Hub {
            event: event.event_id.as_deref(),
        };
        self.charge(sessions, session, cost, at, facts.workspace.as_deref(), from);
    }

    /// Follows the bus: a run terminal's cost for a session the hub does not price, a
    /// session's workspace from its start, and its `session.ended` (its spend is let go).
    pub async fn pump(self: Arc<Self>, sessions: Arc<Sessions>, mut bus: broadcast::Receiver<Note>) {
        loop {
            let note = match bus.recv().await {
                Ok(note) => note,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(
                        missed = n,
                        "budgets fell behind the bus: the costs of runs that ended meanwhile are not counted"
                    );
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            match note {
                Note::Event(event) => {
                    if !matches!(
                        event.value["type"].as_str(),
                        Some(SESSION_STARTED | SESSION_ENDED | RUN_FINISHED | RUN_FAILED | RUN_CANCELLED)
                    ) {
                        continue;
                    }
                    let (watch, sessions) = (self.clone(), sessions.clone());
                    let _ = tokio::task::spawn_blocking(move || watch.on_event(&sessions, &event.value)).await;
                }
                // Let go for idleness is not ended: its spend is kept (the maps are bounded).
                Note::Closed(_) => {}
            }
        }
    }

    fn on_event(&self, sessions: &Sessions, event: &Value) {
        let Some(session) = event["session"].as_str() else {
            return;
        };
        let data = &event["data"];
        match event["type"].as_str().unwrap_or_default() {
            SESSION_STARTED => {
                // The path is in the log at capture `redacted` and above only.
                if let Some(cwd) = data["cwd"].as_str() {
                    self.facts(session, |f| {
                        f.workspace.get_or_insert_with(|| cwd.to_string());
                    });
                }
            }
            SESSION_ENDED => {
                self.ledger.lock().forget(session);
                self.facts.lock().remove(session);
            }
            _ => {
                let Some(cost) = data.pointer("/cost/total").and_then(Value::as_f64) else {
                    return;
                };
                let run = event["run"].as_str();
                // What the store's reads at its hooks charged of this run already.
                let mut charged = 0.0;
                let facts = self.facts(session, |f| {
                    if let Some((r, c)) = f.store_run.take() {
                        if Some(r.as_str()) == run {
                            charged = c;
                            f.store_total += (cost - c).max(0.0);
                        } else {
                            f.store_run = Some((r, c));
                        }
                    }
                });
                if facts.hub || self.budgets().is_empty() {
                    return;
                }
                let cost = cost - charged;
                if cost <= 0.0 {
                    return;
                }
                let at = event["time"]
                    .as_str()
                    .and_then(|t| aep_core::time::epoch_ms(t, true))
                    .unwrap_or_else(|| crate::lane::sessions::now_ms() as i64);
                let from = Origin::Terminal {
                    run: event["run"].as_str(),
                };
                self.charge(sessions, session, cost, at, facts.workspace.as_deref(), from);
            }
        }
    }

    /// Charges one cost; appends a notice for each threshold it crossed, and cancels the run
    /// that passed a limit where the hub hosts it.
    fn charge(
        &self,
        sessions: &Sessions,
        session: &str,
        cost: f64,
        at_ms: i64,
        workspace: Option<&str>,
        from: Origin<'_>,
    ) {
        if !sessions.owns(session) {
            tracing::debug!(%session, "a cost for a session no hook has reported: not counted");
            return;
        }
        let budgets = self.budgets();
        let applied = budgets.applied(workspace);
        let level = sessions.capture().ceiling(ATTENTION_REQUESTED);
        let mut cancel = None;
        let mut day_reached = None;
        let appended = sessions.append_in(session, |lane| {
            let (run, event) = match &from {
                Origin::Hub { event } => (lane.tracker.active_run().map(str::to_string), *event),
                Origin::Terminal { run } => (run.map(str::to_string), None),
            };
            let outcome = self.ledger.lock().charge(Charge {
                id: event,
                session,
                run: run.as_deref(),
                cost,
                at_ms,
                applied,
            });
            let Outcome { crossings, stop } = outcome;
            day_reached = crossings
                .iter()
                .find(|c| c.scope == Scope::Day && c.level == Level::Reached)
                .copied();
            // A hook-reported run is over: its notices stand alone.
            let notice_run = matches!(from, Origin::Hub { .. }).then_some(run.clone()).flatten();
            let mut planned = Vec::new();
            for c in crossings
                .iter()
                .filter(|c| !(c.level == Level::Reached && stop.is_some_and(|s| s.scope == c.scope)))
            {
                planned.extend(notice(c, &applied, Act::Notice, notice_run.as_deref(), level));
            }
            if let (Some(stop), Some(run)) = (stop, run) {
                let act = match (&from, &self.hub) {
                    (Origin::Terminal { .. }, _) => Act::NotCancelled(
                        "not cancelled: the run is not hosted by Cline's hub, the only way aep-cline can cancel a run (its cost was known when it ended)",
                    ),
                    _ => self.can_cancel(),
                };
                let (notes, request) = stop_run(lane, session, (&run, notice_run.as_deref()), (&stop, &applied, act), level);
                cancel = request;
                planned.extend(notes);
            }
            planned
        });
        if let Err(e) = appended {
            tracing::error!(%session, error = %e, "budget notices not recorded");
            return;
        }
        if let Some(request) = cancel {
            self.send_cancel(sessions, request);
        }
        if let Some(day) = day_reached {
            self.stop_the_day(sessions, session, applied.day, &day, level);
        }
        self.keep();
    }

    /// Whether a run the hub hosts can be cancelled now, and if not, why.
    fn can_cancel(&self) -> Act {
        match &self.hub {
            None => Act::NotCancelled("not cancelled: the hub tap is off"),
            Some(link) if !link.connected() => Act::NotCancelled("not cancelled: the hub tap is not connected"),
            Some(_) => Act::Cancel,
        }
    }

    fn send_cancel(&self, sessions: &Sessions, request: Request) {
        let Some(link) = &self.hub else { return };
        let session = request.session.clone();
        tracing::info!(%session, command = %request.command_id, "a budget was reached: cancelling the run through the hub");
        if let Err(request) = link.send(request) {
            tracing::warn!(%session, "the budget's cancel could not reach the hub: the tap stopped");
            withdraw(sessions, &request);
        }
    }

    /// The day's limit was reached by a charge of `by`: every other run the hub hosts under
    /// that day is stopped now, not at its own next model call (eight sessions crossing a day
    /// together must all stop). A run the hub does not host is stopped by the hook guard at
    /// its next tool call or prompt ([`Watch::over`]).
    fn stop_the_day(&self, sessions: &Sessions, by: &str, day: Option<&str>, reached: &Crossing, level: Capture) {
        let budgets = self.budgets();
        for session in sessions.live_sessions().into_iter().filter(|s| s != by) {
            let facts = self.facts.lock().get(&session).cloned().unwrap_or_default();
            let applied = budgets.applied(facts.workspace.as_deref());
            if !facts.hub || applied.day != day {
                continue;
            }
            let mut cancel = None;
            let appended = sessions.append_in(&session, |lane| {
                let Some(run) = lane.tracker.active_run().map(str::to_string) else {
                    return Vec::new();
                };
                if !self.ledger.lock().mark_stopped(&session, &run) {
                    return Vec::new();
                }
                let act = self.can_cancel();
                let (notes, request) = stop_run(lane, &session, (&run, Some(&run)), (reached, &applied, act), level);
                cancel = request;
                notes.into()
            });
            if let Err(e) = appended {
                tracing::error!(%session, error = %e, "budget notices not recorded");
                continue;
            }
            if let Some(request) = cancel {
                self.send_cancel(sessions, request);
            }
        }
    }

    /// Keeps the day's spend in the state folder (a failure is said, and tried again at the
    /// next charge).
    fn keep(&self) {
        if let Some(kept) = &self.kept {
            if let Err(e) = kept.save(|| self.ledger.lock().kept_days()) {
                tracing::warn!(path = %kept.path().display(), error = %e,
                    "budgets: the day's spend could not be kept: a restart now would start the day at 0");
            }
        }
    }

    /// A run without the hub, at a hook the guard decides (`tool_call`, `prompt_submit`):
    /// Cline's store says the session has cost `total` so far. What was added since the last
    /// read is charged to `run` (the session's open run) now, so a limit its model calls
    /// passed stops its next step; returns the notices of the thresholds crossed, for the hook's
    /// own write (this runs under the session's lock: nothing is appended here).
    pub fn store_spend(
        &self,
        session: &str,
        run: Option<&str>,
        total: f64,
        workspace: Option<&str>,
        level: Capture,
    ) -> Vec<Planned> {
        let budgets = self.budgets();
        if budgets.is_empty() || !total.is_finite() {
            return Vec::new();
        }
        let mut delta = 0.0;
        let facts = self.facts(session, |f| {
            if f.hub {
                return;
            }
            delta = (total - f.store_total).max(0.0);
            f.store_total = f.store_total.max(total);
            if f.workspace.is_none() {
                f.workspace = workspace.map(str::to_string);
            }
            if let Some(run) = run {
                match &mut f.store_run {
                    Some((r, charged)) if r == run => *charged += delta,
                    _ => f.store_run = Some((run.to_string(), delta)),
                }
            }
        });
        if facts.hub || delta <= 0.0 {
            return Vec::new();
        }
        let applied = budgets.applied(facts.workspace.as_deref());
        let outcome = self.ledger.lock().charge(Charge {
            id: None,
            session,
            run,
            cost: delta,
            at_ms: crate::lane::sessions::now_ms() as i64,
            applied,
        });
        let stopped = outcome.stop;
        let mut planned = Vec::new();
        for c in &outcome.crossings {
            let act = match (c.level, stopped) {
                (Level::Reached, Some(s)) if s.scope == c.scope => Act::StoppedAtHook,
                _ => Act::Notice,
            };
            planned.extend(notice(c, &applied, act, run, level));
        }
        if let Some(stop) = stopped.filter(|s| {
            !outcome
                .crossings
                .iter()
                .any(|c| c.scope == s.scope && c.level == Level::Reached)
        }) {
            planned.extend(notice(&stop, &applied, Act::StoppedAtHook, run, level));
        }
        planned
    }

    /// What a budget reached at a tool call stops: the tool (the model is told, the run goes
    /// on to its end) or the run.
    pub fn stop(&self) -> cline_policy::Stop {
        match self.stops_run.load(std::sync::atomic::Ordering::Relaxed) {
            true => cline_policy::Stop::Run,
            false => cline_policy::Stop::Tool,
        }
    }

    /// Sets [`Watch::stop`] (`AEP_CLINE_BUDGET_STOP`).
    pub fn set_stop(&self, stop: cline_policy::Stop) {
        let run = stop == cline_policy::Stop::Run;
        self.stops_run.store(run, std::sync::atomic::Ordering::Relaxed);
    }

    /// The limit `session` is at or past now (the daemon's clock names the day), with the
    /// words Cline is told: the next tool call or prompt of the run is stopped there.
    /// `run`: the run a tool call belongs to (`None` at a prompt, which starts a new one).
    pub fn over(&self, session: &str, run: Option<&str>, workspace: Option<&str>) -> Option<(Crossing, String)> {
        let budgets = self.budgets();
        if budgets.is_empty() {
            return None;
        }
        let facts = self.facts.lock().get(session).cloned().unwrap_or_default();
        let applied = budgets.applied(facts.workspace.as_deref().or(workspace));
        let now = crate::lane::sessions::now_ms() as i64;
        let over = self.ledger.lock().over(session, run, applied, now)?;
        let words = format!(
            "aep-cline: the {} budget is reached ({} spent), so this step is stopped before it spends more; raise {} or wait for a new {}",
            over.scope.as_str(),
            amounts(&over),
            match applied.workspace {
                Some(_) => "the policy file's [[budget]]",
                None => super::VARIABLE,
            },
            match over.scope {
                Scope::Run => "run",
                Scope::Session => "session",
                Scope::Day => "UTC day",
            },
        );
        Some((over, words))
    }

    /// What `/healthz` says: the limits, the day so far, and each session's use.
    pub fn health(&self, now_ms: i64) -> Value {
        let budgets = self.budgets();
        if budgets.is_empty() {
            return Value::Null;
        }
        let limits = |l: &super::account::Limits| {
            Value::Object(
                Scope::ALL
                    .iter()
                    .filter_map(|s| l.get(*s).map(|v| (s.as_str().to_string(), json!(v))))
                    .collect(),
            )
        };
        let ledger = self.ledger.lock();
        let facts = self.facts.lock();
        let sessions: Map<String, Value> = ledger
            .sessions()
            .filter_map(|id| {
                let (session_cost, run) = ledger.session(id)?;
                let workspace = facts.get(id).and_then(|f| f.workspace.clone());
                let applied = budgets.applied(workspace.as_deref());
                let mut uses = vec![];
                if let (Some(limit), Some((_, cost))) = (applied.limits.run, run) {
                    uses.push((Scope::Run, cost, limit));
                }
                if let Some(limit) = applied.limits.session {
                    uses.push((Scope::Session, session_cost, limit));
                }
                if let Some(limit) = applied.limits.day {
                    uses.push((Scope::Day, ledger.day(applied.day, now_ms), limit));
                }
                // The one nearest its limit is what a person reads first.
                let nearest = uses
                    .iter()
                    .max_by(|a, b| share(a.1, a.2).total_cmp(&share(b.1, b.2)))
                    .map(|(scope, cost, limit)| {
                        format!("{}/{} {CURRENCY} {}", figure(*cost), figure(*limit), scope.as_str())
                    });
                Some((
                    id.to_string(),
                    json!({
                        "session": session_cost,
                        "run": run.map(|(id, cost)| json!({"id": id, "cost": cost})),
                        "limits": limits(&applied.limits),
                        "use": nearest,
                    }),
                ))
            })
            .collect();
        json!({
            "currency": CURRENCY,
            "limits": limits(budgets.base()),
            "overrides": budgets.overrides().iter().map(|o| json!({"workspace": o.workspace, "limits": limits(&o.limits)})).collect::<Vec<_>>(),
            "day": {"utc": true, "cost": ledger.day(None, now_ms)},
            "sessions": sessions,
        })
    }
}

/// The notice that `run` reached a limit, and, when `act` is a cancel the lane takes (no cancel
/// of the run is under way), the hub command that cancels it.
fn stop_run(
    lane: crate::lane::Lane<'_>,
    session: &str,
    (run, notice_run): (&str, Option<&str>),
    (stop, applied, act): (&Crossing, &Applied<'_>, Act),
    level: Capture,
) -> ([Planned; 2], Option<Request>) {
    let notes = notice(stop, applied, act, notice_run, level);
    if !matches!(act, Act::Cancel) {
        return (notes, None);
    }
    let command = notes[0].id.clone();
    if !lane.tracker.note_stop(run, &command, budget_data(stop, applied, act)) {
        return (notes, None);
    }
    let reason = format!(
        "aep-cline: the {} budget is reached ({}): the run is stopped",
        stop.scope.as_str(),
        amounts(stop)
    );
    let request = Request {
        key: CommandKey {
            source: SOURCE.into(),
            id: command.clone(),
        },
        session: session.to_string(),
        command_id: command,
        hub: control::run_abort(session, Some(&reason), &notes[0].id),
        kind: Kind::Cancel { run: run.to_string() },
    };
    (notes, Some(request))
}

fn share(cost: f64, limit: f64) -> f64 {
    if limit > 0.0 {
        cost / limit
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::account::Budgets;
    use crate::lane::{Bus, Ingested, Journal};
    use aep_core::redact::{RedactOptions, Redactor};
    use aep_core::validate::StreamValidator;
    use aep_core::CapturePolicy;

    /// The real Cline 3.0.65 run the hub tests replay.
    const SESSION: &str = "1796007217803_dxv4z";

    fn rig(budget: &str) -> (tempfile::TempDir, Arc<Sessions>, Arc<Watch>, String) {
        let dir = tempfile::tempdir().unwrap();
        let sessions = Arc::new(Sessions::new(
            Journal::new(dir.path()),
            "host".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        ));
        let path = format!(
            "{}/../cline-hooks/tests/data/hooks-cancel/agent_start-global.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let started = match sessions
            .ingest_hook(&std::fs::read(path).unwrap(), &crate::firing::Firing::default())
            .unwrap()
        {
            Ingested::Appended { events, .. } => events,
            other => panic!("{other:?}"),
        };
        let run = started
            .iter()
            .find_map(|e| e.value["run"].as_str())
            .unwrap()
            .to_string();
        let watch = Watch::new(Budgets::parse(budget).unwrap(), None, None);
        (dir, sessions, watch, run)
    }

    fn log(sessions: &Sessions) -> Vec<Value> {
        let text = std::fs::read_to_string(sessions.journal().path(SESSION)).unwrap();
        let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let mut validator = StreamValidator::new();
        for e in &events {
            aep_core::validate::validate_event(e).unwrap_or_else(|v| panic!("{v}: {e}"));
            validator.push(e).unwrap_or_else(|v| panic!("{v}: {e}"));
        }
        events
    }

    fn notices(log: &[Value]) -> Vec<&Value> {
        log.iter().filter(|e| e["type"] == "attention.requested").collect()
    }

    fn usage(id: &str, cost: f64) -> HubEvent {
        HubEvent {
            event: "usage.updated".into(),
            event_id: Some(id.into()),
            session_id: Some(SESSION.into()),
            timestamp: Some(1_796_007_218_000),
            sequence: None,
            // A model the table does not price: Cline's own figure is used.
            payload: json!({"sessionId": SESSION, "delta": {"inputTokens": 10, "outputTokens": 5, "totalCost": cost},
                "agent": {"kind": "lead"}}),
        }
    }

    /// A second session of the same capture, its run open, on the same sessions.
    fn another_session(sessions: &Sessions, id: &str) {
        let path = format!(
            "{}/../cline-hooks/tests/data/hooks-cancel/agent_start-global.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let body = std::fs::read_to_string(path).unwrap().replace(SESSION, id);
        sessions
            .ingest_hook(body.as_bytes(), &crate::firing::Firing::default())
            .unwrap();
    }

    fn usage_in(session: &str, id: &str, cost: f64) -> HubEvent {
        let mut event = usage(id, cost);
        event.session_id = Some(session.into());
        event.payload["sessionId"] = json!(session);
        event
    }

    #[test]
    fn the_day_reached_by_one_session_stops_every_run_the_hub_hosts_under_it() {
        let (_dir, sessions, _, _) = rig("day=2");
        let (link, mut requests) = crate::control::link();
        requests.set_connected(true);
        let watch = Watch::new(Budgets::parse("day=2").unwrap(), Some(link), None);
        let others = ["1796007217804_other", "1796007217805_third"];
        for (i, other) in others.iter().enumerate() {
            another_session(&sessions, other);
            watch.hub_usage(&sessions, other, &usage_in(other, &format!("hevt_o{i}"), 0.1));
        }
        // A session the hub does not host is left to the hook guard.
        another_session(&sessions, "1796007217806_local");
        watch.hub_usage(&sessions, SESSION, &usage("hevt_big", 1.9));
        let mut cancelled: Vec<String> = std::iter::from_fn(|| requests.try_recv()).map(|r| r.session).collect();
        cancelled.sort();
        assert_eq!(
            cancelled,
            vec![SESSION, others[0], others[1]],
            "every hosted run stops at once"
        );
        for other in others {
            let text = std::fs::read_to_string(sessions.journal().path(other)).unwrap();
            let notice: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|e| e["type"] == "attention.requested")
                .collect();
            assert_eq!(notice.len(), 1, "{text}");
            let budget = &notice[0]["data"]["budget"];
            assert_eq!((&budget["name"], &budget["action"]), (&json!("day"), &json!("cancel")));
            assert!(notice[0]["run"].is_string(), "in the run it stops");
        }
        // Their next calls do not cancel again.
        for (i, other) in others.iter().enumerate() {
            watch.hub_usage(&sessions, other, &usage_in(other, &format!("hevt_p{i}"), 0.1));
        }
        assert!(requests.try_recv().is_none(), "one cancel per run");
        assert!(std::fs::read_to_string(sessions.journal().path("1796007217806_local"))
            .unwrap()
            .lines()
            .all(|l| !l.contains("attention.requested")));
    }

    #[test]
    fn the_days_spend_and_its_notices_survive_a_restart() {
        let (dir, sessions, _, _) = rig("day=2");
        let state = dir.path().join("state");
        let kept = || Some(Kept::new(&state));
        let watch = Watch::new(Budgets::parse("day=2").unwrap(), None, kept());
        watch.hub_usage(&sessions, SESSION, &usage("hevt_1", 1.7));
        assert_eq!(notices(&log(&sessions)).len(), 1, "80% of the day");
        // A restart: the day goes on from 1.70, its 80% notice given already.
        let watch = Watch::new(Budgets::parse("day=2").unwrap(), None, kept());
        let now = crate::lane::sessions::now_ms() as i64;
        assert_eq!(watch.ledger.lock().day(None, now), 1.7);
        watch.hub_usage(&sessions, SESSION, &usage("hevt_2", 0.1));
        assert_eq!(notices(&log(&sessions)).len(), 1, "no second 80% notice");
        watch.hub_usage(&sessions, SESSION, &usage("hevt_3", 0.25));
        let log = log(&sessions);
        assert_eq!(notices(&log).len(), 2);
        assert_eq!(notices(&log)[1]["data"]["budget"]["cost"], json!(2.05));
        // A day kept for another day, or a broken file, is not taken.
        std::fs::write(state.join(super::super::kept::FILE), "[oops").unwrap();
        let watch = Watch::new(Budgets::parse("day=2").unwrap(), None, kept());
        assert_eq!(watch.ledger.lock().day(None, now), 0.0);
        let yesterday = vec![crate::budget::account::KeptDay {
            budget: None,
            day: now.div_euclid(86_400_000) - 1,
            cost: 1.9,
            warned: true,
            reached: false,
        }];
        Kept::new(&state).save(|| yesterday).unwrap();
        let watch = Watch::new(Budgets::parse("day=2").unwrap(), None, kept());
        assert_eq!(watch.ledger.lock().day(None, now), 0.0, "yesterday is not today");
    }

    #[test]
    fn the_store_read_at_each_step_charges_what_was_added_and_the_terminal_only_the_rest() {
        let (_dir, sessions, watch, run) = rig("run=1,session=5");
        let level = Capture::Metadata;
        let cost = |w: &Watch| w.ledger.lock().session(SESSION).unwrap().0;
        assert!(watch.store_spend(SESSION, Some(&run), 0.5, None, level).is_empty());
        assert_eq!(cost(&watch), 0.5);
        // The same total again, or a smaller one (a store read half-written), adds nothing.
        watch.store_spend(SESSION, Some(&run), 0.5, None, level);
        watch.store_spend(SESSION, Some(&run), 0.2, None, level);
        assert_eq!(cost(&watch), 0.5);
        let notices = watch.store_spend(SESSION, Some(&run), 1.2, None, level);
        assert_eq!(notices.len(), 2, "the run's limit, with its auto resolution");
        let data = notices[0].event.data.as_ref().unwrap();
        assert_eq!(data["budget"]["action"], "stop");
        assert!(watch.over(SESSION, Some(&run), None).is_some(), "its next step stops");
        // The terminal says the run cost 1.3: only the 0.1 the store had not said is charged.
        watch.on_event(
            &sessions,
            &json!({"type": "run.failed", "session": SESSION, "run": run, "time": "2026-11-30T02:53:40Z",
                "data": {"cost": {"currency": "USD", "total": 1.3}}}),
        );
        assert!((cost(&watch) - 1.3).abs() < 1e-9, "{}", cost(&watch));
        // Not a number: nothing.
        assert!(watch.store_spend(SESSION, Some(&run), f64::NAN, None, level).is_empty());
    }

    #[test]
    fn a_run_the_hub_does_not_host_gets_the_notice_only_saying_why() {
        let (_dir, sessions, watch, run) = rig("run=1,session=5");
        watch.on_event(
            &sessions,
            &json!({"type": "run.finished", "session": SESSION, "run": run, "time": "2026-11-30T02:53:40Z",
                "data": {"cost": {"currency": "USD", "total": 1.2}}}),
        );
        let log = log(&sessions);
        let n = notices(&log);
        assert_eq!(n.len(), 1, "{log:?}");
        let budget = &n[0]["data"]["budget"];
        assert_eq!((&budget["name"], &budget["action"]), (&json!("run"), &json!("notice")));
        assert!(budget["not_cancelled"]
            .as_str()
            .unwrap()
            .contains("not hosted by Cline's hub"));
        assert!(n[0]["run"].is_null(), "the run is over: the notice stands alone");
        assert!(n[0]["data"]["prompt"].as_str().unwrap().contains("1.20 of 1.00 USD"));
        // The session counted it: 1.2 of 5 is under 80%, and nothing was cancelled.
        assert_eq!(watch.ledger.lock().session(SESSION).unwrap().0, 1.2);
        assert!(log.iter().all(|e| e["type"] != "run.cancelled"));
    }

    #[test]
    fn hub_usage_counts_each_call_once_and_says_when_no_tap_can_cancel() {
        let (_dir, sessions, watch, run) = rig("run=1");
        watch.hub_usage(&sessions, SESSION, &usage("hevt_1", 0.85));
        watch.hub_usage(&sessions, SESSION, &usage("hevt_1", 0.85));
        let warned = log(&sessions);
        assert_eq!(notices(&warned).len(), 1, "a redelivered call is not counted again");
        assert_eq!(notices(&warned)[0]["run"], json!(run), "in the open run");
        assert_eq!(notices(&warned)[0]["data"]["budget"]["threshold"], 0.8);
        watch.hub_usage(&sessions, SESSION, &usage("hevt_2", 0.3));
        let log = log(&sessions);
        let reached = notices(&log)[1];
        assert_eq!(reached["data"]["budget"]["threshold"], 1.0);
        assert_eq!(
            reached["data"]["budget"]["not_cancelled"],
            "not cancelled: the hub tap is off"
        );
        // A frame without a delta, or with one the daemon cannot read, counts nothing.
        let mut bad = usage("hevt_3", 9.0);
        bad.payload["delta"] = json!("x");
        watch.hub_usage(&sessions, SESSION, &bad);
        assert_eq!(notices(&self::log(&sessions)).len(), 2);
        let health = watch.health(1_796_007_218_000);
        assert_eq!(health["sessions"][SESSION]["use"], "1.15/1.00 USD run");
    }
}
