//! RFC 3339 times through one well-kept crate (jiff): what Events carry (AEP-0001 §5: `time`
//! is an RFC 3339 date-time with a zone) and what Cline stamps (`Date.toISOString()`, always
//! UTC; some of its stores and 2.x write a time without a zone, meaning UTC).

use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// `text` as an instant: an RFC 3339 date-time with `Z` or a `±hh:mm` offset (hours 00-23),
/// `T` or a space between date and time. With `lenient`, a date-time without a zone is read
/// as UTC. Nothing else: no bracketed time zone names, no dates that do not exist
/// (`2026-02-31`), no times before year 1 or after 9999.
pub fn parse(text: &str, lenient: bool) -> Option<Timestamp> {
    let text = text.trim();
    if text.contains('[') || !text.is_ascii() {
        return None;
    }
    match zone_of(text) {
        Some(Zone::Utc) | Some(Zone::Offset) => text.parse().ok(),
        Some(Zone::Bad) => None,
        None if lenient => TimeZone::UTC.to_timestamp(text.parse::<DateTime>().ok()?).ok(),
        None => None,
    }
}

/// `at` in UTC with milliseconds, `2026-12-01T05:05:51.796Z`: the form every time this project
/// writes takes.
pub fn millis(at: Timestamp) -> String {
    format!("{at:.3}")
}

/// `at` in UTC to the second, `2026-12-01T05:05:51Z`: for people (a link's expiry).
pub fn seconds(at: Timestamp) -> String {
    format!("{at:.0}")
}

/// A duration as people write it (`90s`, `500ms`, `5m`, `4h`, `30d`, `1h 30m`, or ISO 8601
/// `PT5M`): jiff's friendly format, a day being 24 hours. Months and years are refused (their
/// length depends on the date).
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    let span: jiff::Span = text.trim().parse().map_err(|e: jiff::Error| e.to_string())?;
    let length = span
        .to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .map_err(|e| e.to_string())?;
    std::time::Duration::try_from(length).map_err(|_| "a negative duration".to_string())
}

/// Now, by [`millis`].
pub fn now_millis() -> String {
    millis(Timestamp::now())
}

/// Milliseconds since the Unix epoch as [`millis`]; `None` outside the years 1-9999.
pub fn millis_of_epoch_ms(ms: i64) -> Option<String> {
    Timestamp::from_millisecond(ms).ok().map(millis)
}

/// `text` as milliseconds since the Unix epoch, by [`parse`].
pub fn epoch_ms(text: &str, lenient: bool) -> Option<i64> {
    parse(text, lenient).map(|t| t.as_millisecond())
}

enum Zone {
    Utc,
    Offset,
    Bad,
}

/// The zone designator at the end of a date-time, if it has one (RFC 3339 §5.6).
fn zone_of(text: &str) -> Option<Zone> {
    let bytes = text.as_bytes();
    if matches!(bytes.last(), Some(b'Z' | b'z')) {
        return Some(Zone::Utc);
    }
    // `±hh:mm` after the time (the date's own `-` sits at most 10 bytes in).
    let at = text.rfind(['+', '-']).filter(|&i| i > 10)?;
    match &bytes[at + 1..] {
        [h1, h2, b':', m1, m2] if [h1, h2, m1, m2].iter().all(|b| b.is_ascii_digit()) => {
            let hours = (h1 - b'0') * 10 + (h2 - b'0');
            let minutes = (m1 - b'0') * 10 + (m2 - b'0');
            Some(if hours <= 23 && minutes <= 59 {
                Zone::Offset
            } else {
                Zone::Bad
            })
        }
        _ => Some(Zone::Bad),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_and_offsets_are_the_same_instant_written_back_with_milliseconds() {
        let utc = parse("2026-11-30T02:53:23.341Z", false).unwrap();
        assert_eq!(utc.as_millisecond(), 1_796_007_203_341);
        for same in [
            "2026-11-30T04:53:23.341+02:00",
            "2026-11-29T21:23:23.341-05:30",
            "2026-11-30T02:53:23.341+00:00",
            "2026-11-30t02:53:23.341z",
            "2026-11-30 02:53:23.341Z",
        ] {
            assert_eq!(parse(same, false), Some(utc), "{same}");
        }
        assert_eq!(millis(utc), "2026-11-30T02:53:23.341Z");
        assert_eq!(millis_of_epoch_ms(0).unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            parse("2000-02-29T23:59:59.123456789Z", false).unwrap().as_nanosecond(),
            951_868_799_123_456_789
        );
        assert!(now_millis().ends_with('Z'));
    }

    #[test]
    fn durations_are_read_as_people_write_them() {
        let s = std::time::Duration::from_secs;
        for (text, want) in [
            ("90s", s(90)),
            ("5m", s(300)),
            ("4h", s(14_400)),
            ("30d", s(2_592_000)),
            ("1h 30m", s(5_400)),
            ("PT5M", s(300)),
        ] {
            assert_eq!(duration(text), Ok(want), "{text}");
        }
        assert_eq!(duration("500ms"), Ok(std::time::Duration::from_millis(500)));
        assert_eq!(duration("0s"), Ok(std::time::Duration::ZERO));
        for bad in ["", "soon", "5", "-5m", "1 month", "2y"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
        assert_eq!(seconds(Timestamp::from_second(0).unwrap()), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn a_time_without_a_zone_is_utc_only_when_lenient() {
        assert_eq!(parse("2026-11-30T02:53:23.341", false), None);
        assert_eq!(epoch_ms("2026-11-30T02:53:23.341", true), Some(1_796_007_203_341));
        assert_eq!(epoch_ms("2026-11-30 02:53:23", true), Some(1_796_007_203_000));
    }

    #[test]
    fn anything_else_is_no_time_and_never_a_panic() {
        for bad in [
            "",
            "Z",
            "yesterday",
            "2026-02-31T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-30T02:53:23+2:00",
            "2026-11-30T02:53:23+24:00",
            "2026-11-30T02:53:23+02:60",
            "2026-11-30T02:53:23+02:00[Europe/Paris]",
            "2026-07-03T10:15:04.x1Z",
            "10000-01-01T00:00:00Z",
            "2026-11-30T02:53:23 +02:00",
            "２０２６-11-30T02:53:23Z",
        ] {
            assert_eq!(parse(bad, false), None, "{bad}");
            assert_eq!(parse(bad, true), None, "{bad} (lenient)");
        }
        assert_eq!(millis_of_epoch_ms(253_402_300_800_000), None, "past 9999");
    }
}
