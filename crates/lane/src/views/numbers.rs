//! One way to write money and token counts, for every command and the dashboard
//! (`assets/dashboard/view.js` follows the same rules; `tests/data/numbers.json` holds both to
//! the same cases). JSON output keeps the exact numbers; these are for people.
//!
//! - Money: two decimals from a cent up; under a cent, four significant digits (a cheap run is
//!   not "0.00", and 7.59e-05 is not a number a person reads); zero is `0.00`. US dollars as
//!   `$1.23`, any other currency as `1.23 EUR`.
//! - Tokens: exact under a million; from there three significant digits with `M` or `B`
//!   (`1.23M`, `12.3M`, `123M`, `1.23B`), so a count fits eight columns and never lies by more
//!   than half a percent.

/// `amount` in `currency`, by the rule above.
pub fn money(amount: f64, currency: &str) -> String {
    let number = figure(amount.abs());
    let sign = if amount < 0.0 { "-" } else { "" };
    match currency {
        "USD" => format!("{sign}${number}"),
        other => format!("{sign}{number} {other}"),
    }
}

/// An amount's figure alone, by the rule above (`0.00`, `1.62`, `0.0007740`): where a sentence
/// names the currency once (`0.0007740 of 0.0005000 USD`).
pub fn figure(amount: f64) -> String {
    let abs = amount.abs();
    let decimals = if abs == 0.0 || abs >= 0.01 || !abs.is_finite() {
        2
    } else {
        // Four significant digits: the first one sits at 10^floor(log10 |x|).
        (3 - abs.log10().floor() as i64).clamp(2, 15) as usize
    };
    let sign = if amount < 0.0 { "-" } else { "" };
    format!("{sign}{abs:.decimals$}")
}

/// A token count, by the rule above.
pub fn tokens(n: u64) -> String {
    if n < 1_000_000 {
        return n.to_string();
    }
    let (value, unit) = if n < 1_000_000_000 {
        (n as f64 / 1e6, "M")
    } else {
        (n as f64 / 1e9, "B")
    };
    let decimals = match value {
        v if v < 9.995 => 2,
        v if v < 99.95 => 1,
        _ => 0,
    };
    format!("{value:.decimals$}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn cases() -> Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../daemon/tests/data/numbers.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn small_figures_keep_four_significant_digits() {
        assert_eq!(figure(0.000774), "0.0007740");
        assert_eq!(figure(0.0005), "0.0005000");
        assert_eq!(figure(1.6234), "1.62");
        assert_eq!(figure(0.0), "0.00");
    }

    #[test]
    fn money_and_tokens_follow_the_shared_cases() {
        let cases = cases();
        for c in cases["money"].as_array().unwrap() {
            let (amount, currency, want) = (c[0].as_f64().unwrap(), c[1].as_str().unwrap(), c[2].as_str().unwrap());
            assert_eq!(money(amount, currency), want, "{amount} {currency}");
        }
        for c in cases["tokens"].as_array().unwrap() {
            assert_eq!(tokens(c[0].as_u64().unwrap()), c[1].as_str().unwrap(), "{c}");
        }
    }

    #[test]
    fn the_dashboard_writes_them_the_same_way() {
        // The dashboard's own functions, run by Node (the test suite needs it for the real
        // Cline CLIs already).
        let view = concat!(env!("CARGO_MANIFEST_DIR"), "/../daemon/assets/dashboard/view.js");
        let script = format!(
            "import {{ money, count }} from '{view}';\n\
             const cases = {};\n\
             const got = {{ money: cases.money.map(([a, c]) => money(a, c)), tokens: cases.tokens.map(([n]) => count(n)) }};\n\
             console.log(JSON.stringify(got));",
            cases()
        );
        let out = std::process::Command::new("node")
            .args(["--input-type=module", "-e", &script])
            .output()
            .expect("node runs (Node.js 20 is needed for the test suite)");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        let cases = cases();
        for (i, c) in cases["money"].as_array().unwrap().iter().enumerate() {
            assert_eq!(got["money"][i], c[2], "view.js money({}, {})", c[0], c[1]);
        }
        for (i, c) in cases["tokens"].as_array().unwrap().iter().enumerate() {
            assert_eq!(got["tokens"][i], c[1], "view.js count({})", c[0]);
        }
    }
}
