//! One Event as the endpoint holds and forwards it: the parsed value (filters and down-leveling
//! read it) beside the exact line it arrived as (forwarded untouched whenever the subscriber's
//! ceiling allows: a hop preserves bytes, AEP-0001 §4.2), plus the few attributes fan-out asks
//! about on every delivery, read once at admission.
//!
//! `own` marks the daemon's own Events (from the bus, or read back from a session log): those
//! are the ones its logs hold, so a replay may serve them from a log instead of memory.

use crate::lane::Published;
use aep_core::sequence::Position;
use aep_core::types::{CONTROL_ACCEPTED, CONTROL_REJECTED};
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
    /// The bytes of memory holding it takes (its line, its parsed value and its place in the
    /// buffer), as malloc reserves them: what the replay buffer's bound counts.
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
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        let weight = held(text("source"), text("id")) + chunk(event.line.capacity()) + heap(v);
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
        matches!(self.ty(), CONTROL_ACCEPTED | CONTROL_REJECTED)
    }

    /// `source` + `id`: the identity buffer admission dedupes on (AEP-0001 §7.4).
    pub fn key(&self) -> (&str, &str) {
        let s = |k: &str| self.value().get(k).and_then(Value::as_str).unwrap_or_default();
        (s("source"), s("id"))
    }
}

/// What malloc reserves for a request of `n` bytes: glibc's chunk (an 8-byte header, 16-byte
/// steps, 32 at least); nothing for an empty allocation. Counted so the buffer's bound is
/// its memory, not its JSON.
pub(crate) fn chunk(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        ((n + 8 + 15) & !15).max(32)
    }
}

/// What holding any Event costs beside its content: the `Stored` and the `Published` (each in
/// its `Arc`), the buffer's slot (its `VecDeque`, grown by doubling) and its dedupe entry
/// (a `(String, String)` in a hash set at most 7/8 full, power-of-two sized: about 1.5 slots).
fn held(source: &str, id: &str) -> usize {
    use std::mem::size_of;
    let arcs = chunk(16 + size_of::<Stored>()) + chunk(16 + size_of::<Published>());
    let slot = 2 * size_of::<Arc<Stored>>();
    let key = (3 * (2 * size_of::<String>() + 1)) / 2 + chunk(source.len()) + chunk(id.len());
    arcs + slot + key
}

/// The heap a parsed JSON value holds (serde_json's `Value`: a `String` per string, a `Vec`
/// per array, a B-tree of nodes of 11 entries per object), counted as malloc reserves it.
fn heap(value: &Value) -> usize {
    use std::mem::size_of;
    const SLOT: usize = size_of::<Value>();
    // A B-tree node: parent, index and length, 11 keys and 11 values; an internal one 12 edges more.
    const LEAF: usize = 16 + 11 * (size_of::<String>() + SLOT);
    const INTERNAL: usize = LEAF + 12 * size_of::<usize>();
    match value {
        Value::String(s) => chunk(s.capacity()),
        Value::Array(items) => chunk(items.capacity() * SLOT) + items.iter().map(heap).sum::<usize>(),
        Value::Object(map) => {
            let n = map.len();
            // Up to 11 entries fit one leaf; past that, splits leave leaves 1/2 to 1/1 full
            // (8 entries, about) under internal nodes of as many edges.
            let (leaves, internal) = match n {
                0 => (0, 0),
                1..=11 => (1, 0),
                _ => {
                    let leaves = n.div_ceil(8);
                    (leaves, leaves.div_ceil(8))
                }
            };
            leaves * chunk(LEAF)
                + internal * chunk(INTERNAL)
                + map.iter().map(|(k, v)| chunk(k.capacity()) + heap(v)).sum::<usize>()
        }
        _ => 0,
    }
}

pub fn position_of(event: &Value) -> Option<Position> {
    let seq = event.get("seq")?.as_u64()?;
    let epoch = event.get("epoch").and_then(Value::as_u64).unwrap_or(0);
    Some(Position { epoch, seq })
}
