//! Fan-out benchmark: one emitter, 10 SSE subscribers on the daemon's embedded endpoint.
//!
//! Starts the release daemon (AEP_BUFFER=1000), opens 10 `GET /stream` subscribers, then:
//! 1. hooks: one emitter posts vendor hooks to `POST /hook` on one keep-alive connection, as
//!    fast as answers come back; each hook is one logged Event (`seq` = hook index + 1). It
//!    reports hooks/s (logged and delivered to all 10) and hook-to-delivery latency (from
//!    sending the hook to a subscriber reading its Event) at p50/p99, over every delivery;
//! 2. collector: the emitter posts NDJSON batches of 1 000 Events to `POST /events`;
//!    Events/s delivered to all 10;
//! 3. memory: the daemon's peak RSS after each phase, twice the Events in phase 2, to show that
//!    memory is bounded by the buffer, not by the traffic.
//!
//! Run: `crates/daemon/bench/fanout.sh [HOOKS]` (or `cargo bench -p aep-cline --bench fanout`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SUBSCRIBERS: usize = 10;
const SESSION: &str = "bench";

fn main() {
    let hooks: u64 = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(20_000);
    let dir = tempfile::tempdir().expect("scratch dir");
    let mut daemon = start(dir.path());
    let (addr, token) = discovery(dir.path());
    println!("daemon {addr} (pid {}), {SUBSCRIBERS} SSE subscribers", daemon.id());

    // Phase 1: hooks.
    let subs = subscribe(&addr, &format!("%7B%22session%22%3A%22{SESSION}%22%7D"));
    let mut conn = TcpStream::connect(&addr).unwrap();
    conn.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut sent = Vec::with_capacity(hooks as usize + 1);
    let start = Instant::now();
    for i in 0..=hooks {
        let body = format!(
            "{{\"hookName\":\"bench_tick\",\"taskId\":\"{SESSION}\",\"sessionContext\":{{\"rootSessionId\":\"{SESSION}\"}},\"n\":{i}}}"
        );
        let request = format!(
            "POST /hook HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        sent.push(Instant::now());
        conn.write_all(request.as_bytes()).unwrap();
        read_response(&mut reader);
    }
    let posted = start.elapsed();
    // The first hook also opened the session: hook i is the Event at seq i + 1.
    let last_seq = hooks + 1;
    let mut latencies = Vec::new();
    let mut done = start;
    for rx in &subs {
        for (seq, at) in collect(rx, last_seq) {
            if seq >= 1 {
                latencies.push(at.duration_since(sent[(seq - 1) as usize]));
            }
            done = done.max(at);
        }
    }
    latencies.sort();
    // seq 0 (session.started) to `last_seq`, on each subscriber.
    let expected = SUBSCRIBERS * (last_seq as usize + 1);
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "hooks: {hooks} in {:.2?} (posting {:.2?}): {:.0} hooks/s logged and delivered to all {SUBSCRIBERS}; deliveries {}/{expected}",
        done - start,
        posted,
        hooks as f64 / (done - start).as_secs_f64(),
        latencies.len() + SUBSCRIBERS
    );
    println!(
        "hook-to-delivery latency: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        latencies.last().unwrap().as_secs_f64() * 1e3
    );
    drop(subs);
    println!("daemon peak RSS after hooks: {} MiB", peak_rss_mib(daemon.id()));

    // Phase 2: the collector path, twice, to show memory does not grow with traffic.
    for round in 1..=2 {
        let events = hooks * round;
        let session = format!("bench-post-{round}");
        let subs = subscribe(&addr, &format!("%7B%22session%22%3A%22{session}%22%7D"));
        let start = Instant::now();
        let mut seq = 0;
        while seq < events {
            let mut body = String::new();
            for _ in 0..1000.min(events - seq) {
                body.push_str(&format!(
                    "{{\"aep\":\"0.1\",\"id\":\"{session}-{seq}\",\"type\":\"tool.completed\",\"time\":\"2026-11-30T00:00:00Z\",\"source\":\"aep://bench/agent/bench/session/{session}\",\"agent\":\"bench\",\"session\":\"{session}\",\"seq\":{seq},\"data\":{{\"tool\":{{\"name\":\"read_file\"}},\"duration_ms\":3}}}}\n"
                ));
                seq += 1;
            }
            let (status, text) = post(&addr, &body);
            assert_eq!(status, 202, "{text}");
        }
        let mut done = start;
        for rx in &subs {
            let got = collect(rx, events - 1);
            assert_eq!(got.len() as u64, events, "every subscriber got every Event");
            done = done.max(got.last().unwrap().1);
        }
        println!(
            "collector: {events} Events in {:.2?}: {:.0} Events/s delivered to all {SUBSCRIBERS}; daemon peak RSS {} MiB",
            done - start,
            events as f64 / (done - start).as_secs_f64(),
            peak_rss_mib(daemon.id())
        );
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
}

fn start(dir: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_aep-cline"))
        .arg("daemon")
        .env("HOME", dir)
        .env("AEP_LOG_DIR", dir.join("logs"))
        .env("AEP_CLINE_STATE_DIR", dir.join("state"))
        .env("AEP_LISTEN", "127.0.0.1:0")
        .env("AEP_BUFFER", "1000")
        .env("RUST_LOG", "warn")
        .env_remove("AEP_TOKEN")
        .env_remove("AEP_RELAY_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the daemon")
}

fn discovery(dir: &std::path::Path) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(text) = std::fs::read(dir.join("state").join("daemon.json")) {
            let d: serde_json::Value = serde_json::from_slice(&text).unwrap();
            let url = d["url"].as_str().unwrap().trim_start_matches("http://").to_string();
            return (url, d["token"].as_str().unwrap().to_string());
        }
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Subscribers reporting `(seq, when read)` for each Event they read.
fn subscribe(addr: &str, filter: &str) -> Vec<mpsc::Receiver<(u64, Instant)>> {
    (0..SUBSCRIBERS)
        .map(|_| {
            let mut stream = TcpStream::connect(addr).unwrap();
            write!(stream, "GET /stream?filter={filter} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let mut reader = BufReader::with_capacity(1 << 16, stream);
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    if let Some(id) = line.strip_prefix("id: ") {
                        let seq = id.trim_end().rsplit(':').next().and_then(|s| s.parse().ok()).unwrap();
                        if tx.send((seq, Instant::now())).is_err() {
                            return;
                        }
                    }
                }
            });
            rx
        })
        .collect()
}

fn collect(rx: &mpsc::Receiver<(u64, Instant)>, last_seq: u64) -> Vec<(u64, Instant)> {
    let mut got = Vec::new();
    while let Ok((seq, at)) = rx.recv_timeout(Duration::from_secs(30)) {
        got.push((seq, at));
        if seq == last_seq {
            break;
        }
    }
    got
}

fn read_response(reader: &mut BufReader<TcpStream>) {
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        assert!(!line.is_empty(), "the daemon closed the connection");
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
}

fn post(addr: &str, body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /events HTTP/1.0\r\nHost: {addr}\r\nAEP-Version: 0.1\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}
