//! Waiting for what a test needs (a log line, an event, a port, a file) instead of sleeping:
//! the machine running the suite may be loaded, so a wait is generous and, when it gives up,
//! says what it waited for and what it saw.
//!
//! Every wait looks first, then again every 20 ms, and gives up (panics) only once a look made
//! past its limit has failed too. A probe that costs (it runs a command, opens a connection,
//! drives a browser or a terminal) says how often it may look ([`wait_until_seen_every`]). Async
//! code (a tokio runtime) waits with the `_async` counterparts, which sleep with
//! `tokio::time::sleep` and so leave the runtime's other tasks running meanwhile.

use std::time::{Duration, Instant};

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(20);

/// Polls `probe` until it yields; past `within` it panics naming `what` was awaited.
pub fn wait_until<T>(what: &str, within: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    wait_until_seen(what, within, || probe().ok_or_else(String::new))
}

/// [`wait_until`] for a probe that says what it sees while the wait goes on (`Err`): the last
/// of those is in the panic.
pub fn wait_until_seen<T>(what: &str, within: Duration, probe: impl FnMut() -> Result<T, String>) -> T {
    wait_until_seen_every(what, within, POLL, probe)
}

/// [`wait_until_seen`] looking only every `every`: for a probe that costs (it runs a command,
/// opens a connection, asks a browser or a terminal what it shows), so that waiting does not
/// load the machine the awaited thing runs on.
pub fn wait_until_seen_every<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let seen = match probe() {
            Ok(done) => return done,
            Err(seen) => seen,
        };
        assert!(Instant::now() < deadline, "waited {within:?} for {what}; {seen}");
        std::thread::sleep(every);
    }
}

/// [`wait_until`] in async code: `probe` is awaited at each look, and the wait sleeps with
/// `tokio::time::sleep` (never blocking the runtime's thread).
pub async fn wait_until_async<T>(what: &str, within: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    wait_until_seen_async(what, within, async || probe().await.ok_or_else(String::new)).await
}

/// [`wait_until_seen`] in async code (see [`wait_until_async`]).
pub async fn wait_until_seen_async<T>(
    what: &str,
    within: Duration,
    probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    wait_until_seen_every_async(what, within, POLL, probe).await
}

/// [`wait_until_seen_every`] in async code (see [`wait_until_async`]).
pub async fn wait_until_seen_every_async<T>(
    what: &str,
    within: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        let seen = match probe().await {
            Ok(done) => return done,
            Err(seen) => seen,
        };
        assert!(Instant::now() < deadline, "waited {within:?} for {what}; {seen}");
        tokio::time::sleep(every).await;
    }
}
