//! RFC 3339 times as milliseconds since the Unix epoch, so a run's terminal can say how long
//! the run took (`duration_ms`, AEP-0002 §5) from the times Cline stamped: the hook payloads'
//! `timestamp` (`Date.toISOString()`, always UTC), or a logged `run.started`'s `time`
//! (AEP-0001 §5: RFC 3339 with a zone, any offset).

/// `time` as epoch milliseconds; `None` for anything that is not an RFC 3339 date-time with a
/// zone (`aep_core::time`), or lies before 1970.
pub(crate) fn epoch_ms(time: &str) -> Option<i64> {
    aep_core::time::epoch_ms(time, false).filter(|ms| *ms >= 0)
}

/// Milliseconds from `start` to `end`, when both are known and in that order (the schemas'
/// `duration_ms` is `minimum: 0`; a clock that went backwards gives no duration, not a wrong one).
pub(crate) fn duration_ms(start: Option<i64>, end: Option<i64>) -> Option<u64> {
    u64::try_from(end? - start?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_and_offset_times_are_the_same_instant() {
        let utc = epoch_ms("2026-11-30T02:53:23.341Z").unwrap();
        assert_eq!(utc, 1_796_007_203_341);
        assert_eq!(epoch_ms("2026-11-30T04:53:23.341+02:00"), Some(utc));
        assert_eq!(epoch_ms("2026-11-29T21:23:23.341-05:30"), Some(utc));
        assert_eq!(epoch_ms("2026-11-30T02:53:23.341+00:00"), Some(utc));
        assert_eq!(
            epoch_ms("2026-11-30t02:53:23.341z"),
            Some(utc),
            "RFC 3339 §5.6 allows lower case"
        );
        assert_eq!(epoch_ms("2026-11-30T02:53:23Z"), Some(1_796_007_203_000));
    }

    #[test]
    fn anything_else_is_no_time_and_never_a_panic() {
        for bad in [
            "",
            "Z",
            "yesterday",
            "2026-11-30T02:53:23",
            "2026-11-30T02:53:23+2:00",
            "2026-11-30T02:53:23+24:00",
            "2026-13-30T02:53:23Z",
            "1969-12-31T23:59:59Z",
            "ünïcödé+02:00",
            "2026-11-30T02:53:2ü+02:00",
        ] {
            assert_eq!(epoch_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_duration_needs_both_ends_in_order() {
        assert_eq!(duration_ms(Some(1_000), Some(1_250)), Some(250));
        assert_eq!(duration_ms(Some(1_000), Some(1_000)), Some(0));
        assert_eq!(duration_ms(Some(1_250), Some(1_000)), None);
        assert_eq!(duration_ms(None, Some(1_000)), None);
        assert_eq!(duration_ms(Some(1_000), None), None);
    }
}
