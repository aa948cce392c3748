//! Waiting for what a test needs (a log line, an event, a port, a file) instead of sleeping:
//! the machine running the suite may be loaded, so a wait is generous and, when it gives up,
//! says what it waited for and what it saw.

use std::time::{Duration, Instant};

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `probe` until it yields; past `within` it panics naming `what` was awaited.
pub fn wait_until<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    wait_until_seen(what, within, || probe().ok_or_else(String::new))
}

/// [`wait_until`] for a probe that says what it sees while the wait goes on (`Err`): the last
/// of those is in the panic.
pub fn wait_until_seen<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + within;
    loop {
        let seen = match probe() {
            Ok(done) => return done,
            Err(seen) => seen,
        };
        assert!(Instant::now() < deadline, "waited {within:?} for {what}; {seen}");
        std::thread::sleep(POLL);
    }
}
