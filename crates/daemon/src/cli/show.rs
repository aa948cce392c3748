//! `aep-cline show SESSION`: one session's timeline.

use super::client::LogArgs;
use super::out;
use crate::views::logs::{self, Found};
use crate::views::timeline::{timeline, Entry};
use crate::views::Summary;
use anyhow::bail;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::SystemTime;

/// Show one session's timeline.
///
/// Its runs with their outcome and duration, each tool call (name, duration, success or
/// failure), approvals (who answered, how, how long they waited), commands and their acks,
/// errors.
///
/// Content (arguments, results, prompts, messages) appears only where the capture level let it
/// into the log. With the daemon running, its owner also sees the session's title (its first
/// prompt) and folder and what a pending approval asks, from the daemon's local view
/// (AEP_CLINE_LOCAL_DETAIL), never from the log. SESSION is the id, or any unique start or end of it (as `aep-cline sessions`
/// prints it).
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The session: its id or a unique start or end of it.
    session: String,
    /// One JSON object: `summary` and `timeline`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    logs: LogArgs,
}

pub fn run(args: ShowArgs) -> anyhow::Result<()> {
    let journal = args.logs.journal()?;
    let summary = find_session(&journal, &args.session)?;
    let events = logs::events(&journal, &summary.session).unwrap_or_default();
    let entries = timeline(&events);
    let local = local_view(&summary.session);
    if args.json {
        return out::print_json(&json!({"summary": summary, "about": local.about, "timeline": entries}));
    }
    out::print(&render(&summary, &local, &entries, SystemTime::now(), "aep-cline"))
}

/// What the running daemon's local view says of a session: its title and folder, and what
/// its pending approvals ask (by request id).
#[derive(Default)]
pub(super) struct Local {
    about: Option<Value>,
    asked: HashMap<String, Value>,
}

fn local_view(session: &str) -> Local {
    let id = percent_encoding::utf8_percent_encode(session, percent_encoding::NON_ALPHANUMERIC);
    let Some(v) = super::client::owner_view(&format!("/api/sessions/{id}?limit=1")) else {
        return Local::default();
    };
    let asked = v["pending"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["id"].as_str()?.to_string(), p.get("detail")?.clone())))
        .collect();
    Local {
        about: v.get("about").filter(|a| !a.is_null()).cloned(),
        asked,
    }
}

/// The session a person named, from the logs.
pub fn find_session(journal: &crate::lane::Journal, query: &str) -> anyhow::Result<Summary> {
    match logs::find(logs::summaries(journal), |s| s.session.as_str(), query) {
        Found::One(s) => Ok(s),
        Found::None => bail!(
            "no session matches {query:?} in {}: `aep-cline sessions --all` lists them",
            journal.dir().display()
        ),
        Found::Many(some) => bail!(
            "{query:?} matches more than one session ({}, ...): type more of it",
            some.join(", ")
        ),
    }
}

/// `commands` is how a person runs the answer shown for a pending approval (`aep-cline`, or
/// `aep-cline fleet` on the console).
pub(super) fn render(s: &Summary, local: &Local, entries: &[Entry], now: SystemTime, commands: &str) -> String {
    let mut t = String::new();
    t.push_str(&format!("session   {}\n", s.session));
    let about = |k: &str| local.about.as_ref().and_then(|a| a[k].as_str());
    if let Some(title) = about("title") {
        t.push_str(&format!("title     {}\n", out::one_line(title, 160)));
    }
    if let Some(folder) = about("folder") {
        t.push_str(&format!("folder    {}\n", out::one_line(folder, 160)));
    }
    t.push_str(&format!(
        "state     {}   started {} UTC   last moved {}{}\n",
        s.state.as_str(),
        out::when(&s.started),
        out::age(&s.last, now),
        s.app
            .as_deref()
            .map(|a| format!("   app {}", app_name(a)))
            .unwrap_or_default()
    ));
    t.push_str(&format!(
        "runs {}   tool calls {}   failures {}   denied {}   cancelled {}   workspace {}   model {}\n",
        s.runs,
        s.tool_calls,
        s.failures,
        s.denied,
        s.cancelled,
        s.workspace.as_deref().unwrap_or("-"),
        s.model.as_deref().unwrap_or("-")
    ));
    if s.input_tokens.is_some() || s.output_tokens.is_some() || s.cost.is_some() {
        let n = |v: Option<u64>| v.map_or("-".into(), crate::views::numbers::tokens);
        t.push_str(&format!(
            "tokens input {} cache read {} output {} total {}   cost {}\n",
            n(s.input_tokens),
            n(s.cache_read_tokens),
            n(s.output_tokens),
            n(s.total_tokens()),
            s.cost_text()
        ));
    }
    if s.unread_lines > 0 {
        t.push_str(&format!(
            "NOTE      {} line(s) of its log not read (not JSON, not UTF-8, too long, or another session's): `aep-cline validate` names them\n",
            s.unread_lines
        ));
    }
    for p in &s.pending {
        t.push_str(&format!(
            "PENDING   {} asks: {}   answer: {commands} approve {} | deny {} [--reason TEXT]\n",
            p.tool.as_deref().unwrap_or(&p.kind),
            p.prompt.as_deref().map(|x| out::one_line(x, 80)).unwrap_or_default(),
            p.short,
            p.short
        ));
        if let Some(d) = local.asked.get(&p.id) {
            t.push_str(&crate::views::local::asked_lines(d, "          "));
        }
    }
    t.push('\n');
    for e in entries {
        t.push_str(&line(e));
    }
    t
}

/// Details `--json` has but a line would only clutter.
const HIDDEN: [&str; 5] = ["ended", "call_id", "respond_via", "answered_by_command", "command"];

fn line(e: &Entry) -> String {
    let indent = if e.run.is_some() && e.kind != "run" { "  " } else { "" };
    let mut l = format!("{}  {indent}{:<9}{} {}", out::clock(&e.time), e.kind, e.name, e.status);
    if let Some(ms) = e.duration_ms {
        l.push_str(&format!(" {}", out::millis(ms)));
    }
    for (k, v) in &e.detail {
        if HIDDEN.contains(&k.as_str()) {
            continue;
        }
        let shown = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) if k.ends_with("_ms") => n.as_u64().map(out::millis).unwrap_or_else(|| n.to_string()),
            Value::Object(o) if k == "cost" => format!(
                "{} {}",
                o.get("total").map(|t| t.to_string()).unwrap_or_default(),
                o.get("currency").and_then(Value::as_str).unwrap_or_default()
            ),
            Value::Array(_) | Value::Object(_) => continue,
            other => other.to_string(),
        };
        let k = k.strip_prefix("gen_ai.usage.").unwrap_or(k);
        l.push_str(&format!(" {k}={}", out::one_line(&shown, 40)));
    }
    l.push('\n');
    for (k, v) in &e.content {
        let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
        l.push_str(&format!("            {indent}{k}: {}\n", out::one_line(&text, 160)));
    }
    l
}

/// An app's name as people say it: the session sources of Cline's SDK (`@cline/core` 0.0.86:
/// core, cli, subagent, desktop, kanban, api, web, vscode, enterprise, ide, jetbrains, neovim,
/// unknown), else as given.
pub fn app_name(source: &str) -> &str {
    match source {
        "cli" => "Cline CLI",
        "vscode" => "VS Code",
        "jetbrains" => "JetBrains",
        "neovim" => "Neovim",
        "desktop" => "Cline desktop",
        "kanban" => "Cline Kanban",
        "ide" => "an IDE",
        "core" | "api" => "the Cline SDK",
        "web" => "Cline web",
        "enterprise" => "Cline Enterprise",
        "subagent" => "a subagent",
        other => other,
    }
}
