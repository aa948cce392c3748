//! A durable sink's outbox: Events wait here until the peer is ready and while it is busy. It
//! is bounded, whatever the outage. What does not fit is never lost silently:
//! - [`Overflow::FromLog`] (a collector, a stream: nothing may be lost): the new Event is left
//!   out and the caller told ([`Dropped::High`]); it resends from the session logs.
//! - [`Overflow::DropLow`] (the relay binding, AEP-0003 §8.4): `debug`/`info` are dropped first
//!   and counted; when only `notice`-and-above remain, the oldest goes and the caller is told
//!   ([`Dropped::High`]): it resends it from the session log, so nothing at `notice` or above is
//!   ever dropped.

use crate::lane::Published;
use aep_core::Severity;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;

/// What a full outbox gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// `debug`/`info` first, for good (counted); `notice`+ are resent from the log.
    DropLow,
    /// Nothing for good: whatever does not fit is resent from the log.
    FromLog,
}

pub struct Outbox {
    capacity: usize,
    overflow: Overflow,
    queue: VecDeque<Arc<Published>>,
    /// `debug`/`info` Events in `queue`.
    low: usize,
    dropped_low: u64,
    dropped_high: u64,
}

/// What a push had to drop to stay within bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// A `debug`/`info` Event (the new one or a queued one), for good.
    Low,
    /// An Event left out to be resent from the log (the oldest queued one, `notice` or above,
    /// or with [`Overflow::FromLog`] the new one).
    High,
}

fn is_low(event: &Published) -> bool {
    let severity: Severity = event
        .value
        .get("severity")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or_default();
    severity < Severity::Notice
}

impl Outbox {
    pub fn new(capacity: usize, overflow: Overflow) -> Self {
        Outbox {
            capacity: capacity.max(1),
            overflow,
            queue: VecDeque::new(),
            low: 0,
            dropped_low: 0,
            dropped_high: 0,
        }
    }

    pub fn push(&mut self, event: Arc<Published>) -> Option<Dropped> {
        let low = is_low(&event);
        if self.queue.len() < self.capacity {
            self.low += usize::from(low);
            self.queue.push_back(event);
            return None;
        }
        if self.overflow == Overflow::FromLog {
            self.dropped_high += 1;
            return Some(Dropped::High);
        }
        if low {
            self.dropped_low += 1;
            return Some(Dropped::Low);
        }
        if self.low > 0 {
            if let Some(at) = self.queue.iter().position(|e| is_low(e)) {
                self.queue.remove(at);
                self.low -= 1;
                self.dropped_low += 1;
                self.queue.push_back(event);
                return Some(Dropped::Low);
            }
        }
        if let Some(old) = self.queue.pop_front() {
            self.low -= usize::from(is_low(&old));
        }
        self.dropped_high += 1;
        self.queue.push_back(event);
        Some(Dropped::High)
    }

    pub fn pop(&mut self) -> Option<Arc<Published>> {
        let event = self.queue.pop_front()?;
        self.low -= usize::from(is_low(&event));
        Some(event)
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// `debug`/`info` Events dropped so far.
    pub fn dropped_low(&self) -> u64 {
        self.dropped_low
    }

    /// Events left out so far to be resent from their logs.
    pub fn dropped_high(&self) -> u64 {
        self.dropped_high
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(id: &str, severity: Option<&str>) -> Arc<Published> {
        let mut value = json!({"id": id});
        if let Some(s) = severity {
            value["severity"] = json!(s);
        }
        Arc::new(Published {
            line: value.to_string(),
            value,
        })
    }

    fn ids(outbox: &mut Outbox) -> Vec<String> {
        std::iter::from_fn(|| outbox.pop())
            .map(|e| e.value["id"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn pressure_drops_debug_and_info_first_and_counts_every_drop() {
        let mut o = Outbox::new(3, Overflow::DropLow);
        assert_eq!(o.push(ev("a", Some("notice"))), None);
        assert_eq!(o.push(ev("b", None)), None);
        assert_eq!(o.push(ev("c", Some("error"))), None);
        assert_eq!(
            o.push(ev("d", Some("debug"))),
            Some(Dropped::Low),
            "a new low Event is dropped"
        );
        assert_eq!(
            o.push(ev("e", Some("warning"))),
            Some(Dropped::Low),
            "a queued low one makes room"
        );
        assert_eq!(o.dropped_low(), 2);
        assert_eq!(o.push(ev("f", Some("critical"))), Some(Dropped::High));
        assert_eq!(o.dropped_high(), 1);
        assert_eq!(ids(&mut o), ["c", "e", "f"], "order is kept");
        assert_eq!(o.len(), 0);
        assert_eq!(
            o.push(ev("g", Some("info"))),
            None,
            "the low count was kept right through pops"
        );
    }

    #[test]
    fn from_log_drops_nothing_for_good_and_keeps_what_it_holds() {
        let mut o = Outbox::new(2, Overflow::FromLog);
        assert_eq!(o.push(ev("a", Some("debug"))), None);
        assert_eq!(o.push(ev("b", Some("error"))), None);
        assert_eq!(
            o.push(ev("c", Some("info"))),
            Some(Dropped::High),
            "to be resent from the log"
        );
        assert_eq!(o.push(ev("d", Some("critical"))), Some(Dropped::High));
        assert_eq!((o.dropped_low(), o.dropped_high()), (0, 2));
        assert_eq!(ids(&mut o), ["a", "b"]);
    }
}
