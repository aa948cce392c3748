//! `aep-cline approve | deny | answer | cancel | send`: a person's command to a Cline session,
//! without writing JSON. Each finds the daemon through its discovery file, sends the AEP command
//! (`POST /control?wait=`) with the discovery token, waits for the ack Event and prints it, then
//! the outcome when it lands within a few seconds. An accepted `cancel` is followed to the run's
//! end by the daemon (`effect`, [`crate::person::CANCEL_WAIT`]): the hub accepts an abort
//! whatever it finds.
//!
//! Exit status: 0 accepted (for `cancel`: and the run ended); 1 rejected (the reason is
//! printed); 2 not sent or not decided (no daemon, no such approval or session, no ack in time,
//! a cancel accepted that ended nothing within its wait).

use super::client::{Daemon, LogArgs};
use super::out;
use crate::person::{self, Action};
use crate::views::logs::{self, Found};
use aep_core::types::{ATTENTION_ANSWERED, CONTROL_ACCEPTED, RUN_CANCELLED, SESSION_ENDED};
use anyhow::{anyhow, bail};
use serde_json::Value;
use std::process::ExitCode;

// The arguments are one set for both doors: `C` is where the command goes (this machine's
// daemon, [`Common`]; or a machine of the fleet, `fleet_act::Common`).

/// Approve a pending approval (its id from `aep-cline approvals`): the tool runs.
#[derive(clap::Args, Debug)]
pub struct ApproveArgs<C: clap::Args = Common> {
    /// The approval: its short id from `approvals` (or any unique start or end of its id).
    pub(super) id: String,
    /// A note that goes with the answer (logged only at capture `redacted` or above).
    #[arg(long, value_name = "TEXT")]
    pub(super) reason: Option<String>,
    #[command(flatten)]
    pub(super) common: C,
}

/// Deny a pending approval: the tool does not run; --reason tells Cline why.
#[derive(clap::Args, Debug)]
pub struct DenyArgs<C: clap::Args = Common> {
    /// The approval: its short id from `approvals`.
    pub(super) id: String,
    /// Why, passed to Cline as the denial's reason.
    #[arg(long, value_name = "TEXT")]
    pub(super) reason: Option<String>,
    #[command(flatten)]
    pub(super) common: C,
}

/// Answer a pending approval in words (AEP-0008).
///
/// "approve" or "deny" (any case) is that answer; any other text denies, and Cline gets the
/// text as the reason.
#[derive(clap::Args, Debug)]
pub struct AnswerArgs<C: clap::Args = Common> {
    /// The approval: its short id from `approvals`.
    pub(super) id: String,
    /// The answer.
    pub(super) text: String,
    #[command(flatten)]
    pub(super) common: C,
}

/// Cancel the session's running run; it ends with `run.cancelled {by: control}`.
///
/// Cline's hub carries the cancel out, so only a run in the hub can be cancelled (a TUI or a
/// hub-run `cline --json`); a run in a `cline` process of its own is refused in words: stop it
/// where it runs. Needs the daemon's control gate (AEP_CLINE_HUB_CONTROL=1).
#[derive(clap::Args, Debug)]
pub struct CancelArgs<C: clap::Args = Common> {
    /// The session: its id or a unique start or end of it (from `sessions`).
    pub(super) session: String,
    #[command(flatten)]
    pub(super) common: C,
}

/// End a session that is stuck open (its Cline is gone but the daemon cannot tell).
///
/// The daemon ends a session by itself when it has evidence (Cline's store, the process that
/// ran its hooks, Cline's hub); this is for the rest. Its open run is logged
/// `run.cancelled {by: control}` and the session `session.ended`, both caused by this command.
/// Cline itself is not touched.
#[derive(clap::Args, Debug)]
pub struct EndArgs {
    /// The session: its id or a unique start or end of it (from `aep-cline sessions`).
    session: String,
    /// Why, logged with the end (at capture `redacted` or above).
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    #[command(flatten)]
    common: Common,
}

/// Send a Cline session a prompt (queued, or --steer).
///
/// Queued after the current run (on an idle session it starts one at once), or with --steer,
/// given to the running run.
#[derive(clap::Args, Debug)]
pub struct SendArgs<C: clap::Args = Common> {
    /// The session: its id or a unique start or end of it.
    pub(super) session: String,
    /// The prompt (at most 4000 characters); `-` reads it from stdin.
    pub(super) text: String,
    /// Steer the running run instead of queueing.
    #[arg(long)]
    pub(super) steer: bool,
    #[command(flatten)]
    pub(super) common: C,
}

/// Where a command goes on this machine: the daemon of this state and log folder.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// Print the command id, the ack and the outcome as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    logs: LogArgs,
}

/// The longest prompt `send` takes (the daemon's limit).
const MAX_TEXT: usize = cline_hub::control::MAX_INPUT_CHARS;

pub fn approve(args: ApproveArgs) -> ExitCode {
    finish((|| {
        let p = approval(&args.common, &args.id)?;
        let what = format!("approve {}", p.short);
        send(
            &args.common,
            &p.session,
            Action::Approve {
                request: p.id,
                reason: args.reason,
            },
            &what,
            "",
        )
    })())
}

pub fn deny(args: DenyArgs) -> ExitCode {
    finish((|| {
        let p = approval(&args.common, &args.id)?;
        let what = format!("deny {}", p.short);
        send(
            &args.common,
            &p.session,
            Action::Deny {
                request: p.id,
                reason: args.reason,
            },
            &what,
            "",
        )
    })())
}

pub fn answer(args: AnswerArgs) -> ExitCode {
    finish((|| {
        if args.text.trim().is_empty() {
            bail!("the answer is empty: say approve, deny, or why not");
        }
        let p = approval(&args.common, &args.id)?;
        let what = format!("answer {}", p.short);
        send(
            &args.common,
            &p.session,
            Action::Answer {
                request: p.id,
                text: args.text,
            },
            &what,
            "",
        )
    })())
}

pub fn cancel(args: CancelArgs) -> ExitCode {
    finish((|| {
        let found = session(&args.common, &args.session)?;
        let session = found.session.clone();
        let what = format!("cancel the run of {session}");
        send_with(
            &args.common,
            &session,
            Action::Cancel,
            &what,
            &cancel_refusal(&found),
            true,
        )
    })())
}

pub fn end(args: EndArgs) -> ExitCode {
    finish((|| {
        let found = session(&args.common, &args.session)?;
        let session = found.session.clone();
        let what = format!("end session {session}");
        let refusal = match found.state {
            crate::views::State::Ended => format!("session {session} has ended already: there is nothing to end"),
            _ => String::new(),
        };
        send(
            &args.common,
            &session,
            Action::End { reason: args.reason },
            &what,
            &refusal,
        )
    })())
}

pub fn send_input(args: SendArgs) -> ExitCode {
    finish((|| {
        let text = prompt(args.text)?;
        let found = session(&args.common, &args.session)?;
        let session = found.session.clone();
        let what = format!("send input to {session}");
        send(
            &args.common,
            &session,
            Action::Send {
                text,
                steer: args.steer,
            },
            &what,
            &send_refusal(&found),
        )
    })())
}

/// The prompt `send` was given (`-`: read from stdin), checked as the daemon would check it.
pub(super) fn prompt(text: String) -> anyhow::Result<String> {
    let text = if text == "-" {
        let mut t = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut t)
            .map_err(|e| anyhow!("cannot read the prompt from stdin: {e}"))?;
        t
    } else {
        text
    };
    let chars = text.chars().count();
    if text.trim().is_empty() {
        bail!("the prompt is empty");
    }
    if chars > MAX_TEXT {
        bail!("the prompt has {chars} characters; send at most {MAX_TEXT}");
    }
    Ok(text)
}

/// What a refused `cancel` means for this session as the log reads; empty when nothing says.
pub(super) fn cancel_refusal(s: &crate::views::Summary) -> String {
    let session = &s.session;
    match s.state {
        crate::views::State::Ended => format!("session {session} has ended: nothing runs in it to cancel"),
        _ if s.active_run.is_none() => format!("session {session} has no running run to cancel: it is idle"),
        _ => String::new(),
    }
}

/// What a refused `send` means for this session as the log reads; empty when nothing says.
pub(super) fn send_refusal(s: &crate::views::Summary) -> String {
    match s.state {
        crate::views::State::Ended => format!("session {} has ended: Cline no longer takes input for it", s.session),
        _ => String::new(),
    }
}

/// Exit 2 with the message for anything that kept the command from being decided.
fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("aep-cline: {e:#}");
        ExitCode::from(2)
    })
}

fn approval(common: &Common, id: &str) -> anyhow::Result<crate::views::Pending> {
    let journal = common.logs.journal()?;
    match logs::find(super::approvals::pending(&journal), |p| p.id.as_str(), id) {
        Found::One(p) if !p.answerable => bail!(
            "approval {} ({}) can only be answered in Cline: the daemon that logged it had control off \
             (AEP_CLINE_HUB_CONTROL=1 turns it on)",
            p.short,
            p.session
        ),
        Found::One(p) => Ok(p),
        Found::None => bail!("no pending approval matches {id:?}: `aep-cline approvals` lists them"),
        Found::Many(ids) => bail!(
            "{id:?} matches more than one pending approval ({}): type more of it",
            ids.join(", ")
        ),
    }
}

fn session(common: &Common, query: &str) -> anyhow::Result<crate::views::Summary> {
    let journal = common.logs.journal()?;
    match logs::find(logs::summaries(&journal), |s| s.session.as_str(), query) {
        Found::One(s) => Ok(s),
        Found::None => bail!("no session matches {query:?}: `aep-cline sessions` lists them"),
        Found::Many(ids) => bail!(
            "{query:?} matches more than one session ({}): type more of it",
            ids.join(", ")
        ),
    }
}

/// Sends `action`; `refusal` is what a `refused` nack means for this session as its log reads
/// (the daemon's own words are in the log only at capture `redacted` and above).
fn send(common: &Common, session: &str, action: Action, what: &str, refusal: &str) -> anyhow::Result<ExitCode> {
    send_with(common, session, action, what, refusal, false)
}

/// [`send`]; `cancels`: a run cancel, whose effect (the daemon followed it to the run's end, or
/// says there was none) decides the exit status.
fn send_with(
    common: &Common,
    session: &str,
    action: Action,
    what: &str,
    refusal: &str,
    cancels: bool,
) -> anyhow::Result<ExitCode> {
    let daemon = Daemon::find()?;
    let command = person::command(&action, session, "aep-cline-cli", &crate::state::host());
    let path = format!("/control?wait={}", person::ACK_WAIT.as_millis());
    let answer = daemon.request(
        "POST",
        &path,
        Some(command.to_string().as_bytes()),
        person::ACK_WAIT + person::OUTCOME_WAIT + person::CANCEL_WAIT + std::time::Duration::from_secs(5),
    )?;
    match answer.status {
        200 => {}
        401 => bail!(
            "the daemon refused the token in {}: the file belongs to another daemon; restart the daemon, or check \
             AEP_CLINE_STATE_DIR",
            crate::state::discovery::path(&daemon.state_dir).display()
        ),
        404 => bail!("the daemon does not know session {session}: it never saw a hook from it"),
        status => bail!("the daemon refused the command (HTTP {status}): {}", answer.detail()),
    }
    let waited = answer.json();
    let ack = waited["ack"].clone();
    // An accepted run cancel: the daemon waited for the run's end (`effect`), or said there was none.
    let effect = waited["effect"].as_str().filter(|_| cancels);
    if common.json {
        out::print_json(&waited)?;
    }
    match ack["type"].as_str() {
        Some(CONTROL_ACCEPTED) => {
            if effect == Some(person::NO_EFFECT) {
                if !common.json {
                    eprintln!("{}", person::nothing_happened(session, person::CANCEL_WAIT));
                }
                return Ok(ExitCode::from(2));
            }
            if !common.json {
                let mut text = format!("accepted: {what} (command {})\n", short(&waited["command"]));
                if let Some(o) = waited.get("outcome").filter(|o| !o.is_null()) {
                    text.push_str(&format!("outcome: {}\n", outcome(o)));
                } else if let Some(effect) = effect {
                    text.push_str(&format!("outcome: {effect}\n"));
                }
                out::print(&text)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(_) => {
            let reason = ack["data"]["reason"].as_str().unwrap_or("unknown");
            if !common.json {
                // The logged detail, else the daemon's words for us, else what the log implies.
                let detail = match (&ack["data"]["detail"], &waited["detail"]) {
                    (Value::Null, Value::Null) if reason == "refused" && !refusal.is_empty() => Value::from(refusal),
                    (Value::Null, given) => given.clone(),
                    (d, _) => d.clone(),
                };
                eprintln!("rejected ({reason}): {what}: {}", why(reason, &detail));
            }
            Ok(ExitCode::from(1))
        }
        None => {
            if !common.json {
                eprintln!(
                    "no ack within {}s for {what} (command {}): it may still be decided; `aep-cline show {session}` \
                     will show it",
                    person::ACK_WAIT.as_secs(),
                    short(&waited["command"])
                );
            }
            Ok(ExitCode::from(2))
        }
    }
}

fn short(id: &Value) -> String {
    crate::views::summary::short_id(id.as_str().unwrap_or_default())
}

/// What a nack reason means for the person, with the daemon's detail when the log holds it.
pub(super) fn why(reason: &str, detail: &Value) -> String {
    let hint = match reason {
        "unsupported" => {
            "the daemon does not take commands: start it with AEP_CLINE_HUB_CONTROL=1 and \
                          AEP_CLINE_HUB_DISCOVERY (see `aep-cline daemon --help`)"
        }
        "busy" => "the daemon is not connected to Cline's hub right now; `aep-cline doctor` says why",
        "refused" => "",
        "invalid" => "the command was malformed",
        "unauthorized" => "the daemon refused the sender",
        _ => "",
    };
    match detail.as_str() {
        Some(d) if hint.is_empty() => out::one_line(d, 200),
        Some(d) => format!("{hint} ({})", out::one_line(d, 200)),
        None if hint.is_empty() => {
            "refused, and the session's log keeps no reason at its capture level (AEP_CAPTURE `redacted` or above keeps it)".to_string()
        }
        None => hint.to_string(),
    }
}

/// One line for an outcome Event.
fn outcome(e: &Value) -> String {
    let ty = e["type"].as_str().unwrap_or_default();
    let data = &e["data"];
    match ty {
        ATTENTION_ANSWERED => format!(
            "{ty} {} via {}",
            data["answer"]["option"].as_str().unwrap_or("answered"),
            data["via"].as_str().unwrap_or("control")
        ),
        RUN_CANCELLED => format!("{ty} by {}", data["by"].as_str().unwrap_or("control")),
        SESSION_ENDED => format!("{ty} ({})", data["reason"].as_str().unwrap_or("normal")),
        "x.cline.input.sent" => format!("{ty} ({})", data["delivery"].as_str().unwrap_or("queue")),
        _ => ty.to_string(),
    }
}
