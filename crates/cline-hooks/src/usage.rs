//! Usage on the events: what a run (or a session) consumed, as the daemon read it from Cline's
//! own store and hands to the mapping as data. Nothing here reads anything: the mapping stays
//! pure (payload and usage in, events out).
//!
//! Where each fact goes (AEP-0002 §5.2, §5.3):
//! - `gen_ai.usage.input_tokens` (every input token once: uncached + cache reads + cache
//!   writes, as OTel GenAI counts input) and `gen_ai.usage.output_tokens`; `cost {currency,
//!   total, prompt, completion, cache}` when a price is known (prompt = uncached input incl.
//!   cache writes, cache = cache reads). `run.finished`'s schema names them; `run.failed`,
//!   `run.cancelled` and `session.ended` are open schemas (§5.4: an emitter MAY carry more
//!   fields, which default to metadata, §5.1 rule 4), and a run that failed or was cancelled
//!   spent its tokens too, so they carry the same fields under the same names.
//! - The cache counts under OTel GenAI's names, as `aep-cline stream --aep` writes them
//!   (`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`), and
//!   the classes, the number of model calls and the subagents' share in the vendor field
//!   `cline.usage` (`uncached_input`, `cache_read`, `cache_write`, `output`, `model_calls`,
//!   `subagents`, `delegated`, `cost_note`, `source`; metadata: counts, never content).
//! - The model: `gen_ai.request.model` on `session.started` (its schema's home), the provider
//!   as the vendor field `cline.provider`.
//!
//! Subagents: a run's usage includes the calls of the subagents it spawned (they ran inside
//! it, on its bill). A subagent's own run reports its calls in `cline.usage` only, never in
//! `gen_ai.usage.*`, so summing `gen_ai.usage.*` over a session's runs counts each call once.
//! `session.ended` carries the whole session's total (every run, every subagent): a sum over
//! runs, not a further share.

use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The vendor field with the token classes and call counts.
pub const USAGE_FIELD: &str = "cline.usage";
/// The vendor field with the provider on `session.started`.
pub const PROVIDER_FIELD: &str = "cline.provider";
/// The vendor field naming the app on Cline's SDK that ran the session (its store's `source`:
/// `cli`, or an IDE's or the desktop app's name), on `session.started`.
pub const APP_FIELD: &str = "cline.app";

/// Cline's raw counts summed over some model calls (input includes the cache reads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub calls: u64,
}

/// A cost in USD, each class priced once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub total: f64,
    pub prompt: f64,
    pub completion: f64,
    pub cache: f64,
}

/// What one run (or the session) consumed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    /// Every call counted in the event: the agent's own and its subagents'.
    pub total: Counts,
    /// The part of `total` the subagents made.
    pub subagents: Counts,
    /// `None` when no price is known for a model used (`cost_note` says which).
    pub cost: Option<Cost>,
    pub cost_note: Option<String>,
    /// The calls are a subagent's own, already counted in the run that spawned it: reported in
    /// `cline.usage` only.
    pub delegated: bool,
}

/// What the daemon read for one hook: per agent whose run this hook closes, that run's usage;
/// the session's, for `session.ended`; the model, for `session.started`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookUsage {
    pub runs: HashMap<String, Usage>,
    pub session: Option<Usage>,
    pub model: Option<String>,
    pub provider: Option<String>,
    /// The app that ran the session ([`APP_FIELD`]).
    pub app: Option<String>,
}

impl HookUsage {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
            && self.session.is_none()
            && self.model.is_none()
            && self.provider.is_none()
            && self.app.is_none()
    }
}

/// Adds `usage` to a terminal's (or `session.ended`'s) data.
pub fn attach(data: &mut Map<String, Value>, usage: &Usage) {
    let t = &usage.total;
    let uncached = t.input.checked_sub(t.cache_read).map(|fresh| fresh + t.cache_write);
    if !usage.delegated {
        if let Some(u) = uncached {
            data.insert("gen_ai.usage.input_tokens".into(), json!(u + t.cache_read));
        }
        data.insert("gen_ai.usage.output_tokens".into(), json!(t.output));
        // OTel GenAI's cache counts, as `aep-cline stream --aep` writes them.
        data.insert("gen_ai.usage.cache_read.input_tokens".into(), json!(t.cache_read));
        data.insert("gen_ai.usage.cache_creation.input_tokens".into(), json!(t.cache_write));
        if let Some(c) = usage.cost {
            data.insert(
                "cost".into(),
                json!({"currency": "USD", "total": c.total, "prompt": c.prompt, "completion": c.completion, "cache": c.cache}),
            );
        }
    }
    let mut classes = json!({
        "uncached_input": uncached,
        "cache_read": t.cache_read,
        "cache_write": t.cache_write,
        "output": t.output,
        "model_calls": t.calls,
        "source": "store",
    });
    if usage.delegated {
        classes["delegated"] = json!(true);
    }
    if usage.subagents.calls > 0 {
        let s = &usage.subagents;
        classes["subagents"] = json!({
            "input": s.input.checked_sub(s.cache_read).map(|f| f + s.cache_write + s.cache_read),
            "output": s.output,
            "model_calls": s.calls,
        });
    }
    if let Some(note) = usage
        .cost_note
        .as_deref()
        .filter(|_| usage.cost.is_none() && !usage.delegated)
    {
        classes["cost_note"] = json!(note);
    }
    if uncached.is_none() {
        classes.as_object_mut().expect("an object").remove("uncached_input");
    }
    data.insert(USAGE_FIELD.into(), classes);
}

/// Adds the model, the provider and the app to `session.started`'s data.
pub fn attach_model(data: &mut Map<String, Value>, model: Option<&str>, provider: Option<&str>, app: Option<&str>) {
    // A short, plain name: the store's `source` is Cline's, not ours to trust.
    if let Some(a) = app.filter(|a| {
        !a.is_empty() && a.len() <= 64 && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    }) {
        data.insert(APP_FIELD.into(), json!(a));
    }
    if let Some(m) = model.filter(|m| !m.is_empty()) {
        data.insert("gen_ai.request.model".into(), json!(m));
    }
    if let Some(p) = provider.filter(|p| !p.is_empty()) {
        data.insert(PROVIDER_FIELD.into(), json!(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(input: u64, output: u64, read: u64, write: u64, calls: u64) -> Counts {
        Counts {
            input,
            output,
            cache_read: read,
            cache_write: write,
            calls,
        }
    }

    #[test]
    fn a_run_carries_otel_counts_and_the_classes_beside_them() {
        let mut data = Map::new();
        let usage = Usage {
            total: counts(2200, 23, 1600, 10, 3),
            subagents: counts(200, 3, 0, 0, 1),
            ..Usage::default()
        };
        attach(&mut data, &usage);
        assert_eq!(data["gen_ai.usage.input_tokens"], 2210);
        assert_eq!(data["gen_ai.usage.output_tokens"], 23);
        assert!(data.get("cost").is_none(), "no price known: no cost, never 0");
        assert_eq!(
            data[USAGE_FIELD],
            json!({"uncached_input": 610, "cache_read": 1600, "cache_write": 10, "output": 23, "model_calls": 3,
                   "source": "store", "subagents": {"input": 200, "output": 3, "model_calls": 1}})
        );
    }

    #[test]
    fn a_delegated_run_reports_its_calls_in_the_vendor_field_only() {
        let mut data = Map::new();
        let usage = Usage {
            total: counts(200, 3, 0, 0, 1),
            delegated: true,
            ..Usage::default()
        };
        attach(&mut data, &usage);
        assert!(data.get("gen_ai.usage.input_tokens").is_none());
        assert_eq!(data[USAGE_FIELD]["delegated"], true);
        assert_eq!(data[USAGE_FIELD]["uncached_input"], 200);
    }

    #[test]
    fn contradictory_counts_claim_no_input_total() {
        let mut data = Map::new();
        attach(
            &mut data,
            &Usage {
                total: counts(10, 1, 50, 0, 1),
                ..Usage::default()
            },
        );
        assert!(data.get("gen_ai.usage.input_tokens").is_none());
        assert!(data[USAGE_FIELD].get("uncached_input").is_none());
    }
}
