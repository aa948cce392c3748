//! `aep-cline fleet approve | deny | answer | cancel | send`: a person's command to a session on
//! any machine. The id is resolved from the fleet's view as on one machine (an approval's short
//! id, a session id or a unique start or end of it; `--host` narrows), the command is the one
//! `aep-cline approve` builds ([`person::command`]), sent to the owning machine's control subject
//! ([`crate::fleet::command`]), and its ack printed. The outcome lands in the stream.
//!
//! Exit status as on one machine: 0 accepted; 1 rejected (the reason is printed); 2 not sent or
//! not decided (no such approval or session, the machine offline, no daemon listening, the
//! server's permissions, no ack in time).

use super::fleet_conn::Conn;
use super::out;
use crate::fleet::command::{self, Sent};
use crate::fleet::health;
use crate::fleet::view::Session;
use crate::fleet::View;
use crate::person::{self, Action};
use crate::views::logs::{self, Found};
use aep_core::types::CONTROL_ACCEPTED;
use anyhow::bail;
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::SystemTime;

// The arguments are `aep-cline approve`'s ([`super::act`]), sent to a machine of the fleet.
pub type ApproveArgs = super::act::ApproveArgs<Common>;
pub type DenyArgs = super::act::DenyArgs<Common>;
pub type AnswerArgs = super::act::AnswerArgs<Common>;
pub type CancelArgs = super::act::CancelArgs<Common>;
pub type SendArgs = super::act::SendArgs<Common>;

/// Where a command goes in the fleet: the machine that owns the approval or session.
#[derive(clap::Args, Debug)]
pub struct Common {
    /// Only this machine's approvals and sessions (where an id is on several).
    #[arg(long)]
    host: Option<String>,
    /// Print the host, the command id and the ack as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    conn: Conn,
}

/// What a command is for, once resolved.
struct Target {
    host: String,
    session: String,
    /// What the person asked, for the messages.
    what: String,
    /// What a `refused` nack means for this session as the stream reads.
    refusal: String,
}

pub fn approve(args: ApproveArgs) -> ExitCode {
    let reason = args.reason;
    on_approval(&args.common, &args.id, "approve", move |request| Action::Approve {
        request,
        reason,
    })
}

pub fn deny(args: DenyArgs) -> ExitCode {
    let reason = args.reason;
    on_approval(&args.common, &args.id, "deny", move |request| Action::Deny {
        request,
        reason,
    })
}

pub fn answer(args: AnswerArgs) -> ExitCode {
    if args.text.trim().is_empty() {
        eprintln!("aep-cline: the answer is empty: say approve, deny, or why not");
        return ExitCode::from(2);
    }
    let text = args.text;
    on_approval(&args.common, &args.id, "answer", move |request| Action::Answer {
        request,
        text,
    })
}

pub fn cancel(args: CancelArgs) -> ExitCode {
    on_session(&args.common, &args.session, Action::Cancel, |s| {
        (
            format!("cancel the run of {}", s.session),
            super::act::cancel_refusal(s),
        )
    })
}

pub fn send_input(args: SendArgs) -> ExitCode {
    let text = match super::act::prompt(args.text) {
        Ok(text) => text,
        Err(e) => return finish(Err(e)),
    };
    let action = Action::Send {
        text,
        steer: args.steer,
    };
    on_session(&args.common, &args.session, action, |s| {
        (format!("send input to {}", s.session), super::act::send_refusal(s))
    })
}

fn on_approval(common: &Common, id: &str, verb: &str, action: impl FnOnce(String) -> Action) -> ExitCode {
    finish(common.conn.with_view(async |client, mut refusals, view| {
        let list: Vec<_> = view
            .approvals()
            .into_iter()
            .filter(|a| common.host.as_deref().is_none_or(|h| h == a.host))
            .collect();
        let a = match logs::find(list, |a| a.pending.id.as_str(), id) {
            Found::One(a) if !a.pending.answerable => bail!(
                "approval {} ({} on {}) can only be answered in Cline: the daemon that logged it had control off",
                a.pending.short,
                a.pending.session,
                a.host
            ),
            Found::One(a) => a,
            Found::None => bail!("no pending approval matches {id:?}: `aep-cline fleet approvals` lists them"),
            Found::Many(ids) => bail!(
                "{id:?} matches more than one pending approval ({}): type more of it, or name the machine (--host)",
                ids.join(", ")
            ),
        };
        let target = Target {
            what: format!("{verb} {} on {}", a.pending.short, a.host),
            host: a.host,
            session: a.pending.session,
            refusal: String::new(),
        };
        send(common, &client, &mut refusals, &view, target, action(a.pending.id)).await
    }))
}

fn on_session(
    common: &Common,
    query: &str,
    action: Action,
    words: impl FnOnce(&crate::views::Summary) -> (String, String),
) -> ExitCode {
    finish(common.conn.with_view(async |client, mut refusals, view| {
        let s = find_session(&view, common.host.as_deref(), query, "`aep-cline fleet sessions`")?;
        let (what, refusal) = words(&s.summary);
        let target = Target {
            what: format!("{what} on {}", s.host),
            host: s.host,
            session: s.summary.session,
            refusal,
        };
        send(common, &client, &mut refusals, &view, target, action).await
    }))
}

/// The session of the fleet's view that `query` names (its id, or a unique start or end of it),
/// on `host` if given; `listed_by` is the command that lists the candidates, for the refusal.
pub(super) fn find_session(view: &View, host: Option<&str>, query: &str, listed_by: &str) -> anyhow::Result<Session> {
    let list: Vec<Session> = view
        .sessions()
        .into_iter()
        .filter(|s| host.is_none_or(|h| h == s.host))
        .collect();
    match logs::find(list, |s| s.summary.session.as_str(), query) {
        Found::One(s) => Ok(s),
        Found::None => bail!("no session matches {query:?}: {listed_by} lists them"),
        Found::Many(ids) => bail!(
            "{query:?} matches more than one session ({}): type more of it, or name the machine (--host)",
            ids.join(", ")
        ),
    }
}

/// Exit 2 with the message for anything that kept the command from being decided.
fn finish(result: anyhow::Result<ExitCode>) -> ExitCode {
    result.unwrap_or_else(|e| {
        eprintln!("aep-cline: {}", out::terminal(&format!("{e:#}")));
        ExitCode::from(2)
    })
}

async fn send(
    common: &Common,
    client: &async_nats::Client,
    refusals: &mut command::Refusals,
    view: &View,
    target: Target,
    action: Action,
) -> anyhow::Result<ExitCode> {
    let Target {
        host,
        session,
        what,
        refusal,
    } = target;
    let now = SystemTime::now();
    let record = view.record(&host);
    let status = health::status(record, now, common.conn.offline_after);
    if !status.reachable() {
        bail!(
            "machine {host} is {} (last heard {}): the command was not sent",
            status.as_str(),
            record.map_or("-".into(), |r| out::age(&r.time, now))
        );
    }
    let command = person::command(&action, &session, "aep-cline-fleet", &crate::state::host());
    // A run cancel's effect is read from the stream, followed from before the command is sent.
    let watch = match action {
        Action::Cancel => {
            // Not `source()`: that would read the credentials file again for a name.
            let stream = common.conn.stream()?;
            Some(crate::fleet::effect::Watch::start(client, &stream, &host, &session).await?)
        }
        _ => None,
    };
    let id = command["id"].as_str().unwrap_or_default().to_string();
    let ack = match command::send(client, refusals, &host, &command, person::ACK_WAIT).await? {
        Sent::Ack(ack) => ack,
        other => {
            let why = other.why_not(&host, person::ACK_WAIT).unwrap_or_default();
            bail!("{what} (command {}): {why}", crate::views::summary::short_id(&id))
        }
    };
    let effect = match watch {
        Some(watch) if ack["type"] == CONTROL_ACCEPTED => Some(watch.run_end(person::CANCEL_WAIT).await),
        _ => None,
    };
    if common.json {
        let mut said = json!({"host": host, "command": id, "ack": ack});
        if let Some(effect) = &effect {
            said["effect"] = json!(effect);
        }
        out::print_json(&said)?;
    }
    if ack["type"] == CONTROL_ACCEPTED {
        if effect.as_deref() == Some(person::NO_EFFECT) {
            if !common.json {
                eprintln!(
                    "{} (on {host})",
                    person::nothing_happened(&session, person::CANCEL_WAIT)
                );
            }
            return Ok(ExitCode::from(2));
        }
        if !common.json {
            let mut text = format!("accepted: {what} (command {})\n", crate::views::summary::short_id(&id));
            if let Some(effect) = &effect {
                text.push_str(&format!("outcome: {effect}\n"));
            }
            out::print(&text)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !common.json {
        let reason = ack["data"]["reason"].as_str().unwrap_or("unknown");
        let detail = match &ack["data"]["detail"] {
            Value::Null if reason == "refused" && !refusal.is_empty() => Value::from(refusal),
            d => d.clone(),
        };
        eprintln!("rejected ({reason}): {what}: {}", super::act::why(reason, &detail));
    }
    Ok(ExitCode::from(1))
}
