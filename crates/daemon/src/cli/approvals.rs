//! `aep-cline approvals`: the approvals nobody has answered yet, with the short id to answer by.

use super::client::LogArgs;
use super::out;
use crate::people::{logs, Pending};
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
#[derive(clap::Args, Debug)]
pub struct ApprovalsArgs {
    /// One JSON array, an object per pending approval.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    logs: LogArgs,
}

/// Every pending approval of a live session, oldest first.
pub fn pending(journal: &crate::lane::Journal) -> Vec<Pending> {
    let mut all: Vec<Pending> = logs::summaries(journal)
        .into_iter()
        .filter(|s| s.live())
        .flat_map(|s| s.pending)
        .collect();
    all.sort_by(|a, b| a.time.cmp(&b.time));
    all
}

pub fn run(args: ApprovalsArgs) -> anyhow::Result<()> {
    let journal = args.logs.journal()?;
    let all = pending(&journal);
    if args.json {
        return out::print_json(&all);
    }
    if all.is_empty() {
        return out::print("no pending approvals\n");
    }
    let now = SystemTime::now();
    let mut rows = vec![["ID", "SESSION", "ASKS", "WAITING", "POLICY", "PROMPT"]
        .map(String::from)
        .to_vec()];
    for p in &all {
        let mut prompt = p.prompt.as_deref().map(|x| out::one_line(x, 70)).unwrap_or_default();
        if !p.answerable {
            prompt.push_str("  (answer in Cline: control is off)");
        }
        rows.push(vec![
            p.short.clone(),
            p.session.clone(),
            p.tool.clone().unwrap_or_else(|| p.kind.clone()),
            out::age(&p.time, now).trim_end_matches(" ago").to_string(),
            p.policy
                .as_ref()
                .map_or("-".into(), |b| format!("{} ({})", b.answer, b.rule)),
            prompt,
        ]);
    }
    let mut text = out::table(&rows);
    text.push_str("answer: aep-cline approve ID | aep-cline deny ID [--reason TEXT] | aep-cline answer ID TEXT\n");
    out::print(&text)
}
