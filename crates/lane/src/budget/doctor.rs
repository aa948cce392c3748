//! What `aep-cline doctor` says of the budgets, from their status (`/healthz` `budget`).

use crate::doctor::Report;
use crate::views::numbers::figure;
use serde_json::Value;

pub fn doctor(r: &mut Report, budget: &Value) {
    if budget.is_null() {
        return r.info(
            "budgets",
            "none (AEP_CLINE_BUDGET=run=2.00,session=10,day=50 sets them, in USD)",
        );
    }
    let limits = |l: &Value| {
        let set: Vec<String> = ["run", "session", "day"]
            .iter()
            .filter_map(|k| l[*k].as_f64().map(|v| format!("{k} {}", figure(v))))
            .collect();
        match set.is_empty() {
            true => "none".to_string(),
            false => format!("{} USD", set.join(", ")),
        }
    };
    let overrides = budget["overrides"].as_array().map_or(0, Vec::len);
    r.info(
        "budgets",
        format!(
            "{}; today (UTC) {} USD so far; {overrides} workspace override(s){}",
            limits(&budget["limits"]),
            figure(budget["day"]["cost"].as_f64().unwrap_or(0.0)),
            match budget["overrides"].as_array() {
                Some(o) if !o.is_empty() => format!(
                    ": {}",
                    o.iter()
                        .map(|o| format!("{} ({})", o["workspace"].as_str().unwrap_or("?"), limits(&o["limits"])))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                _ => String::new(),
            }
        ),
    );
}
