//! A slow subscriber never slows hooks (AEP-0003 §8.4): a subscriber that stops reading is cut
//! off with a `closing` comment once it falls a feed behind, while every hook is answered in
//! time (the shim never spools) and a healthy subscriber gets everything.

use crate::support;

use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use support::daemon::{real_payload, Sandbox};
use support::endpoint::{enc, event, ndjson, post, Sse};

const SESSION: &str = "1796007203184_6l7jh";

#[test]
fn a_stalled_subscriber_is_cut_off_and_hooks_never_wait_for_it() {
    let sb = Sandbox::new();
    let daemon = sb.start();
    let addr = daemon.addr();
    // The stalled subscriber: asks for everything, then never reads.
    let mut stalled = TcpStream::connect(&addr).unwrap();
    stalled
        .write_all(format!("GET /stream HTTP/1.0\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n").as_bytes())
        .unwrap();
    let healthy = Sse::open(
        &addr,
        &format!("/stream?filter={}", enc(&json!({"session": SESSION}).to_string())),
        &[],
    );
    let pad = "x".repeat(1024);
    let hooks = ["agent_start", "tool_call", "tool_result", "agent_end"];
    for batch in 0..30 {
        let flood: Vec<_> = (0..1000)
            .map(|i| {
                event(
                    "x.test.flood.tick",
                    "flood",
                    batch * 1000 + i,
                    Some(json!({"pad": pad})),
                )
            })
            .collect();
        assert_eq!(post(&addr, None, "application/x-ndjson", &ndjson(&flood)).0, 202);
        if let Some(hook) = hooks.get(batch as usize / 6) {
            if batch % 6 == 0 {
                let out = sb.hook(&real_payload("hooks-local", hook));
                assert!(out.status.success() && out.stderr.is_empty());
            }
        }
    }
    assert_eq!(
        sb.spooled(),
        0,
        "every hook was answered within the shim's 250 ms budget"
    );
    let log = sb.log(SESSION);
    assert_eq!(log.len(), 5);
    let got = healthy.events(Duration::from_secs(30), |e| e.len() >= log.len());
    assert_eq!(got, log, "the healthy subscriber got every hook Event");
    // The stalled one was ended by the endpoint, with the reason, so it can resume exactly.
    stalled.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut body = Vec::new();
    stalled
        .read_to_end(&mut body)
        .expect("the endpoint ends the stalled stream");
    let body = String::from_utf8_lossy(&body);
    assert!(
        body.contains(": closing backpressure"),
        "{}",
        &body[body.len().saturating_sub(300)..]
    );
}
