//! The fleet simulation's load generator (`crates/daemon/bench/fleet.sh` runs it): drives N
//! running daemons through `POST /hook` (what the shim sends) and follows their JetStream
//! stream, then reports hooks sent, Events stored, Events/s end to end and the latency from a
//! hook's send to its Event's delivery from the stream (which comes after the server's
//! publish ack, so it bounds hook-to-ack from above).
//!
//! Each connection drives its own sessions one hook at a time (a hook's answer before the
//! next, as Cline's blocking hooks do), so the k-th hook of a session is its Event at seq
//! k + 1 (seq 0 is `session.started`): that is how a stored Event is matched to its hook.
//!
//!   fleet_load --daemons FILE --nats URL [--seconds 10] [--connections 8] [--sessions 4]
//!
//! FILE holds one `URL TOKEN` line per daemon (its discovery file's). Loopback only; the run
//! is bounded by --seconds, then by a 60 s wait for the stream to catch up.

use async_nats::jetstream::{self, consumer, stream};
use bytes::Bytes;
use clap::Parser;
use futures_util::StreamExt;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Args {
    /// One `URL TOKEN` line per daemon.
    #[arg(long)]
    daemons: std::path::PathBuf,
    #[arg(long)]
    nats: String,
    #[arg(long, default_value = "AEP")]
    stream: String,
    /// How long hooks are sent.
    #[arg(long, default_value = "10")]
    seconds: u64,
    /// Connections per daemon, each one hook at a time.
    #[arg(long, default_value = "8")]
    connections: usize,
    /// Sessions per connection, taken in turn.
    #[arg(long, default_value = "4")]
    sessions: usize,
    /// A label for this run's session ids (runs on one stream stay apart).
    #[arg(long, default_value = "run")]
    label: String,
    /// Instead of sending hooks: wait until the stream holds this many messages (a daemon
    /// resending its logs) and report how fast they came.
    #[arg(long)]
    backlog: Option<u64>,
}

type Sent = Vec<(String, u64, Instant)>;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(want) = args.backlog {
        return backlog(&args, want).await;
    }
    let daemons: Vec<(String, String)> = std::fs::read_to_string(&args.daemons)?
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(u, t)| (u.to_string(), t.trim().to_string())))
        .collect();
    anyhow::ensure!(!daemons.is_empty(), "no daemons in {}", args.daemons.display());

    let stored: Stored = Default::default();
    let expected = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let follower = follow(&args, stored.clone(), expected.clone()).await?;

    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(args.connections)
        .build_http();
    let start = Instant::now();
    let stop = start + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for (d, (url, token)) in daemons.iter().enumerate() {
        for c in 0..args.connections {
            let (client, url, token) = (client.clone(), url.clone(), token.clone());
            let sessions: Vec<String> = (0..args.sessions)
                .map(|s| format!("{}-d{d}c{c}s{s}", args.label))
                .collect();
            tasks.push(tokio::spawn(send(client, url, token, sessions, stop)));
        }
    }
    let mut sent: Sent = Vec::new();
    let mut errors = 0;
    let mut sessions = 0;
    for task in tasks {
        let (s, e, n) = task.await?;
        sent.extend(s);
        errors += e;
        sessions += n;
    }
    let sending = start.elapsed();
    // Every hook's Event, and one session.started per session.
    let want = sent.len() as u64 + sessions;
    expected.store(want, std::sync::atomic::Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(60), follower).await;
    let run = Run {
        daemons: daemons.len(),
        sent: &sent,
        errors,
        sending,
        want,
        start,
    };
    report(&args, &run, &stored.lock());
    Ok(())
}

type Stored = Arc<parking_lot::Mutex<Vec<(String, u64, Instant)>>>;

/// The follower, from new messages on (the stream made here if no daemon made it yet, as the
/// sink would: subjects aep.>, file storage): each of this run's Events stored, with when it
/// arrived, until `expected` are or an hour has passed.
async fn follow(
    args: &Args,
    stored: Stored,
    expected: Arc<std::sync::atomic::AtomicU64>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let js = jetstream::new(async_nats::connect(&args.nats).await?);
    let stream = js
        .get_or_create_stream(stream::Config {
            name: args.stream.clone(),
            subjects: vec!["aep.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await?;
    let mut messages = stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::New,
            filter_subject: "aep.>".to_string(),
            ..Default::default()
        })
        .await?
        .messages()
        .await?;
    let label = format!("{}-", args.label);
    Ok(tokio::spawn(async move {
        let deadline = tokio::time::sleep(Duration::from_secs(3600));
        tokio::pin!(deadline);
        loop {
            let got = stored.lock().len() as u64;
            if got >= expected.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            tokio::select! {
                m = messages.next() => {
                    let Some(Ok(m)) = m else { return };
                    let at = Instant::now();
                    let ce: serde_json::Value = match serde_json::from_slice(&m.payload) { Ok(v) => v, Err(_) => continue };
                    let (Some(session), Some(seq)) = (ce["aepsessionid"].as_str(), ce["aepsequence"].as_u64()) else { continue };
                    if session.starts_with(&label) {
                        stored.lock().push((session.to_string(), seq, at));
                    }
                }
                _ = &mut deadline => return,
            }
        }
    }))
}

/// One connection's load: hooks round-robin over its sessions until `stop`; what it sent (and
/// when), its errors, and how many sessions it started.
async fn send(
    client: Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    url: String,
    token: String,
    sessions: Vec<String>,
    stop: Instant,
) -> (Sent, u64, u64) {
    let mut sent: Sent = Vec::new();
    let mut errors = 0u64;
    let mut next = vec![0u64; sessions.len()];
    let mut i = 0usize;
    while Instant::now() < stop {
        let s = i % sessions.len();
        i += 1;
        let body = format!(
            r#"{{"hookName":"fleet_load","taskId":"t","sessionContext":{{"rootSessionId":"{}"}},"n":{}}}"#,
            sessions[s], next[s]
        );
        let request = hyper::Request::post(format!("{url}/hook"))
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("a request");
        let at = Instant::now();
        match client.request(request).await {
            Ok(response) if response.status() == 200 => {
                sent.push((sessions[s].clone(), next[s] + 1, at));
                next[s] += 1;
            }
            _ => errors += 1,
        }
    }
    (sent, errors, next.iter().filter(|n| **n > 0).count() as u64)
}

/// What the senders did: to how many daemons, each hook sent and when, the errors, how long
/// sending took, the Events expected, and when it started.
struct Run<'a> {
    daemons: usize,
    sent: &'a Sent,
    errors: u64,
    sending: Duration,
    want: u64,
    start: Instant,
}

/// The run's JSON line: hooks sent per second, Events stored end to end, the latency from a
/// hook's send to its Event stored.
fn report(args: &Args, run: &Run<'_>, stored: &[(String, u64, Instant)]) {
    let Run {
        daemons,
        sent,
        errors,
        sending,
        want,
        start,
    } = *run;
    let last = stored.iter().map(|(_, _, at)| *at).max().unwrap_or(start);
    let at: HashMap<(&str, u64), Instant> = stored.iter().map(|(s, q, t)| ((s.as_str(), *q), *t)).collect();
    let mut latencies: Vec<Duration> = sent
        .iter()
        .filter_map(|(s, q, sent_at)| at.get(&(s.as_str(), *q)).map(|t| t.saturating_duration_since(*sent_at)))
        .collect();
    latencies.sort();
    let pct = |p: f64| -> f64 {
        if latencies.is_empty() {
            return f64::NAN;
        }
        let i = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[i].as_secs_f64() * 1000.0
    };
    let span = last.saturating_duration_since(start).as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "daemons": daemons,
            "connections_per_daemon": args.connections,
            "hooks_sent": sent.len(),
            "hook_errors": errors,
            "sending_s": sending.as_secs_f64(),
            "hooks_per_s": sent.len() as f64 / sending.as_secs_f64(),
            "events_expected": want,
            "events_stored": stored.len(),
            "events_per_s_end_to_end": stored.len() as f64 / span,
            "latency_ms": {"p50": pct(0.50), "p99": pct(0.99), "max": pct(1.0)},
        })
    );
}

/// Polls the stream until it holds `want` messages: the first one's arrival to the last's.
async fn backlog(args: &Args, want: u64) -> anyhow::Result<()> {
    let js = jetstream::new(async_nats::connect(&args.nats).await?);
    let deadline = Instant::now() + Duration::from_secs(args.seconds.max(60));
    let mut first: Option<(Instant, u64)> = None;
    loop {
        let messages = match js.get_stream(&args.stream).await {
            Ok(mut stream) => stream.info().await?.state.messages,
            Err(_) => 0,
        };
        if messages > 0 && first.is_none() {
            first = Some((Instant::now(), messages));
        }
        if messages >= want || Instant::now() > deadline {
            let (at, base) = first.unwrap_or((Instant::now(), 0));
            let span = at.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({
                    "backlog": want,
                    "stored": messages,
                    "seconds": span,
                    "events_per_s": (messages - base) as f64 / span,
                })
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
