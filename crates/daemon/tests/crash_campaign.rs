//! The crash campaign: parallel Cline stand-ins fire real hooks through the real shim while the
//! daemon is frozen (SIGSTOP), killed (-9), stopped (SIGTERM) and restarted under them. After
//! the dust settles every fired hook is in its session's log exactly once, in firing order,
//! every tool pair is cause-linked, every run has one terminal, and the logs validate. Bounded:
//! a few seconds of faults.

use crate::support;

use aep_cline::firing::delivery_id;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::daemon::{real_payload, types, Daemon, Sandbox};

const SESSIONS: usize = 5;
const TOOL_CALLS: usize = 8;

/// Faults in the campaign: two freezes, two kill -9s and two SIGTERM restarts.
const ROUNDS: usize = 6;

/// Run `n`'s hooks for `session`, each made unique (its own timestamp and tool call ids), as
/// Cline fires them.
fn run(session: &str, n: usize) -> Vec<Vec<u8>> {
    let base = |hook: &str| -> Value {
        let mut v: Value = serde_json::from_slice(&real_payload("hooks-local", hook)).unwrap();
        v["sessionContext"]["rootSessionId"] = Value::from(session);
        v
    };
    let mut clock = (n * 1000) as u64;
    let mut stamp = |mut v: Value| {
        clock += 1;
        v["timestamp"] = Value::from(format!(
            "2026-12-01T00:{:02}:{:02}.{:03}Z",
            clock / 60_000,
            clock / 1000 % 60,
            clock % 1000
        ));
        serde_json::to_vec(&v).unwrap()
    };
    let mut hooks = vec![stamp(base("agent_start"))];
    for call in 0..TOOL_CALLS {
        let id = format!("call_{session}_{n}_{call}");
        let mut requested = base("tool_call");
        requested["tool_call"]["id"] = Value::from(id.as_str());
        hooks.push(stamp(requested));
        let mut resolved = base("tool_result");
        resolved["tool_result"]["id"] = Value::from(id.as_str());
        hooks.push(stamp(resolved));
    }
    hooks.push(stamp(base("agent_end")));
    hooks
}

#[test]
fn every_hook_survives_freezes_kills_and_restarts_once_and_in_order() {
    let sb = Arc::new(Sandbox::new());
    let daemon: Arc<Mutex<Option<Daemon>>> = Arc::new(Mutex::new(Some(sb.start())));
    let firing = Arc::new(AtomicBool::new(true));

    let chaos = {
        let (sb, daemon, firing) = (sb.clone(), daemon.clone(), firing.clone());
        std::thread::spawn(move || {
            for round in 0..ROUNDS {
                std::thread::sleep(Duration::from_millis(150));
                let mut slot = daemon.lock().unwrap();
                match round % 3 {
                    0 => {
                        let d = slot.as_ref().unwrap();
                        d.signal("-STOP");
                        std::thread::sleep(Duration::from_millis(400));
                        d.signal("-CONT");
                    }
                    1 => {
                        slot.as_ref().unwrap().signal("-KILL");
                        drop(slot.take());
                        // The scenario: hooks fire while no daemon runs.
                        std::thread::sleep(Duration::from_millis(100));
                        *slot = Some(sb.start());
                    }
                    _ => {
                        let (status, _) = slot.take().unwrap().stop();
                        assert!(status.success());
                        *slot = Some(sb.start());
                    }
                }
            }
            firing.store(false, Ordering::SeqCst);
        })
    };

    let started = Instant::now();
    let clines: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let sb = sb.clone();
            let firing = firing.clone();
            std::thread::spawn(move || {
                let session = format!("crash-{s}");
                let mut hooks = Vec::new();
                // Runs after runs in one session, until the faults are over.
                for n in 0.. {
                    for hook in run(&session, n) {
                        let out = sb.hook(&hook);
                        assert!(out.status.success() && out.stdout.is_empty());
                        hooks.push(hook);
                        // A Cline fires its next hook after a model call or a tool, never in a
                        // tight loop: unpaced, five writers outran a restarting daemon's drain
                        // on a loaded machine (the spool grew faster than it drained).
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if !firing.load(Ordering::SeqCst) {
                        return (session, hooks, n + 1);
                    }
                }
                unreachable!()
            })
        })
        .collect();
    chaos.join().unwrap();
    let fired: Vec<(String, Vec<Vec<u8>>, usize)> = clines.into_iter().map(|c| c.join().unwrap()).collect();
    // No hook waited on a frozen or dead daemon (a shim gives up after 250 ms): the campaign
    // ends, whatever the load. The bound only catches a shim that hung.
    assert!(started.elapsed() < Duration::from_secs(300), "{:?}", started.elapsed());

    sb.wait_spool_empty(Duration::from_secs(60));
    let mut files = Vec::new();
    for (session, hooks, runs) in &fired {
        let events = sb.log(session);
        // Exactly once, in firing order: the deliveries, in the order they first appear.
        let mut seen: Vec<&str> = Vec::new();
        for d in events.iter().filter_map(|e| e["clinehook"].as_str()) {
            if seen.last() != Some(&d) {
                assert!(!seen.contains(&d), "{session}: delivery {d} recorded twice");
                seen.push(d);
            }
        }
        let expected: Vec<String> = hooks.iter().map(|h| delivery_id(h)).collect();
        let first_wrong = seen.iter().zip(&expected).position(|(got, want)| *got != want.as_str());
        assert!(
            first_wrong.is_none() && seen.len() == expected.len(),
            "{session}: every hook once, in firing order: {} of {} recorded, first out of place at {first_wrong:?}",
            seen.len(),
            expected.len()
        );
        // Tool pairs are cause-linked; the run has one terminal.
        let requested: HashMap<&str, &str> = events
            .iter()
            .filter(|e| e["type"] == "tool.requested")
            .map(|e| {
                (
                    e["data"]["tool"]["call_id"].as_str().unwrap(),
                    e["id"].as_str().unwrap(),
                )
            })
            .collect();
        for done in events.iter().filter(|e| e["type"] == "tool.completed") {
            let call = done["data"]["tool"]["call_id"].as_str().unwrap();
            assert_eq!(
                done["cause"].as_str(),
                requested.get(call).copied(),
                "{session}: {done}"
            );
        }
        let kinds = types(&events);
        assert_eq!(
            kinds.iter().filter(|t| **t == "run.started").count(),
            *runs,
            "{session}: {kinds:?}"
        );
        assert_eq!(
            kinds.iter().filter(|t| **t == "run.finished").count(),
            *runs,
            "{session}: {kinds:?}"
        );
        assert!(!kinds.contains(&"run.cancelled"), "{session}: {kinds:?}");
        support::daemon::assert_valid_stream(&events);
        files.push(sb.log_dir.join("cline").join(format!("{session}.jsonl")));
    }
    let mut args = vec!["validate".to_string()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sb.run(&args, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    drop(daemon.lock().unwrap().take());
}
