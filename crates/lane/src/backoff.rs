//! Reconnect pacing, written once for every outbound connection (the relay binding, the hub
//! tap) and for restarting a failed task: exponential from `base` to `max`, each wait jittered
//! by up to ±20 %, so a fleet of daemons that lost the same peer does not come back in step.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max: max.max(base),
            next: base,
        }
    }

    /// The wait before the next attempt; each call doubles the one after, up to `max`.
    pub fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        jitter(wait)
    }

    /// The peer answered: the next failure waits `base` again.
    pub fn reset(&mut self) {
        self.next = self.base;
    }
}

/// `d` ± up to 20 %.
fn jitter(d: Duration) -> Duration {
    let factor = 0.8 + 0.4 * fastrand::f64();
    d.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_to_the_cap_with_jitter_and_reset() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let waits: Vec<f64> = (0..6).map(|_| b.next_wait().as_secs_f64()).collect();
        for (wait, nominal) in waits.iter().zip([1.0, 2.0, 4.0, 8.0, 10.0, 10.0]) {
            assert!(
                (nominal * 0.8..=nominal * 1.2).contains(wait),
                "{wait} is not within 20 % of {nominal}"
            );
        }
        let distinct: std::collections::HashSet<u128> =
            (0..20).map(|_| jitter(Duration::from_secs(1)).as_nanos()).collect();
        assert!(distinct.len() > 1, "waits are jittered");
        b.reset();
        assert!(b.next_wait() <= Duration::from_millis(1200));
    }
}
