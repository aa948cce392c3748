//! `aep-cline fleet`: the fleet console (docs/fleet.md). Every machine's sessions, pending
//! approvals, spend and health, read from the JetStream stream the daemons publish to and
//! their records in the `aep-cline-machines` bucket ([`crate::fleet`]); commands to any
//! machine over NATS ([`super::fleet_act`]). Each command reads the stream up to its last
//! message at the moment it starts, prints, and exits.

use super::fleet_act;
use super::fleet_conn::Conn;
use super::fleet_serve;
use super::out;
use crate::fleet::command::Asked;
use crate::fleet::health::Status;
use crate::fleet::spend::{self, Group, Point, Tally};
use crate::fleet::view::{Approval, Session};
use crate::views::State;
use clap::{Subcommand, ValueEnum};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

/// The fleet console: every machine's sessions, approvals and spend, and commands to any of
/// them, from the NATS JetStream stream the daemons publish to (docs/fleet.md).
///
/// Reads the same AEP_NATS_* settings as the daemon (server, credentials, TLS, stream). Each
/// command reads the stream up to its last message, prints, and exits; `serve` follows it and
/// serves a page. A machine is online
/// while its daemon's records (heartbeats, in the aep-cline-machines bucket) keep coming,
/// offline when they lapse (--offline-after), stopped when its daemon shut down cleanly,
/// unknown when the stream has its Events but the bucket no record.
#[derive(clap::Args, Debug)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Subcommand, Debug)]
enum FleetCommand {
    Machines(MachinesArgs),
    Sessions(SessionsArgs),
    Approvals(ApprovalsArgs),
    Usage(UsageArgs),
    Show(ShowArgs),
    /// Approve a pending approval on any machine (its id from `aep-cline fleet approvals`).
    Approve(fleet_act::ApproveArgs),
    /// Deny a pending approval on any machine; --reason tells Cline why.
    Deny(fleet_act::DenyArgs),
    /// Answer a pending approval on any machine in words (AEP-0008).
    ///
    /// "approve" or "deny" (any case) is that answer; any other text denies, and Cline gets the
    /// text as the reason.
    Answer(fleet_act::AnswerArgs),
    /// Cancel the running run of a session on any machine.
    Cancel(fleet_act::CancelArgs),
    /// Send a prompt to a session on any machine (queued, or --steer).
    Send(fleet_act::SendArgs),
    Serve(fleet_serve::ServeArgs),
}

/// Narrows what is shown.
#[derive(clap::Args, Debug, Clone, Default)]
struct Filters {
    /// Only this machine (its AEP_HOST).
    #[arg(long)]
    host: Option<String>,
    /// Only sessions in this workspace (its folder's name, or `#` and its digest, as listed).
    #[arg(long)]
    workspace: Option<String>,
    /// Only sessions of this model.
    #[arg(long)]
    model: Option<String>,
}

impl Filters {
    fn host(&self, host: &str) -> bool {
        self.host.as_deref().is_none_or(|h| h == host)
    }

    fn takes(&self, host: &str, workspace: Option<&str>, model: Option<&str>) -> bool {
        self.host(host)
            && self.workspace.as_deref().is_none_or(|w| workspace == Some(w))
            && self.model.as_deref().is_none_or(|m| model == Some(m))
    }
}

/// Every machine: state (online, offline, stopped, unknown), last heard, version, control,
/// sessions, approvals waiting, sinks, spool.
///
/// SESSIONS is what the machine's last record said is live (what the stream shows when it has
/// no record); WAITING counts its sessions with an approval pending.
#[derive(clap::Args, Debug)]
struct MachinesArgs {
    /// Only this machine.
    #[arg(long)]
    host: Option<String>,
    /// Only machines in this state.
    #[arg(long, value_enum)]
    state: Option<MachineState>,
    /// One JSON array, an object per machine.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum MachineState {
    Online,
    Offline,
    Stopped,
    Unknown,
}

/// Every session of every machine, one row each, with its machine (HOST); as `aep-cline
/// sessions`.
#[derive(clap::Args, Debug)]
struct SessionsArgs {
    #[command(flatten)]
    filters: Filters,
    /// Only sessions in this state.
    #[arg(long, value_enum)]
    state: Option<SessionState>,
    /// Also the sessions that ended more than a day ago.
    #[arg(long)]
    all: bool,
    /// One JSON array, a summary object (with its host) per session.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SessionState {
    Waiting,
    Running,
    Idle,
    Ended,
}

/// The approvals waiting for an answer on every machine, oldest first, with the short id to
/// answer by (`aep-cline fleet approve ID`).
#[derive(clap::Args, Debug)]
struct ApprovalsArgs {
    #[command(flatten)]
    filters: Filters,
    /// One JSON array, an object (with its host) per pending approval.
    #[arg(long)]
    json: bool,
    /// Ask each approval's machine what it asks (the command, the files, the diff summary),
    /// over that machine's control subject: shown only to a NATS user who may command it, and
    /// never kept in the stream.
    #[arg(long)]
    detail: bool,
    #[command(flatten)]
    conn: Conn,
}

/// What the fleet's sessions cost, from their Events: by day, week, month (UTC), session,
/// model or host.
///
/// Tokens and cost as the runs reported them (`run.finished` and the like); a run whose model
/// has no price counts its tokens and shows "no price". Days are the Events' (UTC).
#[derive(clap::Args, Debug)]
struct UsageArgs {
    /// How to group.
    #[arg(value_enum, default_value = "daily")]
    group: UsageGroup,
    #[command(flatten)]
    filters: Filters,
    /// One JSON object: {group, rows: [{key, runs, input_tokens, cache_read_tokens,
    /// output_tokens, total_tokens, cost, currency, unpriced_runs}], totals}.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum UsageGroup {
    Daily,
    Weekly,
    Monthly,
    Session,
    Model,
    Host,
}

pub fn run(args: FleetArgs) -> ExitCode {
    let result = match args.command {
        FleetCommand::Machines(a) => machines(a),
        FleetCommand::Sessions(a) => sessions(a),
        FleetCommand::Approvals(a) => approvals(a),
        FleetCommand::Usage(a) => usage_(a),
        FleetCommand::Show(a) => show(a),
        FleetCommand::Serve(a) => fleet_serve::run(a),
        // A person's commands: 0 accepted, 1 rejected, 2 not sent or not decided.
        FleetCommand::Approve(a) => return fleet_act::approve(a),
        FleetCommand::Deny(a) => return fleet_act::deny(a),
        FleetCommand::Answer(a) => return fleet_act::answer(a),
        FleetCommand::Cancel(a) => return fleet_act::cancel(a),
        FleetCommand::Send(a) => return fleet_act::send_input(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("aep-cline fleet: {}", out::terminal(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// One session's timeline, read from the stream when asked: its runs, tool calls, approvals,
/// commands and their acks, as `aep-cline show` prints them on its machine.
///
/// The console keeps summaries only; the detail comes from the session's own subject in the
/// stream (a server-side filter). SESSION is its id or a unique start or end of it, as
/// `fleet sessions` lists it; --host names the machine when two have the same id.
#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// The session: its id or a unique start or end of it.
    session: String,
    /// The machine (its AEP_HOST), when the id is on more than one.
    #[arg(long)]
    host: Option<String>,
    /// One JSON object: `host`, `summary` and `timeline`.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

fn show(args: ShowArgs) -> anyhow::Result<()> {
    let source = args.conn.source()?;
    let (host, summary, events) = args.conn.with_view(async |client, _, view| {
        let s = fleet_act::find_session(
            &view,
            args.host.as_deref(),
            &args.session,
            "`aep-cline fleet sessions --all`",
        )?;
        let events = source.session_events(&client, &s.host, &s.summary.session).await?;
        Ok((s.host, s.summary, events))
    })?;
    let entries = crate::views::timeline::timeline(&events);
    if args.json {
        return out::print_json(&serde_json::json!({"host": host, "summary": summary, "timeline": entries}));
    }
    out::print(&format!(
        "host      {host}\n{}",
        super::show::render(
            &summary,
            &Default::default(),
            &entries,
            SystemTime::now(),
            "aep-cline fleet"
        )
    ))
}

fn machines(args: MachinesArgs) -> anyhow::Result<()> {
    let view = args.conn.with_view(async |_, _, view| Ok(view))?;
    let now = SystemTime::now();
    let all: Vec<_> = view
        .machines(now, args.conn.offline_after)
        .into_iter()
        .filter(|m| args.host.as_deref().is_none_or(|h| h == m.host))
        .filter(|m| {
            args.state.is_none_or(|s| {
                m.status
                    == match s {
                        MachineState::Online => Status::Online,
                        MachineState::Offline => Status::Offline,
                        MachineState::Stopped => Status::Stopped,
                        MachineState::Unknown => Status::Unknown,
                    }
            })
        })
        .collect();
    if args.json {
        return out::print_json(&all);
    }
    if all.is_empty() {
        return out::print("no machines: no daemon has published to this stream or written a record yet\n");
    }
    let mut rows = vec![[
        "HOST", "STATE", "LAST", "VERSION", "CONTROL", "SESSIONS", "WAITING", "SINKS", "SPOOL",
    ]
    .map(String::from)
    .to_vec()];
    let mut differ = false;
    for m in &all {
        let r = m.record.as_ref();
        rows.push(vec![
            m.host.clone(),
            m.status.as_str().to_string(),
            r.map_or("-".into(), |r| out::age(&r.time, now)),
            r.map_or("-".into(), |r| r.version.clone()),
            r.map_or("-", |r| if r.control { "on" } else { "off" }).to_string(),
            sessions_cell(r.map(|r| r.sessions.live), m.sessions_live, &mut differ),
            m.waiting.to_string(),
            r.map_or("-".into(), |r| {
                r.sinks
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            }),
            r.map_or("-".into(), |r| match r.spool.files {
                0 => "0".into(),
                n => format!("{n} ({} bytes)", r.spool.bytes),
            }),
        ]);
    }
    let mut text = out::table(&rows);
    if differ {
        text.push_str(
            "SESSIONS n (m in the stream): the daemon holds n live sessions, the stream has m of them; \
             the others began before it published here (or aged out of the stream)\n",
        );
    }
    out::print(&text)
}

/// The machine's live sessions as its daemon counts them, and as the stream has them when the
/// two differ (sessions begun before the daemon published to this stream are in its count only).
fn sessions_cell(daemon: Option<u64>, stream: u64, differ: &mut bool) -> String {
    match daemon {
        Some(n) if n != stream => {
            *differ = true;
            format!("{n} ({stream} in the stream)")
        }
        Some(n) => n.to_string(),
        None => stream.to_string(),
    }
}

fn sessions(args: SessionsArgs) -> anyhow::Result<()> {
    let view = args.conn.with_view(async |_, _, view| Ok(view))?;
    let now = SystemTime::now();
    let all: Vec<Session> = view
        .sessions()
        .into_iter()
        .filter(|s| {
            args.filters
                .takes(&s.host, s.summary.workspace.as_deref(), s.summary.model.as_deref())
        })
        .filter(|s| {
            args.state.is_none_or(|st| {
                s.summary.state
                    == match st {
                        SessionState::Waiting => State::Waiting,
                        SessionState::Running => State::Running,
                        SessionState::Idle => State::Idle,
                        SessionState::Ended => State::Ended,
                    }
            })
        })
        .collect();
    let total = all.len();
    let shown: Vec<Session> = all
        .into_iter()
        .filter(|s| args.all || super::sessions::listed(&s.summary, now))
        .collect();
    if args.json {
        return out::print_json(&shown);
    }
    if total == 0 {
        return out::print("no sessions\n");
    }
    let mut rows = vec![std::iter::once("HOST")
        .chain(super::sessions::HEADER)
        .map(String::from)
        .collect::<Vec<_>>()];
    for s in &shown {
        let mut row = vec![s.host.clone()];
        row.extend(super::sessions::row(&s.summary, now));
        rows.push(row);
    }
    let mut text = out::table(&rows);
    super::sessions::push_left_out(&mut text, total - shown.len());
    out::print(&text)
}

/// How long `fleet approvals --detail` waits for each machine's answer.
const DETAIL_WAIT: Duration = Duration::from_secs(3);

fn approvals(args: ApprovalsArgs) -> anyhow::Result<()> {
    let filters = args.filters.clone();
    let detail = args.detail;
    let (all, asked) = args.conn.with_view(async move |client, mut refusals, view| {
        let all: Vec<Approval> = view
            .approvals()
            .into_iter()
            .filter(|a| filters.takes(&a.host, a.workspace.as_deref(), a.model.as_deref()))
            .collect();
        let mut asked = Vec::new();
        if detail {
            for a in &all {
                let answer =
                    crate::fleet::command::ask_detail(&client, &mut refusals, &a.host, &a.pending.id, DETAIL_WAIT)
                        .await?;
                asked.push(match answer {
                    Asked::Detail(d) => Ok(d),
                    Asked::Without(why) => Err(why),
                    Asked::Not(sent) => Err(sent.why_not(&a.host, DETAIL_WAIT).unwrap_or_default()),
                });
            }
        }
        Ok((all, asked))
    })?;
    if args.json {
        let with: Vec<Value> = all
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut v = json!(a);
                match asked.get(i) {
                    Some(Ok(d)) => v["detail"] = d.clone(),
                    Some(Err(why)) => v["detail_unavailable"] = json!(why),
                    None => {}
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
    // The one-machine table, with the machine after the id.
    let with_host = |mut row: Vec<String>, host: &str| {
        row.insert(1, host.to_string());
        row
    };
    let mut rows = vec![with_host(super::approvals::HEADER.map(String::from).to_vec(), "HOST")];
    rows.extend(
        all.iter()
            .map(|a| with_host(super::approvals::row(&a.pending, now), &a.host)),
    );
    let mut text = out::table(&rows);
    for (a, answer) in all.iter().zip(&asked) {
        let what = a.pending.tool.as_deref().unwrap_or(&a.pending.kind);
        match answer {
            Ok(d) => {
                text.push_str(&format!("\n{} on {} asks ({what}):\n", a.pending.short, a.host));
                text.push_str(&crate::views::local::asked_lines(d, "  "));
            }
            Err(why) => text.push_str(&format!(
                "\n{} on {}: what it asks is not shown: {why}\n",
                a.pending.short, a.host
            )),
        }
    }
    if !asked.is_empty() {
        text.push('\n');
    } else {
        text.push_str("what each asks: aep-cline fleet approvals --detail\n");
    }
    text.push_str(
        "answer: aep-cline fleet approve ID | aep-cline fleet deny ID [--reason TEXT] | aep-cline fleet answer ID TEXT\n",
    );
    out::print(&text)
}

fn usage_(args: UsageArgs) -> anyhow::Result<()> {
    let view = args.conn.with_view(async |_, _, view| Ok(view))?;
    let f = &args.filters;
    let group = match args.group {
        UsageGroup::Daily => Some(Group::Daily),
        UsageGroup::Weekly => Some(Group::Weekly),
        UsageGroup::Monthly => Some(Group::Monthly),
        UsageGroup::Model => Some(Group::Model),
        UsageGroup::Host => Some(Group::Host),
        UsageGroup::Session => None,
    };
    let rows: Vec<(String, Tally)> = match group {
        Some(group) => view.usage.rows(group, |k| {
            f.takes(
                &k.host,
                Some(k.workspace.as_str()).filter(|w| *w != "-"),
                Some(k.model.as_str()).filter(|m| *m != "-"),
            )
        }),
        None => view
            .sessions()
            .into_iter()
            .filter(|s| f.takes(&s.host, s.summary.workspace.as_deref(), s.summary.model.as_deref()))
            .map(|s| {
                (
                    format!("{}/{}", s.host, s.summary.session),
                    Point::ZERO.delta(&s.summary),
                )
            })
            .filter(|(_, t)| t.runs > 0 || t.total_tokens > 0)
            .collect(),
    };
    let totals = spend::total(rows.iter().map(|r| &r.1));
    let name = args
        .group
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    if args.json {
        let rows: Vec<_> = rows
            .iter()
            .map(|(key, t)| {
                let mut v = json!(t);
                v["key"] = json!(key);
                v
            })
            .collect();
        return out::print_json(&json!({"group": name, "rows": rows, "totals": totals}));
    }
    if rows.is_empty() {
        return out::print("no usage reported yet\n");
    }
    let first = match args.group {
        UsageGroup::Daily => "DAY",
        UsageGroup::Weekly => "WEEK (MONDAY)",
        UsageGroup::Monthly => "MONTH",
        UsageGroup::Session => "HOST/SESSION",
        UsageGroup::Model => "MODEL",
        UsageGroup::Host => "HOST",
    };
    let mut table = vec![[first, "RUNS", "INPUT", "CACHE_RD", "OUTPUT", "TOTAL", "COST"]
        .map(String::from)
        .to_vec()];
    let line = |key: &str, t: &Tally| {
        let n = crate::views::numbers::tokens;
        vec![
            key.to_string(),
            t.runs.to_string(),
            n(t.input_tokens),
            n(t.cache_read_tokens),
            n(t.output_tokens),
            n(t.total_tokens),
            t.cost_text(),
        ]
    };
    for (key, t) in &rows {
        table.push(line(key, t));
    }
    table.push(line("TOTAL", &totals));
    let mut text = out::table(&table);
    text.push_str("INPUT = uncached input incl. cache writes; TOTAL = every token once; days in UTC.\n");
    out::print(&text)
}
