//! Times and durations as people read them, for every command, the doctor and the fleet console
//! (JSON output keeps the RFC 3339 times; these are for people).

use std::time::{Duration, SystemTime};

/// An Event time as a `SystemTime` (`None` if it is not RFC 3339).
pub fn parse_time(time: &str) -> Option<SystemTime> {
    aep_core::time::parse(time, true).and_then(|t| SystemTime::try_from(t).ok())
}

/// `5s ago`, `3m ago`, `2h ago`, `4d ago`; `-` for no time.
pub fn age(time: &str, now: SystemTime) -> String {
    match parse_time(time) {
        None => "-".into(),
        Some(t) => match now.duration_since(t) {
            Err(_) => "now".into(),
            Ok(d) => format!("{} ago", short_duration(d)),
        },
    }
}

/// `12s`, `3m`, `2h`, `4d`.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// `MM-DD HH:MM` (UTC) of an Event time.
pub fn when(time: &str) -> String {
    time.get(5..16)
        .map(|t| t.replace('T', " "))
        .unwrap_or_else(|| "-".into())
}

/// `HH:MM:SS` (UTC) of an Event time.
pub fn clock(time: &str) -> String {
    time.get(11..19).unwrap_or("-").to_string()
}

/// `812ms`, `1.5s`, `2m04s`.
pub fn millis(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1000..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}
