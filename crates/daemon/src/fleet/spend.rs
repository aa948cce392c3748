//! The fleet's spend, kept as tallies by (UTC day, host, model, workspace): what each Event
//! added to its session's [`Summary`] (tokens, cost, runs) is added to the tally of the
//! Event's day. So the counting is the summary's own, and it outlives the sessions the view
//! lets go of; its size grows with days × machines × models, never with Events.

use crate::views::Summary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a tally holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tally {
    pub runs: u64,
    pub input_tokens: u64,
    pub cache_read_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// The priced runs' cost (`currency` says in what; a second currency is not summed).
    pub cost: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Runs that reported tokens but no cost: `cost` leaves them out.
    pub unpriced_runs: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.runs += other.runs;
        self.input_tokens += other.input_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
        self.unpriced_runs += other.unpriced_runs;
        if other.cost != 0.0 || other.currency.is_some() {
            match (&self.currency, &other.currency) {
                (Some(a), Some(b)) if a != b => {} // another currency: not summed
                _ => {
                    self.cost += other.cost;
                    self.currency = self.currency.take().or(other.currency.clone());
                }
            }
        }
    }

    fn is_empty(&self) -> bool {
        *self == Tally::default()
    }

    /// Spend as people read it.
    pub fn cost_text(&self) -> String {
        let priced = self
            .currency
            .as_deref()
            .map(|c| crate::views::numbers::money(self.cost, c));
        match (priced, self.unpriced_runs) {
            (Some(p), 0) => p,
            (Some(p), _) => format!("{p} + unpriced"),
            (None, 0) => "-".into(),
            (None, _) => "no price".into(),
        }
    }
}

/// A summary's counters, to take what one Event added.
#[derive(Clone, Copy)]
pub struct Point {
    runs: u64,
    input: u64,
    cache_read: u64,
    output: u64,
    cost: f64,
    unpriced: u64,
}

impl Point {
    pub fn of(s: &Summary) -> Point {
        Point {
            runs: s.runs,
            input: s.input_tokens.unwrap_or(0),
            cache_read: s.cache_read_tokens.unwrap_or(0),
            output: s.output_tokens.unwrap_or(0),
            cost: s.cost.as_ref().map_or(0.0, |c| c.total),
            unpriced: s.unpriced_runs,
        }
    }

    /// Nothing yet: what a whole session's tally is taken from.
    pub const ZERO: Point = Point {
        runs: 0,
        input: 0,
        cache_read: 0,
        output: 0,
        cost: 0.0,
        unpriced: 0,
    };

    /// What `after` has more than `self`, as a tally in the summary's currency.
    pub fn delta(self, after: &Summary) -> Tally {
        let a = Point::of(after);
        let (input, cache_read, output) = (
            a.input.saturating_sub(self.input),
            a.cache_read.saturating_sub(self.cache_read),
            a.output.saturating_sub(self.output),
        );
        let cost = a.cost - self.cost;
        Tally {
            runs: a.runs.saturating_sub(self.runs),
            input_tokens: input,
            cache_read_tokens: cache_read,
            output_tokens: output,
            total_tokens: input + cache_read + output,
            cost,
            currency: (cost != 0.0)
                .then(|| after.cost.as_ref().map(|c| c.currency.clone()))
                .flatten(),
            unpriced_runs: a.unpriced.saturating_sub(self.unpriced),
        }
    }
}

/// A tally's place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Key {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub host: String,
    pub model: String,
    pub workspace: String,
}

/// How `aep-cline fleet usage` groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Group {
    Daily,
    Weekly,
    Monthly,
    Model,
    Host,
}

impl Group {
    /// A row's key for a tally's place.
    fn of(self, k: &Key) -> String {
        match self {
            Group::Daily => k.day.clone(),
            Group::Weekly => week(&k.day),
            Group::Monthly => k.day.get(..7).unwrap_or("-").to_string(),
            Group::Model => k.model.clone(),
            Group::Host => k.host.clone(),
        }
    }
}

/// The Monday of `day`'s week (`day` itself when it is not a date).
fn week(day: &str) -> String {
    match day.parse::<jiff::civil::Date>() {
        Ok(d) => {
            let back = i64::from(d.weekday().to_monday_zero_offset());
            d.checked_sub(jiff::Span::new().days(back))
                .map_or(day.to_string(), |m| m.to_string())
        }
        Err(_) => day.to_string(),
    }
}

/// Saved (a checkpoint) as a list of `[key, tally]`: a JSON map's keys are strings.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(into = "Vec<(Key, Tally)>", from = "Vec<(Key, Tally)>")]
pub struct Usage {
    tallies: BTreeMap<Key, Tally>,
}

impl From<Usage> for Vec<(Key, Tally)> {
    fn from(u: Usage) -> Self {
        u.tallies.into_iter().collect()
    }
}

impl From<Vec<(Key, Tally)>> for Usage {
    fn from(all: Vec<(Key, Tally)>) -> Self {
        Usage {
            tallies: all.into_iter().collect(),
        }
    }
}

impl Usage {
    /// Adds what `after` gained since `before` to the tally of `time`'s day.
    pub fn note(&mut self, host: &str, time: &str, before: Point, after: &Summary) {
        let delta = before.delta(after);
        if delta.is_empty() {
            return;
        }
        let key = Key {
            day: time.get(..10).unwrap_or("-").to_string(),
            host: host.to_string(),
            model: after.model.clone().unwrap_or_else(|| "-".into()),
            workspace: after.workspace.clone().unwrap_or_else(|| "-".into()),
        };
        self.tallies.entry(key).or_default().add(&delta);
    }

    /// Rows grouped by `group`, of the tallies `keep` takes, in key order.
    pub fn rows(&self, group: Group, keep: impl Fn(&Key) -> bool) -> Vec<(String, Tally)> {
        let mut rows: BTreeMap<String, Tally> = BTreeMap::new();
        for (k, t) in self.tallies.iter().filter(|(k, _)| keep(k)) {
            rows.entry(group.of(k)).or_default().add(t);
        }
        rows.into_iter().collect()
    }
}

/// The sum of rows.
pub fn total<'a>(rows: impl IntoIterator<Item = &'a Tally>) -> Tally {
    let mut t = Tally::default();
    for r in rows {
        t.add(r);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_each_event_adds_lands_on_its_day_and_groups_up() {
        let mut usage = Usage::default();
        let mut s = Summary::new("s");
        let mut feed = |s: &mut Summary, e: serde_json::Value| {
            let before = Point::of(s);
            s.apply(&e);
            usage.note("h", e["time"].as_str().unwrap(), before, s);
        };
        feed(
            &mut s,
            json!({"type": "run.started", "session": "s", "seq": 1, "run": "r1", "time": "2026-12-06T10:00:00Z",
                            "data": {"gen_ai.request.model": "m1"}}),
        );
        feed(
            &mut s,
            json!({"type": "run.finished", "session": "s", "seq": 2, "run": "r1", "time": "2026-12-06T10:01:00Z",
                            "data": {"gen_ai.usage.input_tokens": 100, "gen_ai.usage.cache_read.input_tokens": 40,
                                     "gen_ai.usage.output_tokens": 10, "cost": {"total": 0.5, "currency": "USD"}}}),
        );
        feed(
            &mut s,
            json!({"type": "run.finished", "session": "s", "seq": 3, "run": "r2", "time": "2026-12-07T09:00:00Z",
                            "data": {"gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 5}}),
        );
        let daily = usage.rows(Group::Daily, |_| true);
        assert_eq!(daily.len(), 2);
        assert_eq!(daily[0].0, "2026-12-06");
        assert_eq!(
            (
                daily[0].1.runs,
                daily[0].1.input_tokens,
                daily[0].1.cache_read_tokens,
                daily[0].1.total_tokens
            ),
            (1, 60, 40, 110)
        );
        assert_eq!(daily[0].1.cost_text(), "$0.50");
        assert_eq!(daily[1].1.cost_text(), "no price");
        let weekly = usage.rows(Group::Weekly, |_| true);
        assert_eq!(
            weekly.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["2026-11-30", "2026-12-07"]
        );
        let hosts = usage.rows(Group::Host, |_| true);
        assert_eq!((hosts.len(), hosts[0].1.total_tokens), (1, 120));
        assert_eq!(total(hosts.iter().map(|r| &r.1)).cost_text(), "$0.50 + unpriced");
        assert!(usage.rows(Group::Model, |k| k.host == "other").is_empty());
    }
}
