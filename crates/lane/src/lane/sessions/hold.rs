//! The Cline 2.x `TaskCancel` hold: 2.x fires a `TaskCancel` after every successful
//! `TaskComplete`, from a racing hook process, so a cancel is held (the tracker keeps it, the
//! registry notes since when) and applied only if no completion came within [`CANCEL_HOLD`].

use super::Sessions;
use crate::lane::reconcile::{End, RunOutcome};
use std::time::{Duration, Instant};

/// How long a Cline 2.x `TaskCancel` is held before it cancels its run: 2.x fires one 60-200 ms
/// after every successful `TaskComplete`, and the two hook processes race, so the completion
/// may reach the daemon after it (see `cline_hooks::session`). A spooled completion is ingested
/// within the spool drain's second.
pub const CANCEL_HOLD: Duration = Duration::from_secs(2);

impl Sessions {
    /// Applies the Cline 2.x `TaskCancel`s held longer than [`CANCEL_HOLD`] with no completion
    /// after them: each cancels its run (`run.cancelled {by: "user"}`, at the hook's time), or
    /// fails it when the model failed for good (said by a `Notification` or the task's record).
    /// Returns how many it applied.
    pub fn release_held(&self, now: Instant) -> usize {
        let due: Vec<String> = self
            .live
            .iter()
            .filter(|entry| {
                let Some(guard) = entry.value().try_lock() else {
                    return false;
                };
                guard
                    .as_ref()
                    .and_then(|s| s.held.as_ref())
                    .is_some_and(|(since, _)| now.saturating_duration_since(*since) >= CANCEL_HOLD)
            })
            .map(|entry| entry.key().clone())
            .collect();
        let mut released = 0;
        for session in due {
            let done = self.with(&session, |state| {
                let Some((since, time)) = state.held.clone() else {
                    return Ok(false);
                };
                if now.saturating_duration_since(since) < CANCEL_HOLD {
                    return Ok(false);
                }
                // No user cancels a 2.x run whose record says the model failed for good: the
                // `Notification` that says so may be late (its process outlives the CLI) or lost.
                let record = state.cline_data.as_deref().and_then(|dir| {
                    crate::lane::task_record::read(&cline_usage::Layout::from_text(dir).data, &session)
                });
                if let Some(End {
                    run: RunOutcome::ApiFailed(failure),
                    ..
                }) = record
                {
                    state.tracker.note_api_failure(failure);
                }
                let planned = state.tracker.release_held(&mut aep_core::id::new_id);
                self.commit(&session, state, &planned, None, &time)?;
                state.held = None;
                Ok(true)
            });
            match done {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(%session, error = %e, "a held TaskCancel could not be applied; retried next tick")
                }
            }
        }
        released
    }
}
