//! One Event as the endpoint holds and forwards it: the parsed value (filters and down-leveling
//! read it) beside the exact line it arrived as (forwarded untouched whenever the subscriber's
//! ceiling allows: a hop preserves bytes, AEP-0001 §4.2), plus the few attributes fan-out asks
//! about on every delivery, read once at admission.
//!
//! `own` marks the daemon's own Events (from the bus, or read back from a session log): those
//! are the ones its logs hold, so a replay may serve them from a log instead of memory.

use crate::lane::Published;
use aep_core::sequence::Position;
use aep_core::{Capture, Severity};
use serde_json::Value;
use std::sync::Arc;

#[derive(Debug)]
pub struct Stored {
    pub event: Arc<Published>,
    /// Admission order on this endpoint's feed: what a subscription compares to know whether
    /// its replay already covered a live Event.
    pub n: u64,
    pub severity: Severity,
    /// The declared level (absent = `metadata`, AEP-0001 §8.2d).
    pub capture: Capture,
    /// One of this daemon's own Events (its session logs hold it), not a collected one.
    pub own: bool,
    /// About how many bytes of memory holding it takes (its line and its parsed value).
    pub weight: usize,
}

impl Stored {
    pub fn new(event: Arc<Published>, n: u64, own: bool) -> Self {
        let v = &event.value;
        let severity = v
            .get("severity")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .unwrap_or_default();
        // Validation admitted only legal levels; anything else reads as `full`, the reading
        // that strips the most at a lower ceiling.
        let capture = match v.get("capture") {
            None => Capture::default(),
            Some(c) => c.as_str().and_then(|s| s.parse().ok()).unwrap_or(Capture::Full),
        };
        let weight = HELD + event.line.len() + heap(v);
        Stored {
            event,
            n,
            severity,
            capture,
            own,
            weight,
        }
    }

    pub fn value(&self) -> &Value {
        &self.event.value
    }

    pub fn ty(&self) -> &str {
        self.value().get("type").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn session(&self) -> Option<&str> {
        self.value().get("session").and_then(Value::as_str)
    }

    /// `(epoch, seq)` for a sequenced session Event: a resumable position (AEP-0001 §7.6).
    pub fn position(&self) -> Option<Position> {
        position_of(self.value())
    }

    /// A control ack (`control.accepted`/`control.rejected`): the only Event the daemon
    /// publishes twice (a recorded ack re-emitted, AEP-0004 §3), so the one a replay's join
    /// must never hold back as already delivered.
    pub fn is_ack(&self) -> bool {
        matches!(self.ty(), "control.accepted" | "control.rejected")
    }

    /// `source` + `id`: the identity buffer admission dedupes on (AEP-0001 §7.4).
    pub fn key(&self) -> (&str, &str) {
        let s = |k: &str| self.value().get(k).and_then(Value::as_str).unwrap_or_default();
        (s("source"), s("id"))
    }
}

/// What holding any Event costs beside its content (the `Stored`, the `Published`, the
/// buffer's slot and its `(source, id)` key), about.
const HELD: usize = 256;

/// About how many heap bytes a parsed JSON value takes (serde_json's `Value`, a B-tree map per
/// object).
fn heap(value: &Value) -> usize {
    const SLOT: usize = std::mem::size_of::<Value>();
    match value {
        Value::String(s) => s.capacity(),
        Value::Array(items) => items.capacity() * SLOT + items.iter().map(heap).sum::<usize>(),
        // Per entry: the key, the value's slot, and the tree's share of node overhead.
        Value::Object(map) => map.iter().map(|(k, v)| k.capacity() + SLOT + 24 + heap(v)).sum(),
        _ => 0,
    }
}

pub fn position_of(event: &Value) -> Option<Position> {
    let seq = event.get("seq")?.as_u64()?;
    let epoch = event.get("epoch").and_then(Value::as_u64).unwrap_or(0);
    Some(Position { epoch, seq })
}
