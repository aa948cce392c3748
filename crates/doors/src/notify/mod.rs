//! Notifications (`AEP_CLINE_NOTIFY`): a person is told when Cline waits for an approval (and,
//! by setting, when a run fails or a session ends), with links that answer the approval from
//! another device.
//!
//! - [`settings`]: the targets (a JSON webhook, ntfy, the desktop) and what is notified.
//! - [`asked`]: what an approval would allow, redacted and made visible; all of it on the
//!   link's page, the notification's cut saying how much it hid and where the rest is.
//! - [`link`]: the signed, single-use, expiring approve and deny links.
//! - [`deliver`]: one delivery to one target (the HTTP client, `notify-send`).
//! - [`page`]: the links' routes: GET shows what will be answered, only POST answers, through
//!   the command intake like the dashboard's buttons.
//!
//! Nothing here enters an Event: the notification goes to the person, not into the log, a
//! relay, OTLP or NATS. Nothing here blocks either: the hub tap and the bus pump only put a
//! message in each target's bounded queue (full: the oldest is dropped and counted), and one
//! sender task per target delivers, retrying with backoff, so a dead or hung receiver delays
//! only its own queue.

pub mod asked;
pub mod deliver;
pub mod doctor;
pub mod link;
pub mod page;
pub mod settings;

use crate::backoff::Backoff;
use crate::control::Intake;
use crate::lane::{Note, Sessions};
use crate::views::index::Index;
use aep_core::types::{ATTENTION_REQUESTED, RUN_FAILED, SESSION_ENDED, TOOL_DENIED};
use deliver::{Deliverer, Failure};
use link::{Answer, Link, Now, Signer, Spent};
use parking_lot::Mutex;
use serde_json::{json, Value};
use settings::{Settings, Target};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast::error::RecvError;

/// Approvals whose summary a link's page can show, at most (the oldest go first).
const MAX_ASKED: usize = 4096;

/// An approval that started waiting, as the hub tap mirrored it.
#[derive(Debug, Clone)]
pub struct Waiting {
    pub session: String,
    /// The `attention.requested` Event id.
    pub request: String,
    pub tool: Option<String>,
    /// The hub frame's `inputJson` (content: read for [`asked`] only, never logged).
    pub input_json: Option<String>,
    /// When it started waiting (RFC 3339).
    pub since: String,
    /// What the policy answers if nobody does in time (`timeout`, `on_timeout`), and the rule.
    pub timeout: Option<(crate::policy::rules::Timeout, String)>,
}

/// What kind of news a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Approval,
    Budget,
    Failed,
    Ended,
    Denied,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Approval => "approval",
            Kind::Budget => "budget",
            Kind::Failed => "failed",
            Kind::Denied => "denied",
            Kind::Ended => "ended",
        }
    }
}

/// One notification, as every target renders it.
#[derive(Debug, Clone)]
pub struct Message {
    pub kind: Kind,
    pub title: String,
    /// The message for chat webhooks and the desktop (a command's newlines kept).
    pub text: String,
    /// The webhook's JSON body.
    pub body: Value,
    pub approve: Option<String>,
    pub deny: Option<String>,
    pub dashboard: Option<String>,
}

/// What an approval's link page shows.
#[derive(Debug, Clone)]
pub struct Asked {
    pub session: String,
    pub tool: Option<String>,
    /// All of what is asked ([`asked::asked`]), visible.
    pub summary: String,
    pub since: String,
    expires: u64,
}

pub struct Notifier {
    settings: Settings,
    host: String,
    /// Where links point: `AEP_CLINE_PUBLIC_URL`, else the listener's URL.
    base: String,
    /// The dashboard's address (on `base`), when it is on.
    dashboard: bool,
    signer: Signer,
    spent: Spent,
    asked: Mutex<HashMap<String, Asked>>,
    outs: Vec<Arc<Out>>,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    index: Arc<Index>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("targets", &self.settings.targets)
            .finish_non_exhaustive()
    }
}

/// One target's queue and counts.
struct Out {
    target: Target,
    queue: Mutex<VecDeque<Arc<Message>>>,
    wake: tokio::sync::Notify,
    sent: AtomicU64,
    retries: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// A plain `http://` base whose host is not this machine.
fn in_clear(base: &str) -> bool {
    let Ok(url) = url::Url::parse(base) else { return false };
    let local = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => true,
    };
    url.scheme() == "http" && !local
}

pub fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl Notifier {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        settings: Settings,
        host: String,
        listener: String,
        dashboard: bool,
        sessions: Arc<Sessions>,
        intake: Arc<Intake>,
        index: Arc<Index>,
    ) -> anyhow::Result<Arc<Notifier>> {
        let mut outs = Vec::new();
        for target in &settings.targets {
            if *target == Target::Desktop && deliver::notify_send().is_none() {
                tracing::warn!(
                    "AEP_CLINE_NOTIFY: desktop notifications are off: no notify-send on this machine's PATH \
                     (install libnotify-bin, or name another target)"
                );
                continue;
            }
            outs.push(Arc::new(Out {
                target: target.clone(),
                queue: Mutex::new(VecDeque::new()),
                wake: tokio::sync::Notify::new(),
                sent: AtomicU64::new(0),
                retries: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                last_error: Mutex::new(None),
            }));
        }
        let base = settings.public_url.clone().unwrap_or(listener);
        if in_clear(&base) {
            tracing::warn!(public_url = %base,
                "AEP_CLINE_PUBLIC_URL is plain http:// beyond this machine: the approve and deny links travel in clear; \
                 put a TLS proxy (https://) in front, or a private network you trust");
        }
        Ok(Arc::new(Notifier {
            signer: Signer::generate()?,
            spent: Spent::default(),
            asked: Mutex::new(HashMap::new()),
            settings,
            host,
            base,
            dashboard,
            outs,
            sessions,
            intake,
            index,
        }))
    }

    /// Whether the links can answer: the intake takes answers (`AEP_CLINE_HUB_CONTROL=1`).
    fn answers(&self) -> bool {
        self.intake.accepts().iter().any(|a| a == cline_hub::control::RESPOND)
    }

    fn dashboard_url(&self, session: &str) -> Option<String> {
        self.dashboard.then(|| {
            let id = percent_encoding::utf8_percent_encode(session, percent_encoding::NON_ALPHANUMERIC);
            format!("{}/#/s/{id}", self.base)
        })
    }

    fn link_url(&self, link: &Link) -> String {
        format!("{}/notify/{}", self.base, self.signer.sign(link, Now::read()))
    }

    /// An approval started waiting (called by the hub tap or the hook door, off the async
    /// workers): its
    /// message is queued for every target; nothing waits for the delivery.
    pub fn approval(&self, waiting: Waiting) {
        if !self.settings.on.approval {
            return;
        }
        let summary = asked::asked(
            waiting.tool.as_deref(),
            waiting.input_json.as_deref(),
            self.sessions.redactor(),
        );
        let expires = now_s() + self.settings.link_lifetime.as_secs();
        self.remember(&waiting, &summary, expires);
        // A call held at its hook is answered here whatever the control gate says.
        let answerable = self.answers() || self.sessions.asks().get(&waiting.request).is_some();
        let (approve, deny) = match answerable {
            true => {
                let url = |answer| {
                    self.link_url(&Link {
                        session: waiting.session.clone(),
                        request: waiting.request.clone(),
                        answer,
                        expires,
                    })
                };
                (Some(url(Answer::Approve)), Some(url(Answer::Deny)))
            }
            false => (None, None),
        };
        let dashboard = self.dashboard_url(&waiting.session);
        // Where all of a cut command is shown: the link's page (GET answers nothing), else the
        // dashboard.
        let shown = asked::shown(&summary, approve.as_deref().or(dashboard.as_deref()));
        let text = format!("Cline waits for your approval on {}: {shown}", self.host);
        let body = json!({
            "text": text,
            "kind": Kind::Approval.as_str(),
            "session": waiting.session,
            "host": self.host,
            "tool": waiting.tool,
            "asked": shown,
            "request": waiting.request,
            "waiting_since": waiting.since,
            "expires": aep_core::time::seconds(jiff::Timestamp::from_second(expires as i64).unwrap_or_default()),
            "actions": {"approve": approve, "deny": deny, "dashboard": dashboard},
        });
        self.queue(Message {
            kind: Kind::Approval,
            title: format!("Cline waits: {}", waiting.tool.as_deref().unwrap_or("approval")),
            text,
            body,
            approve,
            deny,
            dashboard,
        });
    }

    fn remember(&self, waiting: &Waiting, summary: &str, expires: u64) {
        let mut asked = self.asked.lock();
        if asked.len() >= MAX_ASKED {
            let now = now_s();
            asked.retain(|_, a| a.expires >= now);
            if asked.len() >= MAX_ASKED {
                if let Some(oldest) = asked.iter().min_by_key(|(_, a)| a.expires).map(|(r, _)| r.clone()) {
                    asked.remove(&oldest);
                }
            }
        }
        asked.insert(
            waiting.request.clone(),
            Asked {
                session: waiting.session.clone(),
                tool: waiting.tool.clone(),
                summary: summary.to_string(),
                since: waiting.since.clone(),
                expires,
            },
        );
    }

    /// What a link's page shows about `request`, while it is remembered.
    pub fn asked(&self, request: &str) -> Option<Asked> {
        self.asked.lock().get(request).cloned()
    }

    /// A budget's notice, a run failed or a session ended (from the bus, as logged: within the
    /// capture ceiling).
    fn news(&self, e: &Value) {
        let ty = e["type"].as_str().unwrap_or_default();
        let kind = match ty {
            // The budgets' notice at 80% and 100% (AEP has no notice type: an attention request
            // resolved at once, with `data.budget`).
            ATTENTION_REQUESTED if self.settings.on.budget && e["data"]["budget"].is_object() => return self.budget(e),
            RUN_FAILED if self.settings.on.failed => Kind::Failed,
            SESSION_ENDED if self.settings.on.ended => Kind::Ended,
            TOOL_DENIED if self.settings.on.denied => Kind::Denied,
            _ => return,
        };
        let session = e["session"].as_str().unwrap_or_default();
        let data = &e["data"];
        let denial = (kind == Kind::Denied).then(|| {
            let tool = data["tool"]["name"].as_str().unwrap_or("a tool");
            let rule = data["rule"].as_str().unwrap_or("a rule");
            match data["cline.policy_reason"].as_str() {
                Some(reason) => format!("{tool}, by {rule}: {reason}"),
                None => format!("{tool}, by {rule}"),
            }
        });
        let reason = denial.as_deref().or(data["reason"].as_str());
        let what = match kind {
            Kind::Failed => "a Cline run failed",
            Kind::Denied => "a guard refused a tool call",
            _ => "a Cline session ended",
        };
        let text = match reason {
            Some(r) => format!("On {}, {what} ({r}): session {session}", self.host),
            None => format!("On {}, {what}: session {session}", self.host),
        };
        let dashboard = self.dashboard_url(session);
        let body = json!({
            "text": text,
            "kind": kind.as_str(),
            "session": session,
            "host": self.host,
            "run": e.get("run"),
            "reason": reason,
            "time": e.get("time"),
            "actions": {"approve": null, "deny": null, "dashboard": dashboard},
        });
        self.queue(Message {
            kind,
            title: format!("Cline: {what}"),
            text,
            body,
            approve: None,
            deny: None,
            dashboard,
        });
    }

    /// A budget reached 80% or 100% (`AEP_CLINE_BUDGET`): said with its numbers and what was
    /// done (at 100% the run is cancelled through the hub, or could not be: the Event says why).
    fn budget(&self, e: &Value) {
        let session = e["session"].as_str().unwrap_or_default();
        let b = &e["data"]["budget"];
        let number = |k: &str| b[k].as_f64().unwrap_or_default();
        let currency = b["currency"].as_str().unwrap_or("USD");
        let name = b["name"].as_str().unwrap_or("a");
        let done = match b["action"].as_str() {
            Some("cancel") => ": the run is cancelled",
            Some(_) => ": the run could not be cancelled (not run through Cline's hub)",
            None => "",
        };
        let text = format!(
            "On {}, session {session} reached {:.0}% of its {name} budget ({} of {}){done}",
            self.host,
            number("threshold") * 100.0,
            crate::views::numbers::money(number("cost"), currency),
            crate::views::numbers::money(number("limit"), currency),
        );
        let dashboard = self.dashboard_url(session);
        let body = json!({
            "text": text,
            "kind": Kind::Budget.as_str(),
            "session": session,
            "host": self.host,
            "run": e.get("run"),
            "budget": b,
            "time": e.get("time"),
            "actions": {"approve": null, "deny": null, "dashboard": dashboard},
        });
        self.queue(Message {
            kind: Kind::Budget,
            title: format!("Cline: {name} budget at {:.0}%", number("threshold") * 100.0),
            text,
            body,
            approve: None,
            deny: None,
            dashboard,
        });
    }

    fn queue(&self, message: Message) {
        let message = Arc::new(message);
        for out in &self.outs {
            let mut queue = out.queue.lock();
            if queue.len() >= self.settings.queue {
                queue.pop_front();
                let dropped = out.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped.is_power_of_two() {
                    tracing::warn!(target = %out.target.shown(), dropped,
                        "notifications dropped: the target's queue is full (it is slow or away); the oldest go first");
                }
            }
            queue.push_back(message.clone());
            drop(queue);
            out.wake.notify_one();
        }
    }

    /// Feeds run failures and session ends from the bus (only when asked for).
    pub async fn pump(self: Arc<Self>, mut bus: tokio::sync::broadcast::Receiver<Note>) {
        if !(self.settings.on.budget || self.settings.on.failed || self.settings.on.ended || self.settings.on.denied) {
            drop(bus); // nothing to read: no lagging subscriber is kept
            return std::future::pending().await;
        }
        loop {
            match bus.recv().await {
                Ok(Note::Event(published)) => self.news(&published.value),
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!(
                        missed = n,
                        "notifications fell behind the bus: some run or session news was not sent"
                    )
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// The senders, one per target, until the daemon stops.
    pub async fn run(self: Arc<Self>) {
        let deliverer = Arc::new(Deliverer::new(self.settings.timeout));
        let senders = self.outs.iter().map(|out| {
            let (out, deliverer, settings) = (out.clone(), deliverer.clone(), self.settings.clone());
            async move { out.send_all(&deliverer, &settings).await }
        });
        futures_util::future::join_all(senders).await;
    }

    /// What `/healthz` says.
    pub fn status(&self) -> Value {
        let targets: Vec<Value> = self
            .outs
            .iter()
            .map(|o| {
                json!({
                    "target": o.target.shown(),
                    "queued": o.queue.lock().len(),
                    "sent": o.sent.load(Ordering::Relaxed),
                    "retries": o.retries.load(Ordering::Relaxed),
                    "failed": o.failed.load(Ordering::Relaxed),
                    "dropped": o.dropped.load(Ordering::Relaxed),
                    "last_error": *o.last_error.lock(),
                })
            })
            .collect();
        json!({
            "targets": targets,
            "dropped": self.outs.iter().map(|o| o.dropped.load(Ordering::Relaxed)).sum::<u64>(),
            "links": self.answers(),
        })
    }
}

impl Out {
    async fn send_all(&self, deliverer: &Deliverer, settings: &Settings) {
        loop {
            let next = self.queue.lock().pop_front();
            let Some(message) = next else {
                self.wake.notified().await;
                continue;
            };
            self.send(deliverer, settings, &message).await;
        }
    }

    /// One message, retried with backoff while the failure may pass.
    async fn send(&self, deliverer: &Deliverer, settings: &Settings, message: &Message) {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
        for attempt in 1..=settings.attempts {
            let error = match deliverer.deliver(&self.target, message).await {
                Ok(()) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(Failure { error, retry }) => {
                    *self.last_error.lock() = Some(error.clone());
                    if !retry {
                        self.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(target = %self.target.shown(), kind = message.kind.as_str(), %error,
                            "a notification was refused (not retried: it would be refused again)");
                        return;
                    }
                    error
                }
            };
            if attempt == settings.attempts {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(target = %self.target.shown(), kind = message.kind.as_str(), attempts = attempt, %error,
                    "a notification could not be delivered; given up");
                return;
            }
            self.retries.fetch_add(1, Ordering::Relaxed);
            tracing::info!(target = %self.target.shown(), attempt, %error, "a notification will be retried");
            tokio::time::sleep(backoff.next_wait()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::settings::{Endpoint, On};
    use super::*;
    use crate::lane::{Bus, Journal};
    use aep_core::redact::{RedactOptions, Redactor};
    use aep_core::{Capture, CapturePolicy};

    /// What `AEP_CLINE_NOTIFY_ON` would say for `list`.
    fn kinds(list: &str) -> On {
        settings::on(list).unwrap()
    }

    fn notifier(dir: &std::path::Path, on: On) -> Arc<Notifier> {
        let sessions = Arc::new(Sessions::new(
            Journal::new(dir),
            "box".into(),
            CapturePolicy::new(Capture::Metadata),
            Redactor::new(RedactOptions::default()).unwrap(),
            Bus::default(),
        ));
        let intake = Arc::new(Intake::new(sessions.clone(), None));
        let settings = Settings {
            targets: vec![Target::Webhook(Endpoint {
                url: "http://127.0.0.1:9/x".parse().unwrap(),
                basic: None,
            })],
            on,
            public_url: Some("https://p.example".into()),
            link_lifetime: settings::LINK_LIFETIME,
            timeout: Duration::from_secs(1),
            attempts: 1,
            queue: 3,
        };
        Notifier::new(
            settings,
            "box".into(),
            "http://127.0.0.1:1".into(),
            true,
            sessions,
            intake,
            Index::new(),
        )
        .unwrap()
    }

    fn waiting(n: usize) -> Waiting {
        Waiting {
            session: "s1".into(),
            request: format!("REQ{n}"),
            tool: Some("run_commands".into()),
            input_json: Some(r#"{"commands":["make"]}"#.into()),
            since: "2026-12-01T09:00:00.000Z".into(),
            timeout: None,
        }
    }

    #[test]
    fn links_in_clear_beyond_this_machine_are_told() {
        assert!(in_clear("http://10.0.0.5:8789"));
        assert!(in_clear("http://box.example"));
        assert!(!in_clear("http://127.0.0.1:8789"));
        assert!(!in_clear("http://localhost:8789"));
        assert!(!in_clear("http://[::1]:8789"));
        assert!(!in_clear("https://box.example"));
    }

    #[test]
    fn a_full_queue_drops_its_oldest_and_counts_it() {
        let dir = tempfile::tempdir().unwrap();
        let n = notifier(dir.path(), kinds("approval"));
        for i in 0..5 {
            n.approval(waiting(i));
        }
        let status = n.status();
        assert_eq!(status["dropped"], 2, "{status}");
        assert_eq!(status["targets"][0]["queued"], 3);
        let queue = n.outs[0].queue.lock();
        assert_eq!(queue[0].body["request"], "REQ2", "the oldest went first");
        let body = &queue[2].body;
        assert_eq!(body["asked"], "run_commands: make");
        assert_eq!(body["text"], "Cline waits for your approval on box: run_commands: make");
        assert_eq!(
            body["actions"],
            json!({"approve": null, "deny": null, "dashboard": "https://p.example/#/s/s1"}),
            "no links while the intake takes no answers (control off)"
        );
        assert_eq!(n.asked("REQ4").unwrap().summary, "run_commands: make");
    }

    #[test]
    fn a_long_command_is_told_cut_with_where_all_of_it_is_and_remembered_whole() {
        let dir = tempfile::tempdir().unwrap();
        let n = notifier(dir.path(), kinds("approval"));
        let command = format!("echo {}; touch /tmp/TAIL_RAN", "a".repeat(231));
        n.approval(Waiting {
            input_json: Some(json!({ "commands": [command.clone()] }).to_string()),
            ..waiting(0)
        });
        let queue = n.outs[0].queue.lock();
        let asked = queue[0].body["asked"].as_str().unwrap();
        let hidden = "run_commands: ".len() + command.len() - asked::MAX_CHARS;
        assert!(
            asked.ends_with(&format!("… {hidden} more characters: see https://p.example/#/s/s1")),
            "no links while control is off: the dashboard shows it: {asked}"
        );
        assert!(queue[0].text.ends_with(asked), "{}", queue[0].text);
        assert_eq!(n.asked("REQ0").unwrap().summary, format!("run_commands: {command}"));
    }

    #[test]
    fn a_budgets_notice_is_sent_with_its_numbers_and_what_was_done() {
        let dir = tempfile::tempdir().unwrap();
        let notice = json!({"type": "attention.requested", "session": "s1", "run": "r1", "time": "t",
            "data": {"budget": {"name": "run", "limit": 2.0, "cost": 1.6, "currency": "USD", "threshold": 0.8}}});
        let stop = json!({"type": "attention.requested", "session": "s1", "run": "r1", "time": "t",
            "data": {"budget": {"name": "run", "limit": 2.0, "cost": 2.1, "currency": "USD", "threshold": 1.0,
                "action": "cancel"}}});
        let person = json!({"type": "attention.requested", "session": "s1", "data": {"kind": "permission"}});
        let off = notifier(dir.path(), kinds("approval"));
        off.news(&notice);
        assert_eq!(off.status()["targets"][0]["queued"], 0);
        let on = notifier(dir.path(), kinds("budget"));
        on.news(&notice);
        on.news(&stop);
        on.news(&person);
        let queue = on.outs[0].queue.lock();
        assert_eq!(queue.len(), 2, "a person's approval is not a budget's notice");
        assert_eq!(queue[0].body["kind"], "budget");
        assert_eq!(
            queue[0].text,
            "On box, session s1 reached 80% of its run budget ($1.60 of $2.00)"
        );
        assert_eq!(queue[0].body["budget"]["limit"], 2.0);
        assert_eq!(
            queue[1].text,
            "On box, session s1 reached 100% of its run budget ($2.10 of $2.00): the run is cancelled"
        );
    }

    #[test]
    fn a_guards_denial_is_sent_with_its_rule_and_reason_when_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let denied = json!({"type": "tool.denied", "session": "s1", "run": "r1", "time": "t",
            "data": {"tool": {"name": "run_commands"}, "by": "policy", "rule": "no-rm-r",
                     "cline.policy_reason": "delete files one by one"}});
        let off = notifier(dir.path(), kinds("approval,failed"));
        off.news(&denied);
        assert_eq!(off.status()["targets"][0]["queued"], 0);
        let on = notifier(dir.path(), kinds("denied"));
        on.news(&denied);
        let queue = on.outs[0].queue.lock();
        assert_eq!(queue.len(), 1);
        assert_eq!(queue[0].body["kind"], "denied");
        assert_eq!(
            queue[0].text,
            "On box, a guard refused a tool call (run_commands, by no-rm-r: delete files one by one): session s1"
        );
    }

    #[test]
    fn run_failures_and_session_ends_are_sent_only_when_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let failed = json!({"type": "run.failed", "session": "s1", "run": "r1", "time": "t",
            "data": {"reason": "api_req_failed"}});
        let ended = json!({"type": "session.ended", "session": "s1", "data": {"reason": "exit"}});
        let off = notifier(dir.path(), kinds("approval"));
        off.news(&failed);
        off.news(&ended);
        assert_eq!(off.status()["targets"][0]["queued"], 0);
        let on = notifier(dir.path(), kinds("failed,ended"));
        on.approval(waiting(0));
        on.news(&failed);
        on.news(&ended);
        on.news(&json!({"type": "run.finished", "session": "s1"}));
        let queue = on.outs[0].queue.lock();
        assert_eq!(queue.len(), 2, "neither the approval nor a finished run");
        assert_eq!(queue[0].body["kind"], "failed");
        assert_eq!(queue[0].body["reason"], "api_req_failed");
        assert_eq!(queue[0].body["run"], "r1");
        assert_eq!(queue[1].body["kind"], "ended");
        assert_eq!(queue[1].text, "On box, a Cline session ended (exit): session s1");
    }
}
