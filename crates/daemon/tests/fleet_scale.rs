//! The fleet console's page at scale: a stream filled as the daemons' JetStream sinks fill it
//! (`bench/fleet_console_pub.py`: sessions over hosts, half of them ended, every tenth waiting on
//! an approval), the console catching up with all of it at start, then its page loaded in
//! headless Chromium through the one-time link (the redirect included) and reloaded twice, each
//! time until its first rows are drawn. 1,000 sessions and 50,000 Events by default;
//! `crates/daemon/bench/fleet_page.sh` runs it as a benchmark (a release console over 10,000
//! sessions and 1,000,000 Events: `AEP_BENCH_BIN`, `AEP_BENCH_SESSIONS`, `AEP_BENCH_EVENTS`).
//!
//! The ceiling asserted is loose (a debug build on a busy 2-core machine); a regression by an
//! order of magnitude still fails.

use crate::nats::Server;
use crate::support::browser::Browser;
use crate::support::console::Console;
use crate::support::daemon::BIN;
use std::path::PathBuf;
use std::time::Instant;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_paints_its_first_rows_fast_over_a_full_stream() {
    let sessions = setting("AEP_BENCH_SESSIONS", 1000);
    let events = setting("AEP_BENCH_EVENTS", 50 * sessions);
    let hosts = (sessions / 50).max(1);
    let bin = std::env::var_os("AEP_BENCH_BIN").map_or_else(|| PathBuf::from(BIN), PathBuf::from);
    let server = Server::start(&[]);
    let publisher = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/fleet_console_pub.py");
    let out = std::process::Command::new("python3")
        .arg(publisher)
        .args([
            server.port.to_string(),
            events.to_string(),
            sessions.to_string(),
            hosts.to_string(),
        ])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The console reads the whole stream before it prints its sign-in link.
    let started = Instant::now();
    let console = Console::start_bin(&bin, &server.url(), &[], std::process::Stdio::null());
    let caught_up = started.elapsed();
    let browser = Browser::start().await;
    let mut paints = Vec::new();
    for page in [
        console.link.clone(),
        format!("http://{}/", console.addr),
        format!("http://{}/", console.addr),
    ] {
        browser.client.goto(&page).await.unwrap();
        let ms = browser
            .until("the first rows", 60, "return document.body.dataset.firstPaintMs")
            .await;
        let rows = browser
            .js("return document.querySelectorAll('#session-rows tr').length", vec![])
            .await;
        assert!(rows.as_u64().is_some_and(|n| n > 0), "rows drawn: {rows}");
        paints.push(ms.as_str().unwrap().parse::<u64>().unwrap());
    }
    browser.close().await;
    paints.sort();
    eprintln!(
        "{sessions} sessions, {events} events, {hosts} hosts: the console caught up in {caught_up:?}; first paint \
         {paints:?} ms (median {} ms)",
        paints[1]
    );
    assert!(paints[1] < 5000, "first paint {} ms", paints[1]);
}
