//! Budgets, pure: the limits (`AEP_CLINE_BUDGET`, and the policy file's per-workspace
//! `[[budget]]` overrides) and the ledger that adds each priced model call to its run, its
//! session and its day and says which threshold it crossed. No I/O, no clock: the caller
//! passes the time of each charge (epoch ms).
//!
//! - A threshold is crossed once: the notice at [`WARN_AT`] of a limit and the one at the
//!   limit are each given at most once per budget per run, session or day.
//! - A run is stopped once: the first charge that finds it at or past any of its limits
//!   (run, then session, then day) asks for its cancel, and no later charge asks again.
//! - The day is UTC (one day for a fleet whatever its time zones): a charge on a later UTC
//!   day starts the day's spend, and its notices, over.
//! - Sums never poison: a cost that is negative, NaN or infinite counts as nothing.

use crate::views::numbers::figure;
use aep_core::bounded::BoundedMap;
use globset::{GlobBuilder, GlobMatcher};
use std::collections::HashMap;

/// The variable the limits are read from.
pub const VARIABLE: &str = "AEP_CLINE_BUDGET";
/// Every amount is in this currency (the price table's).
pub const CURRENCY: &str = "USD";
/// The share of a limit at which the first notice is given.
pub const WARN_AT: f64 = 0.8;
/// Sessions the ledger keeps; past it the oldest is forgotten (its spend starts over if it
/// speaks again). Ended sessions are forgotten at once by the caller.
pub const MAX_SESSIONS: usize = 4096;
/// Charges already counted, by their source's id: a redelivered one is not counted twice.
const MAX_SEEN: usize = 4096;
const DAY_MS: i64 = 86_400_000;

/// Days kept across a restart at most (the machine's and one per override).
pub const MAX_KEPT_DAYS: usize = 1024;

/// One day's spend as kept in the state folder: which day budget (`None`: the machine's;
/// else the override's workspace glob), the UTC day number, the cost, the notices given.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptDay {
    pub budget: Option<String>,
    pub day: i64,
    pub cost: f64,
    pub warned: bool,
    pub reached: bool,
}

/// What a budget limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Run,
    Session,
    Day,
}

impl Scope {
    pub const ALL: [Scope; 3] = [Scope::Run, Scope::Session, Scope::Day];

    /// The budget's name, as written in `AEP_CLINE_BUDGET` and in every Event.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Run => "run",
            Scope::Session => "session",
            Scope::Day => "day",
        }
    }
}

/// The limits in USD that apply to a session; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub run: Option<f64>,
    pub session: Option<f64>,
    pub day: Option<f64>,
}

impl Limits {
    pub fn get(&self, scope: Scope) -> Option<f64> {
        match scope {
            Scope::Run => self.run,
            Scope::Session => self.session,
            Scope::Day => self.day,
        }
    }

    fn slot(&mut self, scope: Scope) -> &mut Option<f64> {
        match scope {
            Scope::Run => &mut self.run,
            Scope::Session => &mut self.session,
            Scope::Day => &mut self.day,
        }
    }

    pub fn is_empty(&self) -> bool {
        Scope::ALL.iter().all(|s| self.get(*s).is_none())
    }

    /// `run 2.00 USD, day 50.00 USD`, or `none`.
    pub fn describe(&self) -> String {
        let set: Vec<String> = Scope::ALL
            .iter()
            .filter_map(|s| self.get(*s).map(|l| format!("{} {} {CURRENCY}", s.as_str(), figure(l))))
            .collect();
        if set.is_empty() {
            "none".into()
        } else {
            set.join(", ")
        }
    }
}

/// A budget that cannot be used, said with where it was written and what to write instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error("{at}: {item:?} is not budget=amount; write for example {VARIABLE}=run=2.00,session=10,day=50 (USD)")]
    NotAPair { at: String, item: String },
    #[error("{at}: {key:?} is not a budget; the budgets are run, session and day (USD), for example run=2.00")]
    UnknownKey { at: String, key: String },
    #[error("{at}: {key}={value} is not an amount; write a number of USD, for example {key}=2.50")]
    NotANumber { at: String, key: String, value: String },
    #[error("{at}: {key}={value} is negative; a budget is 0 or more USD (0 stops a run at its first priced call)")]
    Negative { at: String, key: String, value: String },
    #[error("{at}: {key} is given twice; give each budget once")]
    Twice { at: String, key: String },
    #[error(
        "{at}: a [[budget]] needs workspace = \"GLOB\" (a glob on the workspace folder, for example \"**/billing-*\")"
    )]
    NoWorkspace { at: String },
    #[error("{at}: workspace = {pattern:?} is not a glob: {why}")]
    BadGlob { at: String, pattern: String, why: String },
}

/// One `[[budget]]` of the policy file: the workspaces it matches and their limits (the
/// fields it does not give are the environment's).
#[derive(Debug, Clone)]
pub struct Override {
    pub workspace: String,
    matcher: GlobMatcher,
    pub limits: Limits,
    /// It gives its own `day`: its workspaces' day is counted apart from the machine's.
    own_day: bool,
}

/// The limits in force: `AEP_CLINE_BUDGET`, and the overrides, first match wins.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    base: Limits,
    overrides: Vec<Override>,
}

/// The limits that apply to one session, and the day they count in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Applied<'a> {
    pub limits: Limits,
    /// `None`: the machine's day; `Some(glob)`: the day of the override that gives its own.
    pub day: Option<&'a str>,
    /// The override that matched, if any.
    pub workspace: Option<&'a str>,
}

impl Budgets {
    /// Reads `AEP_CLINE_BUDGET` (`run=2.00,session=10,day=50`); empty is no budget.
    pub fn parse(text: &str) -> Result<Budgets, BudgetError> {
        let at = VARIABLE.to_string();
        let mut base = Limits::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(BudgetError::NotAPair { at, item: item.into() });
            };
            let (key, value) = (key.trim(), value.trim());
            let scope = scope_of(&at, key)?;
            let amount = amount(&at, key, value.parse::<f64>().ok(), value)?;
            set_once(&at, &mut base, scope, amount)?;
        }
        Ok(Budgets {
            base,
            overrides: Vec::new(),
        })
    }

    /// These budgets with the policy file's `[[budget]]` tables over them: each needs
    /// `workspace` (a glob on the workspace folder) and gives any of `run`, `session`, `day`;
    /// the others are this one's. Any other key, a bad glob or amount is an error naming the
    /// table.
    pub fn with_overrides(&self, tables: &[toml::Table]) -> Result<Budgets, BudgetError> {
        let mut overrides = Vec::with_capacity(tables.len());
        for (n, table) in tables.iter().enumerate() {
            let at = format!("[[budget]] #{} of the policy file", n + 1);
            let mut workspace = None;
            let mut given = Limits::default();
            for (key, value) in table {
                if key == "workspace" {
                    workspace = Some(value.as_str().ok_or(BudgetError::NoWorkspace { at: at.clone() })?);
                    continue;
                }
                let scope = scope_of(&at, key)?;
                let number = value.as_float().or_else(|| value.as_integer().map(|i| i as f64));
                let amount = amount(&at, key, number, &value.to_string())?;
                set_once(&at, &mut given, scope, amount)?;
            }
            let pattern = workspace.ok_or(BudgetError::NoWorkspace { at: at.clone() })?;
            let matcher = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| BudgetError::BadGlob {
                    at: at.clone(),
                    pattern: pattern.into(),
                    why: e.kind().to_string(),
                })?
                .compile_matcher();
            let mut limits = self.base;
            for scope in Scope::ALL {
                if let Some(l) = given.get(scope) {
                    *limits.slot(scope) = Some(l);
                }
            }
            overrides.push(Override {
                workspace: pattern.into(),
                matcher,
                limits,
                own_day: given.day.is_some(),
            });
        }
        Ok(Budgets {
            base: self.base,
            overrides,
        })
    }

    /// The environment's limits.
    pub fn base(&self) -> &Limits {
        &self.base
    }

    pub fn overrides(&self) -> &[Override] {
        &self.overrides
    }

    /// No limit anywhere: nothing to watch.
    pub fn is_empty(&self) -> bool {
        self.base.is_empty() && self.overrides.iter().all(|o| o.limits.is_empty())
    }

    /// The limits for a session in `workspace` (its folder; unknown: the environment's).
    pub fn applied(&self, workspace: Option<&str>) -> Applied<'_> {
        let matched = workspace.and_then(|w| self.overrides.iter().find(|o| o.matcher.is_match(w)));
        match matched {
            Some(o) => Applied {
                limits: o.limits,
                day: o.own_day.then_some(o.workspace.as_str()),
                workspace: Some(&o.workspace),
            },
            None => Applied {
                limits: self.base,
                day: None,
                workspace: None,
            },
        }
    }
}

fn scope_of(at: &str, key: &str) -> Result<Scope, BudgetError> {
    Scope::ALL
        .into_iter()
        .find(|s| s.as_str() == key)
        .ok_or_else(|| BudgetError::UnknownKey {
            at: at.into(),
            key: key.into(),
        })
}

fn amount(at: &str, key: &str, number: Option<f64>, text: &str) -> Result<f64, BudgetError> {
    match number {
        Some(n) if n.is_finite() && n >= 0.0 => Ok(n),
        Some(n) if n.is_finite() => Err(BudgetError::Negative {
            at: at.into(),
            key: key.into(),
            value: text.into(),
        }),
        _ => Err(BudgetError::NotANumber {
            at: at.into(),
            key: key.into(),
            value: text.into(),
        }),
    }
}

fn set_once(at: &str, limits: &mut Limits, scope: Scope, amount: f64) -> Result<(), BudgetError> {
    let slot = limits.slot(scope);
    if slot.is_some() {
        return Err(BudgetError::Twice {
            at: at.into(),
            key: scope.as_str().into(),
        });
    }
    *slot = Some(amount);
    Ok(())
}

/// Which threshold a charge crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// [`WARN_AT`] of the limit.
    Warning,
    /// The limit itself.
    Reached,
}

impl Level {
    /// The share of the limit: 0.8 or 1.
    pub fn share(self) -> f64 {
        match self {
            Level::Warning => WARN_AT,
            Level::Reached => 1.0,
        }
    }
}

/// A threshold crossed: which budget, its limit, the cost reached there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crossing {
    pub scope: Scope,
    pub level: Level,
    pub limit: f64,
    pub cost: f64,
}

/// One priced model call (or a finished run's whole cost, where only that is known).
#[derive(Debug, Clone, Copy)]
pub struct Charge<'a> {
    /// The source's id for it (a hub event id), so a redelivery is not counted twice.
    pub id: Option<&'a str>,
    pub session: &'a str,
    /// The run it belongs to; `None` counts only in the session and the day.
    pub run: Option<&'a str>,
    pub cost: f64,
    /// When it was made, epoch ms: it names the UTC day.
    pub at_ms: i64,
    pub applied: Applied<'a>,
}

/// What a charge did: the thresholds it crossed (for notices), and the budget that stops its
/// run, once per run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub crossings: Vec<Crossing>,
    pub stop: Option<Crossing>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Spend {
    cost: f64,
    warned: bool,
    reached: bool,
}

impl Spend {
    fn add(&mut self, cost: f64) {
        self.cost += cost;
    }

    /// The threshold this spend has just crossed, each at most once.
    fn crossed(&mut self, scope: Scope, limit: Option<f64>) -> Option<Crossing> {
        let limit = limit?;
        let at = |level| Crossing {
            scope,
            level,
            limit,
            cost: self.cost,
        };
        if self.cost <= 0.0 {
            return None;
        }
        if !self.reached && self.cost >= limit {
            // A jump straight past the limit is one notice, the limit's.
            (self.reached, self.warned) = (true, true);
            return Some(at(Level::Reached));
        }
        if !self.warned && self.cost >= limit * WARN_AT {
            self.warned = true;
            return Some(at(Level::Warning));
        }
        None
    }
}

#[derive(Debug, Clone, Default)]
struct SessionSpend {
    spend: Spend,
    /// The run being charged (one at a time: a session's calls all count in its lead's run).
    run: Option<(String, Spend, bool)>,
}

/// What each session, its current run and each day have cost so far.
#[derive(Debug)]
pub struct Ledger {
    sessions: BoundedMap<String, SessionSpend>,
    /// The machine's day (`None`) and each override's own: (UTC day number, spend).
    days: HashMap<Option<String>, (i64, Spend)>,
    seen: aep_core::bounded::BoundedSet<String>,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger {
            sessions: BoundedMap::new(MAX_SESSIONS),
            days: HashMap::new(),
            seen: aep_core::bounded::BoundedSet::new(MAX_SEEN),
        }
    }
}

impl Ledger {
    /// Adds one charge; says which thresholds it crossed and whether its run must stop.
    pub fn charge(&mut self, c: Charge<'_>) -> Outcome {
        if let Some(id) = c.id {
            if self.seen.contains(id) {
                return Outcome::default();
            }
            self.seen.insert(id.to_string());
        }
        let cost = if c.cost.is_finite() && c.cost > 0.0 {
            c.cost
        } else {
            0.0
        };
        let limits = c.applied.limits;
        let day_number = c.at_ms.div_euclid(DAY_MS);
        let day = self
            .days
            .entry(c.applied.day.map(str::to_string))
            .or_insert((day_number, Spend::default()));
        if day_number > day.0 {
            *day = (day_number, Spend::default());
        }
        day.1.add(cost);
        let mut out = Outcome::default();
        let mut session = self.sessions.remove(c.session).unwrap_or_default();
        session.spend.add(cost);
        if let Some(run) = c.run {
            if session.run.as_ref().is_none_or(|(id, _, _)| id != run) {
                session.run = Some((run.to_string(), Spend::default(), false));
            }
        }
        let run = session.run.as_mut().filter(|(id, _, _)| Some(id.as_str()) == c.run);
        if let Some((_, spend, _)) = run {
            spend.add(cost);
            out.crossings.extend(spend.crossed(Scope::Run, limits.run));
        }
        out.crossings
            .extend(session.spend.crossed(Scope::Session, limits.session));
        out.crossings.extend(day.1.crossed(Scope::Day, limits.day));
        if let Some((_, run_spend, stopped)) = session.run.as_mut().filter(|(id, _, _)| Some(id.as_str()) == c.run) {
            let spent = [
                (Scope::Run, run_spend.cost),
                (Scope::Session, session.spend.cost),
                (Scope::Day, day.1.cost),
            ];
            let over = spent.into_iter().find_map(|(scope, cost)| {
                let limit = limits.get(scope)?;
                (cost > 0.0 && cost >= limit).then_some(Crossing {
                    scope,
                    level: Level::Reached,
                    limit,
                    cost,
                })
            });
            if !*stopped && over.is_some() {
                *stopped = true;
                out.stop = over;
            }
        }
        self.sessions.insert(c.session.to_string(), session);
        out
    }

    /// The first limit that `session` is at or past at `now_ms`: its run `run` (when that is
    /// the run the ledger charges), the session, its day. What stops the next step (a tool
    /// call, a prompt) before it spends more; `None` while every limit has room.
    pub fn over(&self, session: &str, run: Option<&str>, applied: Applied<'_>, now_ms: i64) -> Option<Crossing> {
        let spent = self.sessions.get(session);
        let run_cost = spent
            .and_then(|s| s.run.as_ref())
            .filter(|(id, _, _)| Some(id.as_str()) == run)
            .map(|(_, spend, _)| spend.cost);
        let checks = [
            (Scope::Run, run_cost),
            (Scope::Session, spent.map(|s| s.spend.cost)),
            (Scope::Day, Some(self.day(applied.day, now_ms))),
        ];
        checks.into_iter().find_map(|(scope, cost)| {
            let (cost, limit) = (cost?, applied.limits.get(scope)?);
            (cost > 0.0 && cost >= limit).then_some(Crossing {
                scope,
                level: Level::Reached,
                limit,
                cost,
            })
        })
    }

    /// What a day's spend is kept as across restarts ([`Ledger::restore_days`]).
    pub fn kept_days(&self) -> Vec<KeptDay> {
        let mut days: Vec<KeptDay> = self
            .days
            .iter()
            .map(|(key, (day, spend))| KeptDay {
                budget: key.clone(),
                day: *day,
                cost: spend.cost,
                warned: spend.warned,
                reached: spend.reached,
            })
            .collect();
        days.sort_by(|a, b| a.budget.cmp(&b.budget));
        days
    }

    /// Takes back the days kept by an earlier daemon: only today's (`now_ms`), only finite
    /// non-negative costs, at most [`MAX_KEPT_DAYS`]; the rest is ignored. The notices already
    /// given are not given again.
    pub fn restore_days(&mut self, kept: Vec<KeptDay>, now_ms: i64) -> usize {
        let today = now_ms.div_euclid(DAY_MS);
        let mut taken = 0;
        for k in kept.into_iter().take(MAX_KEPT_DAYS) {
            if k.day != today || !k.cost.is_finite() || k.cost < 0.0 {
                continue;
            }
            let spend = Spend {
                cost: k.cost,
                warned: k.warned,
                reached: k.reached,
            };
            self.days.insert(k.budget, (k.day, spend));
            taken += 1;
        }
        taken
    }

    /// `run` of `session` is being stopped by a limit another charge reached (the day's): no
    /// later charge asks for its cancel again. `false` when it was stopped already.
    pub fn mark_stopped(&mut self, session: &str, run: &str) -> bool {
        let mut spent = self.sessions.remove(session).unwrap_or_default();
        if spent.run.as_ref().is_none_or(|(id, _, _)| id != run) {
            spent.run = Some((run.to_string(), Spend::default(), false));
        }
        let first = spent
            .run
            .as_mut()
            .is_some_and(|(_, _, stopped)| !std::mem::replace(stopped, true));
        self.sessions.insert(session.to_string(), spent);
        first
    }

    /// The session ended: its spend is let go.
    pub fn forget(&mut self, session: &str) {
        self.sessions.remove(session);
    }

    /// What `session` has cost so far, and its current run (its id and cost).
    pub fn session(&self, session: &str) -> Option<(f64, Option<(&str, f64)>)> {
        let s = self.sessions.get(session)?;
        Some((
            s.spend.cost,
            s.run.as_ref().map(|(id, spend, _)| (id.as_str(), spend.cost)),
        ))
    }

    /// Every session the ledger holds.
    pub fn sessions(&self) -> impl Iterator<Item = &str> {
        self.sessions.keys().map(String::as_str)
    }

    /// What the day (`None`: the machine's) has cost at `now_ms`: 0 once a new UTC day began.
    pub fn day(&self, day: Option<&str>, now_ms: i64) -> f64 {
        self.days
            .get(&day.map(str::to_string))
            .filter(|(n, _)| *n == now_ms.div_euclid(DAY_MS))
            .map_or(0.0, |(_, s)| s.cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(text: &str) -> Budgets {
        Budgets::parse(text).unwrap()
    }

    fn tables(text: &str) -> Vec<toml::Table> {
        let doc: toml::Table = text.parse().unwrap();
        doc["budget"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_table().unwrap().clone())
            .collect()
    }

    #[test]
    fn the_variable_is_read_and_every_mistake_is_said_with_what_to_write() {
        let b = env(" run=2.00, session=10 ,day=50");
        assert_eq!(
            *b.base(),
            Limits {
                run: Some(2.0),
                session: Some(10.0),
                day: Some(50.0)
            }
        );
        assert!(env("").is_empty());
        assert_eq!(env("day=0").base().day, Some(0.0));
        let err = |t: &str| Budgets::parse(t).unwrap_err().to_string();
        assert!(err("run").contains("is not budget=amount") && err("run").contains("run=2.00"));
        assert!(err("week=3").contains("\"week\" is not a budget; the budgets are run, session and day"));
        assert!(err("run=two").contains("run=two is not an amount"));
        assert!(err("run=NaN").contains("is not an amount"));
        assert!(err("run=inf").contains("is not an amount"));
        assert!(err("day=-1").contains("day=-1 is negative"));
        assert!(err("run=1,run=2").contains("run is given twice"));
        for e in ["run", "week=3", "run=two", "day=-1"] {
            assert!(err(e).starts_with(VARIABLE), "{}", err(e));
        }
    }

    #[test]
    fn overrides_match_the_workspace_first_match_wins_and_inherit_what_they_do_not_give() {
        let b = env("run=2,session=10,day=50")
            .with_overrides(&tables(
                r#"
                [[budget]]
                workspace = "**/billing-*"
                run = 1.0
                day = 20
                [[budget]]
                workspace = "**/billing-*"
                run = 0.5
                [[budget]]
                workspace = "/srv/*"
                session = 3
                "#,
            ))
            .unwrap();
        let billing = b.applied(Some("/home/dev/billing-api"));
        assert_eq!(
            billing.limits,
            Limits {
                run: Some(1.0),
                session: Some(10.0),
                day: Some(20.0)
            }
        );
        assert_eq!(billing.day, Some("**/billing-*"), "its own day");
        assert_eq!(billing.workspace, Some("**/billing-*"));
        let srv = b.applied(Some("/srv/app"));
        assert_eq!(srv.limits.session, Some(3.0));
        assert_eq!(srv.day, None, "no day of its own: the machine's");
        // `*` stops at a folder boundary.
        assert_eq!(b.applied(Some("/srv/app/sub")).workspace, None);
        assert_eq!(b.applied(None).limits, *b.base());
        assert_eq!(b.applied(Some("/home/dev/other")).limits, *b.base());
    }

    #[test]
    fn a_bad_override_is_an_error_naming_its_table() {
        let base = env("run=2");
        let err = |t: &str| base.with_overrides(&tables(t)).unwrap_err().to_string();
        assert!(err("[[budget]]\nrun = 1").contains("[[budget]] #1 of the policy file: a [[budget]] needs workspace"));
        assert!(err("[[budget]]\nworkspace = 3").contains("needs workspace"));
        let e = err("[[budget]]\nworkspace = \"a\"\n[[budget]]\nworkspace = \"b\"\nhour = 1");
        assert!(e.contains("#2") && e.contains("\"hour\" is not a budget"), "{e}");
        assert!(err("[[budget]]\nworkspace = \"a\"\nrun = \"x\"").contains("is not an amount"));
        assert!(err("[[budget]]\nworkspace = \"a\"\nrun = -2").contains("is negative"));
        assert!(err("[[budget]]\nworkspace = \"a[\"").contains("is not a glob"));
        assert!(base.with_overrides(&[]).unwrap().overrides().is_empty());
    }

    fn charge<'a>(ledger: &mut Ledger, applied: Applied<'a>, run: &'a str, cost: f64, at_ms: i64) -> Outcome {
        ledger.charge(Charge {
            id: None,
            session: "s",
            run: Some(run),
            cost,
            at_ms,
            applied,
        })
    }

    fn levels(out: &Outcome) -> Vec<(Scope, Level)> {
        out.crossings.iter().map(|c| (c.scope, c.level)).collect()
    }

    #[test]
    fn each_threshold_is_crossed_once_and_the_run_is_stopped_once() {
        let b = env("run=1.00");
        let mut l = Ledger::default();
        let a = b.applied(None);
        assert_eq!(charge(&mut l, a, "r1", 0.5, 0), Outcome::default());
        let warned = charge(&mut l, a, "r1", 0.35, 0);
        assert_eq!(levels(&warned), [(Scope::Run, Level::Warning)]);
        assert!((warned.crossings[0].cost - 0.85).abs() < 1e-9);
        assert_eq!(warned.stop, None);
        assert_eq!(charge(&mut l, a, "r1", 0.1, 0), Outcome::default(), "no second notice");
        let over = charge(&mut l, a, "r1", 0.2, 0);
        assert_eq!(levels(&over), [(Scope::Run, Level::Reached)]);
        let stop = over.stop.unwrap();
        assert_eq!((stop.scope, stop.limit), (Scope::Run, 1.0));
        assert!((stop.cost - 1.15).abs() < 1e-9);
        assert_eq!(charge(&mut l, a, "r1", 1.0, 0), Outcome::default(), "stopped once");
        // The next run starts its own count.
        assert_eq!(charge(&mut l, a, "r2", 0.1, 0), Outcome::default());
        assert_eq!(l.session("s").unwrap().1, Some(("r2", 0.1)));
    }

    #[test]
    fn a_jump_past_the_limit_is_one_notice_and_session_and_day_stop_later_runs() {
        let b = env("session=1,day=1.4");
        let mut l = Ledger::default();
        let a = b.applied(None);
        let out = charge(&mut l, a, "r1", 1.2, 0);
        assert_eq!(
            levels(&out),
            [(Scope::Session, Level::Reached), (Scope::Day, Level::Warning)]
        );
        assert_eq!(out.stop.map(|s| s.scope), Some(Scope::Session));
        // A later run of a spent session stops at its first charge, without a new notice.
        let again = charge(&mut l, a, "r2", 0.1, 0);
        assert_eq!(levels(&again), []);
        assert_eq!(again.stop.map(|s| s.scope), Some(Scope::Session));
        // Another session: the day is spent.
        let other = l.charge(Charge {
            id: None,
            session: "s2",
            run: Some("q1"),
            cost: 0.3,
            at_ms: 0,
            applied: a,
        });
        assert_eq!(levels(&other), [(Scope::Day, Level::Reached)]);
        assert_eq!(other.stop.map(|s| s.scope), Some(Scope::Day));
        // A charge without a run counts, and stops nothing.
        let runless = l.charge(Charge {
            id: None,
            session: "s3",
            run: None,
            cost: 0.1,
            at_ms: 0,
            applied: a,
        });
        assert_eq!(runless.stop, None);
    }

    #[test]
    fn the_day_rolls_over_at_utc_midnight_with_its_notices() {
        let b = env("day=1");
        let mut l = Ledger::default();
        let a = b.applied(None);
        let before_midnight = 2 * DAY_MS - 1;
        assert_eq!(
            levels(&charge(&mut l, a, "r1", 0.9, before_midnight)),
            [(Scope::Day, Level::Warning)]
        );
        assert!((l.day(None, before_midnight) - 0.9).abs() < 1e-9);
        assert_eq!(l.day(None, 2 * DAY_MS), 0.0, "a new day has spent nothing");
        assert_eq!(charge(&mut l, a, "r1", 0.5, 2 * DAY_MS), Outcome::default());
        assert_eq!(
            levels(&charge(&mut l, a, "r1", 0.3, 2 * DAY_MS + 5)),
            [(Scope::Day, Level::Warning)]
        );
        // A late charge dated the day before counts in the current day, which goes on.
        charge(&mut l, a, "r1", 0.1, before_midnight);
        assert!((l.day(None, 2 * DAY_MS) - 0.9).abs() < 1e-9);
    }

    #[test]
    fn an_override_with_its_own_day_counts_apart() {
        let b = env("day=10")
            .with_overrides(&tables("[[budget]]\nworkspace = \"/w/billing\"\nday = 1"))
            .unwrap();
        let mut l = Ledger::default();
        let billing = b.applied(Some("/w/billing"));
        charge(&mut l, billing, "r", 0.9, 0);
        assert!((l.day(Some("/w/billing"), 0) - 0.9).abs() < 1e-9);
        assert_eq!(l.day(None, 0), 0.0);
    }

    #[test]
    fn bad_costs_count_as_nothing_and_a_redelivery_is_counted_once() {
        let b = env("run=1");
        let mut l = Ledger::default();
        let a = b.applied(None);
        for bad in [f64::NAN, f64::INFINITY, -5.0, f64::NEG_INFINITY] {
            assert_eq!(charge(&mut l, a, "r", bad, 0), Outcome::default());
        }
        assert_eq!(l.session("s").unwrap().0, 0.0);
        charge(&mut l, a, "r", f64::MAX, 0);
        charge(&mut l, a, "r", f64::MAX, 0);
        assert!(
            l.session("s").unwrap().0.is_infinite(),
            "a sum past f64 is infinite, never NaN"
        );
        let mut l = Ledger::default();
        let once = |l: &mut Ledger| {
            l.charge(Charge {
                id: Some("hevt_1"),
                session: "s",
                run: Some("r"),
                cost: 0.9,
                at_ms: 0,
                applied: a,
            })
        };
        assert_eq!(levels(&once(&mut l)), [(Scope::Run, Level::Warning)]);
        assert_eq!(once(&mut l), Outcome::default());
        assert!((l.session("s").unwrap().0 - 0.9).abs() < 1e-9);
        l.forget("s");
        assert!(l.session("s").is_none());
    }
}
