//! Supervision: one cancellation token and one task tracker (tokio-util) for every long-lived
//! task the daemon starts (the spool drain, the session sweep, the sink pumps, the relay and
//! hub connections). A task that ends on its own or panics is logged and restarted after a
//! jittered backoff, never silently gone; at shutdown the token stops them all and the tracker
//! waits for them, so the daemon exits only when nothing is half-done.

use crate::backoff::Backoff;
use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How long shutdown waits for tasks to stop before it gives up on them.
pub const STOP_WITHIN: Duration = Duration::from_secs(5);

#[derive(Clone, Default)]
pub struct Supervisor {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Supervisor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancelled when the daemon is stopping.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Keeps a task running until shutdown: `start` makes a fresh run of it each time. A run
    /// that returns or panics before shutdown is logged and started again after a backoff.
    pub fn keep<F, Fut>(&self, name: &'static str, start: F)
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let token = self.token.clone();
        self.tracker.spawn(async move {
            let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
            loop {
                let mut run = tokio::spawn(start());
                let ended = tokio::select! {
                    _ = token.cancelled() => {
                        run.abort();
                        let _ = run.await;
                        return;
                    }
                    ended = &mut run => ended,
                };
                let wait = backoff.next_wait();
                match ended {
                    Ok(()) => tracing::error!(task = name, restart_in = ?wait, "a daemon task stopped on its own; restarting it"),
                    Err(e) => tracing::error!(task = name, error = %e, restart_in = ?wait, "a daemon task failed; restarting it"),
                }
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        });
    }

    /// Runs `tick` every `every` until shutdown, off the async workers (it may do file I/O).
    pub fn every(&self, name: &'static str, every: Duration, tick: impl Fn() + Send + Sync + Clone + 'static) {
        self.keep(name, move || {
            let tick = tick.clone();
            async move {
                let mut interval = tokio::time::interval(every);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    interval.tick().await;
                    let tick = tick.clone();
                    if let Err(e) = tokio::task::spawn_blocking(tick).await {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            }
        });
    }

    /// Stops every task and waits for them (at most [`STOP_WITHIN`]).
    pub async fn shutdown(&self) {
        self.token.cancel();
        self.tracker.close();
        if tokio::time::timeout(STOP_WITHIN, self.tracker.wait()).await.is_err() {
            tracing::warn!(
                within = ?STOP_WITHIN,
                "some daemon tasks did not stop in time; exiting anyway (every line is already written)"
            );
        }
    }
}

/// Resolves when the process is asked to stop (SIGINT or SIGTERM).
pub async fn signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot watch SIGTERM; stopping only on SIGINT");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_failing_task_is_restarted_and_shutdown_stops_it() {
        let supervisor = Supervisor::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        supervisor.keep("flaky", move || {
            let runs = counted.clone();
            async move {
                if runs.fetch_add(1, Ordering::SeqCst) < 2 {
                    panic!("boom");
                }
                std::future::pending::<()>().await;
            }
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while runs.load(Ordering::SeqCst) < 3 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(runs.load(Ordering::SeqCst), 3, "restarted after each panic");
        tokio::time::timeout(Duration::from_secs(2), supervisor.shutdown())
            .await
            .expect("shutdown stops the pending task");
    }
}
