//! `aep-cline approvals`: the approvals nobody has answered yet, with the short id to answer by,
//! and what each asks where the running daemon's local view holds it.

use super::client::LogArgs;
use super::out;
use crate::views::Pending;
use serde_json::Value;
use std::collections::HashMap;
use std::time::SystemTime;

/// List the approvals waiting for an answer, with the short id to answer by.
///
/// Oldest first. Answer with `aep-cline approve ID`, `aep-cline deny ID [--reason TEXT]` or
/// `aep-cline answer ID TEXT`.
///
/// Read from the logs: an approval is pending from its `attention.requested` until its
/// `attention.resolved` (the daemon dismisses what is pending when the hub connection or the
/// session ends). POLICY names the rule of AEP_CLINE_POLICY that decided it: an approve or deny
/// on its way to Cline, or ask (a person answers).
///
/// What each asks (its command, files and diff summary) comes from the running
/// daemon's memory, to its owner only (AEP_CLINE_LOCAL_DETAIL); the logs hold it only at the
/// capture AEP_CAPTURE allows.
#[derive(clap::Args, Debug)]
pub struct ApprovalsArgs {
    /// One JSON array, an object per pending approval.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    logs: LogArgs,
}

/// Every pending approval of a live session, oldest first: from the index of the logs that
/// `sessions` keeps (a log that grew is folded on from where it was read; one that did not is
/// not read at all), so a store of ten thousand sessions answers at once.
pub fn pending(journal: &crate::lane::Journal) -> Vec<Pending> {
    let cache = cline_usage::index_file::folder();
    let (read, note) = crate::views::logs_index::read_all(journal, cache.as_deref());
    if let Some(note) = note {
        eprintln!("aep-cline: {note}"); // approvals, or approve finding its id
    }
    let mut all: Vec<Pending> = read
        .sessions
        .into_iter()
        .filter(|s| s.live())
        .flat_map(|s| s.pending)
        .collect();
    all.sort_by(|a, b| a.time.cmp(&b.time));
    all
}

/// What the running daemon's local view says each pending approval asks, by request id.
pub fn asked() -> HashMap<String, Value> {
    let Some(Value::Array(list)) = super::client::owner_view("/api/approvals") else {
        return HashMap::new();
    };
    list.into_iter()
        .filter_map(|p| Some((p["id"].as_str()?.to_string(), p.get("detail")?.clone())))
        .collect()
}

pub fn run(args: ApprovalsArgs) -> anyhow::Result<()> {
    let journal = args.logs.journal()?;
    let all = pending(&journal);
    let asked = if all.is_empty() { HashMap::new() } else { asked() };
    if args.json {
        let with: Vec<Value> = all
            .iter()
            .map(|p| {
                let mut v = serde_json::json!(p);
                if let Some(d) = asked.get(&p.id) {
                    v["detail"] = d.clone();
                }
                v
            })
            .collect();
        return out::print_json(&with);
    }
    if all.is_empty() {
        return out::print("no pending approvals\n");
    }
    let now = SystemTime::now();
    let mut rows = vec![HEADER.map(String::from).to_vec()];
    rows.extend(all.iter().map(|p| row(p, now)));
    let mut text = out::table(&rows);
    for p in &all {
        if let Some(d) = asked.get(&p.id) {
            text.push_str(&format!(
                "\n{} asks ({}):\n",
                p.short,
                p.tool.as_deref().unwrap_or(&p.kind)
            ));
            text.push_str(&crate::views::local::asked_lines(d, "  "));
        }
    }
    if !asked.is_empty() {
        text.push('\n');
    }
    text.push_str("answer: aep-cline approve ID | aep-cline deny ID [--reason TEXT] | aep-cline answer ID TEXT\n");
    out::print(&text)
}

/// The approvals table's columns (the fleet's adds HOST after ID).
pub(super) const HEADER: [&str; 6] = ["ID", "SESSION", "ASKS", "WAITING", "POLICY", "PROMPT"];

/// The rule that decided it, and the time left before the policy answers (`deny in 9m`).
fn policy_cell(p: &crate::views::Pending, now: SystemTime) -> String {
    let rule = p.policy.as_ref().map(|b| format!("{} ({})", b.answer, b.rule));
    let left = p.expires.as_ref().map(|e| {
        let left = out::parse_time(&e.at).and_then(|t| t.duration_since(now).ok());
        match left {
            Some(d) => format!("{} in {}", e.answer, out::short_duration(d)),
            None => format!("{} now", e.answer),
        }
    });
    match (rule, left) {
        (Some(r), Some(l)) => format!("{r}, {l}"),
        (Some(r), None) => r,
        (None, Some(l)) => l,
        (None, None) => "-".into(),
    }
}

/// One pending approval as a row of [`HEADER`].
pub(super) fn row(p: &crate::views::Pending, now: SystemTime) -> Vec<String> {
    let mut prompt = p.prompt.as_deref().map(|x| out::one_line(x, 70)).unwrap_or_default();
    if !p.answerable {
        prompt.push_str("  (answer in Cline: control is off)");
    }
    vec![
        p.short.clone(),
        p.session.clone(),
        p.tool.clone().unwrap_or_else(|| p.kind.clone()),
        out::age(&p.time, now).trim_end_matches(" ago").to_string(),
        policy_cell(p, now),
        prompt,
    ]
}
