//! `aep-cline sessions`: every Cline session in the logs, one row each.

use super::client::LogArgs;
use super::out;
use crate::views::{logs, State, Summary};
use std::time::{Duration, SystemTime};

/// List Cline's sessions (from the logs), one row each.
///
/// Each row: state, when it started and last moved, runs, tool calls, failures, tokens, cost,
/// model and workspace. States: waiting (an approval is pending: `aep-cline approvals`), running (a run is open), idle,
/// ended. Without --all, ended sessions that have not moved for a day are left out. Tokens, cost
/// and the model are blank until the log has them. The workspace is its folder's name where the
/// log holds the path (capture `redacted` or above), else `#` and a short digest of the path
/// (the same workspace always has the same digest). A log read before is read again only from
/// where it grew (an index in the user's cache folder; --no-cache reads every log whole). The
/// daemon does not need to be running;
/// when it runs with budgets (`AEP_CLINE_BUDGET`), BUDGET shows each live session's use of the
/// budget nearest its limit, e.g. `1.20/2.00 USD run`.
#[derive(clap::Args, Debug)]
pub struct SessionsArgs {
    /// Also the sessions that ended more than a day ago.
    #[arg(long)]
    all: bool,
    /// One JSON array, a summary object per session.
    #[arg(long)]
    json: bool,
    /// Read every log whole, not using (nor updating) the index of what each log folded to
    /// (kept in $XDG_CACHE_HOME/aep-cline, else ~/.cache/aep-cline).
    #[arg(long)]
    no_cache: bool,
    #[command(flatten)]
    logs: LogArgs,
}

/// Ended sessions older than this are hidden without --all.
const RECENT: Duration = Duration::from_secs(24 * 3600);

/// The sessions table's columns (the fleet's adds HOST first).
pub(super) const HEADER: [&str; 11] = [
    "SESSION",
    "STATE",
    "STARTED",
    "LAST",
    "RUNS",
    "TOOLS",
    "FAIL",
    "TOKENS",
    "COST",
    "MODEL",
    "WORKSPACE",
];

pub fn run(args: SessionsArgs) -> anyhow::Result<()> {
    let journal = args.logs.journal()?;
    let now = SystemTime::now();
    let cache = (!args.no_cache).then(cline_usage::index_file::folder).flatten();
    let (
        logs::Read {
            sessions: all,
            problems,
        },
        note,
    ) = crate::views::logs_index::read_all(&journal, cache.as_deref());
    if let Some(note) = note {
        eprintln!("aep-cline sessions: {note}");
    }
    for problem in &problems {
        eprintln!("aep-cline sessions: {}", out::terminal(problem));
    }
    let total = all.len();
    let shown: Vec<Summary> = all.into_iter().filter(|s| args.all || listed(s, now)).collect();
    if args.json {
        return out::print_json(&shown);
    }
    if total == 0 {
        eprintln!(
            "no sessions in {} yet: are the hooks installed (`aep-cline install-hooks`) and the daemon running? \
             `aep-cline doctor` checks both",
            journal.dir().display()
        );
        return Ok(());
    }
    // What the running daemon's budgets say of each session (none without a daemon or budgets).
    let budgets = live_budgets();
    // Each session's title and folder, from the running daemon's local view (the owner's
    // alone, over the owner-only socket; never in the logs), as the dashboard shows them.
    let about = local_about();
    let mut rows = vec![HEADER.map(String::from).to_vec()];
    if budgets.is_some() {
        rows[0].push("BUDGET".into());
    }
    if about.is_some() {
        rows[0].push("TITLE".into());
    }
    for s in &shown {
        let mut row = row(s, now);
        if let Some(uses) = &budgets {
            row.push(uses[&s.session]["use"].as_str().unwrap_or("-").to_string());
        }
        if let Some(about) = &about {
            let known = &about[&s.session];
            if let Some(folder) = known["folder"].as_str() {
                let name = std::path::Path::new(folder)
                    .file_name()
                    .map_or(folder.to_string(), |n| n.to_string_lossy().into_owned());
                // The folder's name where the log holds only the workspace's digest.
                row[HEADER.len() - 1] = out::one_line(&name, 40);
            }
            row.push(known["title"].as_str().map_or("-".into(), |t| out::one_line(t, 60)));
        }
        rows.push(row);
    }
    let mut text = out::table(&rows);
    push_left_out(&mut text, total - shown.len());
    out::print(&text)
}

/// Each session's budget use (`1.20/2.00 USD run`) as the running daemon's `/healthz` says it;
/// `None` when no daemon answers or it has no budget.
fn live_budgets() -> Option<serde_json::Value> {
    let daemon = super::client::Daemon::find().ok()?;
    let health = daemon
        .request("GET", "/healthz", None, Duration::from_secs(2))
        .ok()?
        .json();
    let sessions = &health["budget"]["sessions"];
    sessions.is_object().then(|| sessions.clone())
}

/// The titles and folders of the sessions the running daemon's local view knows (the first
/// page of its dashboard's list); `None` without a daemon, or with its local view off.
fn local_about() -> Option<serde_json::Value> {
    let list = super::client::owner_view("/api/sessions?limit=1000")?;
    let about = list
        .get("about")
        .filter(|a| a.as_object().is_some_and(|a| !a.is_empty()))?;
    Some(about.clone())
}

/// Listed without --all: every session not ended, and the ended ones that moved within a day
/// (this machine's table and the fleet's).
pub(super) fn listed(s: &Summary, now: SystemTime) -> bool {
    s.state != State::Ended
        || out::parse_time(&s.last).is_some_and(|t| now.duration_since(t).map_or(true, |d| d < RECENT))
}

/// Says how many ended sessions the table left out (none: nothing).
pub(super) fn push_left_out(text: &mut String, left_out: usize) {
    if left_out > 0 {
        text.push_str(&format!(
            "({left_out} ended sessions older than a day not shown: --all shows them)\n"
        ));
    }
}

pub(super) fn row(s: &Summary, now: SystemTime) -> Vec<String> {
    let mut state = match (s.state, s.pending.len()) {
        (State::Waiting, n) => format!("waiting({n})"),
        (other, _) => other.as_str().to_string(),
    };
    // The guardrail that acted, where people look first.
    if let Some(rule) = &s.denied_by {
        state.push_str(&format!(", denied by {rule}"));
    }
    let tokens = s.total_tokens().map_or("-".to_string(), crate::views::numbers::tokens);
    let cost = s.cost_text();
    vec![
        s.session.clone(),
        state,
        out::when(&s.started),
        out::age(&s.last, now),
        s.runs.to_string(),
        s.tool_calls.to_string(),
        s.failures.to_string(),
        tokens,
        cost,
        s.model.clone().unwrap_or_else(|| "-".into()),
        s.workspace.clone().unwrap_or_else(|| "-".into()),
    ]
}
