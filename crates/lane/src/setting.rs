//! How a setting's value is read, for every subsystem's clap struct (`server::settings`, each
//! sink's and the hub's `settings.rs`): gates, counts and durations, each refusal naming the
//! setting and saying what to give instead. One set of readers, so `AEP_X=0` or `AEP_Y=5x` is
//! refused in the same words whatever subsystem owns the setting.

use std::time::Duration;

/// A clap value parser for a setting.
pub trait Parser<T>: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {}
impl<T, F: Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static> Parser<T> for F {}

/// A gate: 1/true/on or 0/false/off.
pub fn gate(name: &'static str) -> impl Parser<bool> {
    move |value| match value.trim() {
        "1" | "true" | "on" => Ok(true),
        "0" | "false" | "off" => Ok(false),
        other => Err(format!("{name}={other:?}: use 1 (on) or 0 (off)")),
    }
}

/// A positive whole number of `unit`.
pub fn positive(name: &'static str, unit: &'static str) -> impl Parser<usize> {
    move |value| match value.trim().parse::<usize>() {
        Ok(0) => Err(format!("{name}=0: give a positive number of {unit}")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{name}={value:?} is not a number of {unit}")),
    }
}

/// A positive number of Events, at most a million (a batch or an outbox beyond that is a typo).
pub fn events(name: &'static str) -> impl Parser<usize> {
    move |value| match value.trim().parse::<usize>() {
        Ok(n @ 1..=1_000_000) => Ok(n),
        Ok(n) => Err(format!("{name}={n}: give a number of Events from 1 to 1000000")),
        Err(_) => Err(format!("{name}={value:?} is not a number of Events")),
    }
}

/// A duration of at least `min` such as `500ms`, `90s`, `5m`, `4h` or `30d`
/// (`aep_core::time::duration`); `example` is what the refusal suggests.
pub fn duration(name: &'static str, min: Duration, example: &'static str) -> impl Parser<Duration> {
    move |value| match aep_core::time::duration(value) {
        Ok(d) if !d.is_zero() && d >= min => Ok(d),
        Ok(_) if min.is_zero() => Err(format!("{name}={value:?}: give a duration above zero, e.g. {example}")),
        Ok(_) => Err(format!("{name}={value:?}: give at least {min:?}, e.g. {example}")),
        Err(e) => Err(format!("{name}={value:?} is not a duration ({e}); e.g. {example}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_setting_and_say_what_to_give() {
        assert_eq!(gate("AEP_X")(" on "), Ok(true));
        assert_eq!(gate("AEP_X")("yes"), Err("AEP_X=\"yes\": use 1 (on) or 0 (off)".into()));
        assert_eq!(
            positive("AEP_N", "bytes")("0"),
            Err("AEP_N=0: give a positive number of bytes".into())
        );
        assert_eq!(
            events("AEP_B")("2000000").unwrap_err(),
            "AEP_B=2000000: give a number of Events from 1 to 1000000"
        );
        let d = duration("AEP_D", Duration::ZERO, "60s or 4h");
        assert_eq!(d("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            d("0s").unwrap_err(),
            "AEP_D=\"0s\": give a duration above zero, e.g. 60s or 4h"
        );
        assert!(d("5x").unwrap_err().starts_with("AEP_D=\"5x\" is not a duration"));
        let w = duration("AEP_W", Duration::from_secs(1), "2m");
        assert_eq!(w("500ms").unwrap_err(), "AEP_W=\"500ms\": give at least 1s, e.g. 2m");
    }
}
