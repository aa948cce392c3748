//! The local view ([`crate::lane::local`]) joined to what people see: a pending approval with
//! what it asks, sessions with their title and folder. Only the signed-in owner's routes (the
//! dashboard's API, which the commands reach over the owner-only socket) serve it; the logs
//! and every sink never see it.

use crate::lane::local::About;
use crate::lane::Sessions;
use crate::views::Pending;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a request waits for Cline's files to be read; past it, it goes without titles
/// (the read goes on and fills the cache for the next).
pub const ABOUT_WAIT: Duration = Duration::from_secs(2);

/// Each pending approval, with `detail` (what it asks) while the daemon holds it.
pub fn pending(list: &[Pending], sessions: &Sessions) -> Vec<Value> {
    list.iter()
        .map(|p| {
            let mut v = json!(p);
            if let Some(detail) = sessions.local().asks(&p.id) {
                v["detail"] = json!(detail);
            }
            // A call held at its hook: answered here whatever the control gate says.
            if sessions.asks().get(&p.id).is_some() {
                v["held"] = json!(true);
            }
            v
        })
        .collect()
}

/// Title and folder of each of `ids` Cline's store names, read off the async workers within
/// [`ABOUT_WAIT`].
pub async fn about(sessions: &Arc<Sessions>, ids: Vec<String>) -> HashMap<String, About> {
    if !sessions.local().is_on() || ids.is_empty() {
        return HashMap::new();
    }
    let s = sessions.clone();
    let read =
        tokio::task::spawn_blocking(move || s.local().about(&ids, |session| s.cline_data(session), s.redactor()));
    match tokio::time::timeout(ABOUT_WAIT, read).await {
        Ok(Ok(about)) => about,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the local view's read failed; titles left out");
            HashMap::new()
        }
        Err(_) => {
            tracing::debug!("Cline's store was slow to read; titles left out this time");
            HashMap::new()
        }
    }
}

/// What an approval asks, as indented lines: each command, each file with the diff summary,
/// the other arguments; a command's lines each on a line of its own. The detail is shown as
/// the daemon made it (visible, each cut saying what it hid); the printing side (`cli::out::print`) makes sure of it.
pub fn asked_lines(detail: &Value, indent: &str) -> String {
    let mut t = String::new();
    let list = |k: &str| detail[k].as_array().cloned().unwrap_or_default();
    let text = |v: &Value| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
    for c in list("commands") {
        t.push_str(&format!(
            "{indent}$ {}\n",
            text(&c).replace('\n', &format!("\n{indent}  "))
        ));
    }
    let diff = detail
        .get("diff")
        .map(|d| format!("  +{} \u{2212}{} lines", d["added"], d["removed"]))
        .unwrap_or_default();
    for (i, f) in list("files").iter().enumerate() {
        t.push_str(&format!(
            "{indent}file {}{}\n",
            text(f),
            if i == 0 { diff.as_str() } else { "" }
        ));
    }
    if list("files").is_empty() && !diff.is_empty() {
        t.push_str(&format!("{indent}{}\n", diff.trim()));
    }
    for a in list("args") {
        t.push_str(&format!(
            "{indent}{}: {}\n",
            text(&a["name"]),
            text(&a["value"]).replace('\n', &format!("\n{indent}  "))
        ));
    }
    if let Some(n) = detail["more"].as_u64() {
        t.push_str(&format!("{indent}and {n} more\n"));
    }
    if let Some(why) = detail["unreadable"].as_str() {
        t.push_str(&format!("{indent}{why}\n"));
    }
    t
}
