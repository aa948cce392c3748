//! The tap's one outbound WebSocket to the Cline hub, and the ack guard.
//!
//! Each attempt: resolve the endpoint (the discovery file is read again: a restarted hub has a
//! new token), check the protocol version, connect with the token as the subprotocol
//! `cline-hub-auth.<token>`, `client.register` (its own client id, no capabilities), then
//! `stream.subscribe`, with `sinceSequence` when resuming the same hub (a restarted hub, with a
//! new `hubId`, starts its sequence over). The hub re-sends every approval still pending at
//! each subscribe, so none is missed across a reconnect.
//!
//! Any failure (no discovery file, refused upgrade, wrong token, another protocol version, a
//! hub that does not answer `client.register`, a dropped socket) ends the attempt: pending
//! requests are dismissed, commands in flight are nacked `busy`, and the next attempt comes
//! after a jittered backoff (from the reconnect setting, one second, up to ten times that).
//! Failures are logged once each (then at debug), never with the token. What a frame does to a
//! session's lane is a file append: it runs on a blocking thread, in frame order.

use crate::backoff::Backoff;
use crate::budget::Watch;
use crate::control::{Intake, Request, Requests};
use crate::hub::settings::Settings;
use crate::hub::status::Status;
use crate::hub::tap;
use crate::lane::Sessions;
use cline_hub::ack::{self, HubOutcome};
use cline_hub::frame::{self, FrameError, HubError, Incoming};
use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::{sleep, sleep_until, timeout, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{header, HeaderValue};
use tokio_tungstenite::tungstenite::Message;

const REGISTER_REQUEST: &str = "aep_register";
/// Commands the guard accepted are kept for their late reply (it still settles the outcome),
/// at most this many on a connection: past it the oldest are forgotten, and a reply to one of
/// those is only logged.
const LATE_REPLIES: usize = 256;

/// Where to resume: the hub instance last connected to and the last event sequence it sent.
#[derive(Default)]
struct Resume {
    hub_id: Option<String>,
    since: Option<u64>,
}

/// A command sent to the hub, waiting for its reply.
struct Flight {
    request: Request,
    deadline: Instant,
    /// The guard expired and accepted it; the reply still settles the lane.
    acked: bool,
}

/// Drops the flights the guard settled beyond the `keep` most recent: a hub that never replies
/// must not grow the table one command at a time.
fn forget_oldest_settled(flights: &mut HashMap<String, Flight>, keep: usize) {
    let mut settled: Vec<(Instant, String)> = flights
        .iter()
        .filter(|(_, f)| f.acked)
        .map(|(id, f)| (f.deadline, id.clone()))
        .collect();
    if settled.len() <= keep {
        return;
    }
    settled.sort();
    for (_, id) in &settled[..settled.len() - keep] {
        flights.remove(id);
    }
}

/// Logs each distinct failure once (then at debug), so a hub that stays down does not flood
/// the log at one line a second.
#[derive(Default)]
struct Failures {
    last: Option<String>,
}

impl Failures {
    fn report(&mut self, why: &str) {
        if self.last.as_deref() == Some(why) {
            tracing::debug!(reason = why, "hub tap: still not connected");
        } else {
            tracing::warn!(
                reason = why,
                "hub tap: not connected; observe-only until it is (retry every second)"
            );
            self.last = Some(why.to_string());
        }
    }
}

pub async fn run(
    settings: Settings,
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
    requests: &mut Requests,
    status: &Status,
    budget: Arc<Watch>,
) {
    let mut resume = Resume::default();
    let mut failures = Failures::default();
    let mut backoff = Backoff::new(settings.reconnect, settings.reconnect * 10);
    let mut attempt = 0u64;
    loop {
        attempt += 1;
        let mut conn = Connection {
            settings: &settings,
            lane: LaneWork {
                sessions: sessions.clone(),
                intake: intake.clone(),
            },
            budget: budget.clone(),
            requests,
            client_id: format!("aep-cline-{}-{attempt}", std::process::id()),
            status,
            flights: HashMap::new(),
            follow_ups: Vec::new(),
            next_request: 0,
            connected: false,
            hub_down: false,
        };
        let ended = conn.attempt(&mut resume, &mut failures).await;
        let hub_down = conn.hub_down;
        if conn.connected {
            backoff.reset();
        }
        let lane = conn.lane;
        requests.set_connected(false);
        if let Err(why) = ended {
            status.failed(&why, hub_down);
            failures.report(&why);
        }
        lane.run(|s, _| tap::disconnected(s)).await;
        let pause = sleep(backoff.next_wait());
        tokio::pin!(pause);
        loop {
            tokio::select! {
                _ = &mut pause => break,
                Some(request) = requests.recv() => {
                    lane.run(move |s, i| tap::unanswered(s, i, &request, "the hub tap is reconnecting")).await;
                }
            }
        }
    }
}

/// The lane and the intake, reached from a blocking thread: what a frame does is file I/O.
#[derive(Clone)]
struct LaneWork {
    sessions: Arc<Sessions>,
    intake: Arc<Intake>,
}

impl LaneWork {
    /// Runs `work` on a blocking thread and waits for it, so frames are applied in order.
    async fn run<T: Send + 'static>(&self, work: impl FnOnce(&Sessions, &Intake) -> T + Send + 'static) -> T {
        let (sessions, intake) = (self.sessions.clone(), self.intake.clone());
        match tokio::task::spawn_blocking(move || work(&sessions, &intake)).await {
            Ok(done) => done,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

struct Connection<'a> {
    settings: &'a Settings,
    budget: Arc<Watch>,
    status: &'a Status,
    lane: LaneWork,
    requests: &'a mut Requests,
    client_id: String,
    flights: HashMap<String, Flight>,
    /// What a reply asked to send next (a cancelled run's waiting approvals, denied).
    follow_ups: Vec<Request>,
    next_request: u64,
    /// Registered and subscribed at some point: the backoff starts over.
    connected: bool,
    /// The attempt found no hub running (no discovery file, nothing listening).
    hub_down: bool,
}

impl Connection<'_> {
    /// One connection, from resolving the endpoint to its end, which is always an `Err` saying
    /// why.
    async fn attempt(&mut self, resume: &mut Resume, failures: &mut Failures) -> Result<(), String> {
        let endpoint = self.settings.source.resolve().inspect_err(|_| {
            // No discovery file (or an unreadable one): the hub is not running.
            self.hub_down = true;
        })?;
        endpoint.check_version().map_err(|e| e.to_string())?;
        if endpoint.hub_id != resume.hub_id {
            resume.since = None;
            resume.hub_id = endpoint.hub_id.clone();
        }
        let mut request = endpoint
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| format!("the hub URL {} is not usable: {e}", endpoint.url))?;
        let protocol = HeaderValue::from_str(&endpoint.token.subprotocol())
            .map_err(|_| "the hub token cannot be sent as a WebSocket subprotocol".to_string())?;
        request.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, protocol);
        let handshake = self.settings.handshake;
        let (mut ws, _) = match timeout(handshake, tokio_tungstenite::connect_async(request)).await {
            Err(_) => {
                return Err(format!(
                    "the hub at {} did not complete the upgrade within {handshake:?}",
                    endpoint.url
                ))
            }
            Ok(Err(tokio_tungstenite::tungstenite::Error::Http(response))) => {
                return Err(format!(
                    "the hub at {} refused the connection (HTTP {}): is the token current? With \
                     AEP_CLINE_HUB_DISCOVERY it is read again at every attempt",
                    endpoint.url,
                    response.status()
                ))
            }
            Ok(Err(e)) => {
                use tokio_tungstenite::tungstenite::Error::Io;
                // Nothing listens where the hub was: it is not running (`cline hub stop`, or
                // not started yet), which is no fault of the setup.
                self.hub_down = matches!(&e, Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused);
                return Err(format!("cannot connect to the hub at {}: {e}", endpoint.url));
            }
            Ok(Ok(ok)) => ok,
        };
        let io = |e: tokio_tungstenite::tungstenite::Error| format!("the hub connection failed: {e}");
        ws.send(Message::text(frame::register(REGISTER_REQUEST, &self.client_id)))
            .await
            .map_err(io)?;
        match timeout(handshake, registered(&mut ws)).await {
            Err(_) => return Err(format!("the hub did not answer client.register within {handshake:?}")),
            Ok(result) => result?,
        }
        // Commands queued while no hub was there are refused, not sent to a new connection.
        while let Some(request) = self.requests.try_recv() {
            self.lane
                .run(move |s, i| tap::unanswered(s, i, &request, "the hub tap was reconnecting"))
                .await;
        }
        self.requests.set_connected(true);
        self.lane.sessions.hub_connected(true);
        self.connected = true;
        ws.send(Message::text(frame::subscribe(&self.client_id, resume.since)))
            .await
            .map_err(io)?;
        failures.last = None;
        self.status.connected(
            &endpoint.url,
            endpoint.protocol_version.as_deref(),
            endpoint.hub_id.as_deref(),
        );
        tracing::info!(url = %endpoint.url, resumed_after = ?resume.since, control = self.settings.control, "hub tap connected");
        let ended = self.serve(&mut ws, resume).await;
        self.requests.set_connected(false);
        let _ = ws.close(None).await;
        let unanswered: Vec<Request> = self
            .flights
            .drain()
            .filter(|(_, f)| !f.acked)
            .map(|(_, f)| f.request)
            .collect();
        if !unanswered.is_empty() {
            self.lane
                .run(move |s, i| {
                    for request in &unanswered {
                        tap::unanswered(s, i, request, "the hub connection dropped before it answered");
                    }
                })
                .await;
        }
        ended
    }

    async fn serve<S>(&mut self, ws: &mut S, resume: &mut Resume) -> Result<(), String>
    where
        S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>>
            + futures_util::Sink<Message, Error = tokio_tungstenite::tungstenite::Error>
            + Unpin,
    {
        loop {
            for request in std::mem::take(&mut self.follow_ups) {
                self.send(ws, request).await?;
            }
            let deadline = self.flights.values().filter(|f| !f.acked).map(|f| f.deadline).min();
            tokio::select! {
                message = ws.next() => match message {
                    Some(Ok(Message::Text(text))) => self.on_frame(text.as_str(), resume).await?,
                    Some(Ok(Message::Binary(_))) => tracing::warn!("hub tap: a binary frame from the hub is ignored"),
                    Some(Ok(Message::Close(_))) | None => return Err("the hub closed the connection".into()),
                    Some(Ok(_)) => {} // ping/pong: answered by the WebSocket layer
                    Some(Err(e)) => return Err(format!("the hub connection failed: {e}")),
                },
                Some(request) = self.requests.recv() => self.send(ws, request).await?,
                _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => self.guard_expired().await,
            }
        }
    }

    /// Sends one command to the hub and waits for its reply in [`Connection::flights`].
    async fn send<S>(&mut self, ws: &mut S, request: Request) -> Result<(), String>
    where
        S: futures_util::Sink<Message, Error = tokio_tungstenite::tungstenite::Error> + Unpin,
    {
        self.next_request += 1;
        let request_id = format!("aep_{}", self.next_request);
        let hub = &request.hub;
        let text = frame::command(
            hub.name,
            &request_id,
            &self.client_id,
            Some(&hub.session_id),
            &hub.payload,
        );
        if let Err(e) = ws.send(Message::text(text)).await {
            self.lane
                .run(move |s, i| tap::unanswered(s, i, &request, "the hub connection failed"))
                .await;
            return Err(format!("the hub connection failed: {e}"));
        }
        let deadline = Instant::now() + self.settings.ack_guard;
        self.flights.insert(
            request_id,
            Flight {
                request,
                deadline,
                acked: false,
            },
        );
        Ok(())
    }

    /// The ack guard: a command the hub has not answered in time is accepted (an ack is a
    /// will-try; its outcome settles on the stream).
    async fn guard_expired(&mut self) {
        let now = Instant::now();
        let mut expired = Vec::new();
        for flight in self.flights.values_mut().filter(|f| !f.acked && f.deadline <= now) {
            expired.push(flight.request.clone());
            flight.acked = true;
        }
        forget_oldest_settled(&mut self.flights, LATE_REPLIES);
        self.lane
            .run(move |_, intake| {
                for r in &expired {
                    intake.settle(&r.key, &r.session, &r.command_id, ack::decide(HubOutcome::GuardExpired));
                }
            })
            .await;
    }

    async fn on_frame(&mut self, text: &str, resume: &mut Resume) -> Result<(), String> {
        match frame::parse(text) {
            Ok(Incoming::Reply(reply)) => match self.flights.remove(&reply.request_id) {
                Some(flight) => {
                    let refusal = (!reply.ok).then(|| {
                        reply.error.clone().unwrap_or(HubError {
                            code: "error".into(),
                            message: "the hub answered ok: false without an error".into(),
                        })
                    });
                    let next = self
                        .lane
                        .run(move |s, i| tap::replied(s, i, &flight.request, refusal.as_ref().map_or(Ok(()), Err)))
                        .await;
                    self.follow_ups.extend(next);
                }
                None => tracing::debug!(request = %reply.request_id, "hub tap: a reply to no command in flight"),
            },
            Ok(Incoming::Event(event)) => {
                if let Some(seq) = event.sequence {
                    resume.since = Some(resume.since.map_or(seq, |s| s.max(seq)));
                }
                // Any frame naming a session says the hub hosts it (an approval, a tool, usage):
                // its runs are the hub's to cancel. Asked cheaply first, as frames come often.
                if let Some(session) = event.session_id.clone().filter(|s| !self.lane.sessions.hosted_here(s)) {
                    self.lane.run(move |s, _| s.hosted_by_hub(&session)).await;
                }
                let control = self.settings.control;
                match (event.event.as_str(), event.session_id.clone()) {
                    ("approval.requested", _) => {
                        let (notify, policy) = (self.settings.notify.clone(), self.settings.policy.clone());
                        let later = self
                            .lane
                            .run(move |s, i| {
                                let waiting = tap::approval_requested(s, i, &event, control, policy.as_deref());
                                let later = waiting
                                    .as_ref()
                                    .and_then(|w| w.timeout.clone().map(|t| (w.session.clone(), w.request.clone(), t)));
                                if let (Some(notify), Some(waiting)) = (notify, waiting) {
                                    notify.approval(waiting);
                                }
                                later
                            })
                            .await;
                        // A person has until the timeout; then the policy answers (unless one
                        // did: `timed_out` answers only a request nobody's answer is on its way to).
                        if let Some((session, request, (timeout, rule))) = later {
                            let lane = self.lane.clone();
                            tokio::spawn(async move {
                                tokio::time::sleep(timeout.after).await;
                                lane.run(move |s, i| tap::timed_out(i, s, &session, &request, timeout, &rule))
                                    .await;
                            });
                        }
                    }
                    ("approval.resolved", Some(session)) => {
                        self.lane
                            .run(move |s, _| tap::approval_resolved(s, &session, &event))
                            .await
                    }
                    ("approval.resolved", None) => {
                        tracing::warn!("hub tap: approval.resolved without a sessionId is ignored")
                    }
                    ("run.aborted", Some(session)) => {
                        let news = event.clone();
                        self.lane
                            .run(move |s, _| {
                                tap::session_news(s, &session, &news);
                                tap::run_aborted(s, &session)
                            })
                            .await
                    }
                    ("usage.updated", Some(session)) => {
                        let budget = self.budget.clone();
                        self.lane.run(move |s, _| budget.hub_usage(s, &session, &event)).await
                    }
                    (_, Some(session)) if event.event.starts_with("session.") || event.event.starts_with("run.") => {
                        if event.event.starts_with("session.") {
                            self.budget.hub_session(&session, &event);
                        }
                        self.lane.run(move |s, _| tap::session_news(s, &session, &event)).await
                    }
                    _ => {}
                }
            }
            Ok(Incoming::Other { kind }) => tracing::debug!(%kind, "hub tap: a frame of unknown kind is ignored"),
            Err(e @ FrameError::Version { .. }) => return Err(e.to_string()),
            Err(e) => tracing::warn!(error = %e, "hub tap: frame ignored"),
        }
        Ok(())
    }
}

/// Waits for the `client.register` reply.
async fn registered<S>(ws: &mut S) -> Result<(), String>
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    while let Some(message) = ws.next().await {
        let message = message.map_err(|e| format!("the hub connection failed: {e}"))?;
        let Message::Text(text) = message else { continue };
        match frame::parse(text.as_str()) {
            Ok(Incoming::Reply(reply)) if reply.request_id == REGISTER_REQUEST => {
                return match (reply.ok, reply.error) {
                    (true, _) => Ok(()),
                    (false, e) => Err(format!(
                        "the hub refused client.register: {}",
                        e.map_or("no reason given".into(), |e| format!("{} ({})", e.code, e.message))
                    )),
                };
            }
            Err(e @ FrameError::Version { .. }) => return Err(e.to_string()),
            _ => {}
        }
    }
    Err("the hub closed the connection before answering client.register".into())
}

#[cfg(test)]
mod flight_tests {
    use super::*;
    use crate::control::Kind;
    use cline_hub::control::HubCommand;
    use cline_hub::CommandKey;
    use std::time::Duration;

    fn flight(n: u64, acked: bool, at: Instant) -> (String, Flight) {
        let request = Request {
            key: CommandKey {
                source: "aep://h/agent/ui".into(),
                id: format!("c{n}"),
            },
            session: "s".into(),
            command_id: format!("c{n}"),
            hub: HubCommand {
                name: "session.cancel",
                session_id: "s".into(),
                payload: serde_json::Value::Null,
            },
            kind: Kind::Cancel { run: "r".into() },
        };
        let deadline = at + Duration::from_millis(n);
        (
            format!("aep_{n}"),
            Flight {
                request,
                deadline,
                acked,
            },
        )
    }

    #[test]
    fn only_the_newest_settled_flights_are_kept_and_open_ones_stay() {
        let now = Instant::now();
        let mut flights: HashMap<String, Flight> = (1..=10).map(|n| flight(n, n <= 8, now)).collect();
        forget_oldest_settled(&mut flights, 3);
        let mut left: Vec<&str> = flights.keys().map(String::as_str).collect();
        left.sort();
        assert_eq!(left, ["aep_10", "aep_6", "aep_7", "aep_8", "aep_9"]);
    }
}
