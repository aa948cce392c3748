//! Which `(epoch, seq)` positions the console believes. A session's position only grows: an
//! Event at or before it is a redelivery ([`crate::views::Summary::is_new`]). So one Event
//! placed absurdly far ahead (a `seq` of 10^15, an epoch from the future) would make every
//! later real Event of that session look like a redelivery, for good. Such a position cannot
//! come from a daemon, so it is refused before it is folded in, and the session stays where
//! it was.
//!
//! What a daemon's positions can be (docs/architecture.md, "Durability"): `seq` counts a
//! session's Events one by one within an epoch, a position taken only by an Event that was
//! logged; the epoch is 0, or, when a retired session's last position is unreadable, the
//! clock's seconds since 1970 (and `seq` starts again from 0 there). What the console may
//! miss of a session is little: Events too large for the server (skipped one by one), the
//! start of a session whose first messages aged out of the stream. Hence:
//! - within the epoch last seen, `seq` at most [`MAX_STEP`] past the last one seen;
//! - in a later epoch, or for a session not seen yet, `seq` at most [`MAX_STEP`] (from 0);
//! - an epoch at most [`EPOCH_SLACK`] past the console's clock (a clock-seeded epoch is a
//!   time: one later than now plus a day's skew is from the future).
//!
//! A million of one session's Events is about 500,000 tool calls: no real session comes near
//! it, and the console never misses that many of one session in a row.

use std::time::{Duration, SystemTime};

/// How far past the last `seq` seen in the same epoch (or past 0) a `seq` may be.
pub const MAX_STEP: u64 = 1_000_000;
/// How far past the console's clock an epoch (seconds since 1970, when clock-seeded) may be.
pub const EPOCH_SLACK: Duration = Duration::from_secs(24 * 3600);

/// Why a position is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Impossible {
    #[error("seq {seq} in epoch {epoch}, more than {MAX_STEP} past {last} (the last seen there)")]
    SeqJump { epoch: u64, seq: u64, last: u64 },
    #[error("epoch {epoch}, past the console's clock (seconds since 1970) by more than a day")]
    FutureEpoch { epoch: u64 },
}

/// Whether `next` may follow `last` (`None`: nothing of the session seen yet), at `now`. An
/// Event without a position (no `seq`) is never refused here: it moves no position.
pub fn check(last: Option<(u64, u64)>, next: Option<(u64, u64)>, now: SystemTime) -> Result<(), Impossible> {
    let Some((epoch, seq)) = next else {
        return Ok(());
    };
    let from = match last {
        Some((last_epoch, last_seq)) if last_epoch == epoch => last_seq,
        // An earlier epoch is a redelivery; the fold says so, not this.
        Some((last_epoch, _)) if epoch < last_epoch => return Ok(()),
        _ => 0,
    };
    if epoch > 0 {
        let clock = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default() + EPOCH_SLACK;
        if epoch > clock.as_secs() {
            return Err(Impossible::FutureEpoch { epoch });
        }
    }
    if seq > from.saturating_add(MAX_STEP) {
        return Err(Impossible::SeqJump { epoch, seq, last: from });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_a_daemon_can_take_pass_and_absurd_ones_do_not() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let ok = |last, next| check(last, next, now).is_ok();
        assert!(ok(None, Some((0, 1))));
        assert!(ok(None, Some((0, MAX_STEP))), "a session whose start aged out");
        assert!(ok(Some((0, 7)), Some((0, 8))));
        assert!(ok(Some((0, 7)), Some((0, 7 + MAX_STEP))));
        assert!(ok(Some((0, 7)), Some((1_799_999_000, 0))), "a clock-seeded epoch");
        assert!(
            ok(Some((5, 7)), Some((3, 1_000_000_000_000))),
            "older: the fold's redelivery"
        );
        assert!(ok(None, None), "no position moves nothing");
        assert_eq!(
            check(Some((0, 7)), Some((0, 1_000_000_000_000_000)), now),
            Err(Impossible::SeqJump {
                epoch: 0,
                seq: 1_000_000_000_000_000,
                last: 7
            })
        );
        assert!(!ok(None, Some((0, u64::MAX))));
        assert!(!ok(Some((0, 7)), Some((1, MAX_STEP + 1))), "a new epoch starts from 0");
        assert_eq!(
            check(None, Some((1_800_000_000 + 2 * 24 * 3600, 0)), now),
            Err(Impossible::FutureEpoch {
                epoch: 1_800_000_000 + 2 * 24 * 3600
            })
        );
        assert!(ok(None, Some((1_800_000_000 + 3600, 0))), "a skewed clock");
    }
}
