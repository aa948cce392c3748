//! `GET /metrics` on the real daemon: hooks through the real shim (one spooled before the daemon
//! ran, live ones, a duplicate, a refusal, a spool file that is no hook), an OTLP collector that is down, then a scrape whose
//! counters must have moved, parsed here line by line and checked by Prometheus's own
//! `promtool check metrics`; and a real Prometheus that scrapes the daemon and answers a query
//! over what it scraped (both Debian's `prometheus`, which `.ci/run` installs; elsewhere, without
//! it, those checks are skipped and say so).

use crate::support;

use crate::support::free_port;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::daemon::{http, real_payload, Sandbox};
use support::wait::wait_until_seen;

const WAIT: Duration = Duration::from_secs(30);
/// The session of the `hooks-local` payloads.
const SESSION: &str = "1796007203184_6l7jh";

/// A raw GET: (head, body), so the content type can be read.
fn get(addr: &str, path: &str, accept: Option<&str>) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a whole response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The daemon answers with a length, never chunked: the body is what follows the head.
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding: chunked"),
        "{head}"
    );
    (head.to_string(), body.to_string())
}

/// Every sample of a text exposition, `name{labels}` → value, checking each line's form: a
/// `# HELP` and `# TYPE` before a metric's samples, a number after each sample.
fn samples(text: &str) -> HashMap<String, f64> {
    let mut typed: Vec<String> = Vec::new();
    let mut out = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            typed.push(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        if line.starts_with("# HELP ") || line.starts_with("# UNIT ") || line == "# EOF" || line.is_empty() {
            continue;
        }
        assert!(!line.starts_with('#'), "an unknown comment line: {line}");
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("not a number: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(
            typed.iter().any(|t| name.starts_with(t.as_str())),
            "{name} has no # TYPE before it"
        );
        assert!(out.insert(series.to_string(), value).is_none(), "{series} twice");
    }
    out
}

fn value(samples: &HashMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("no {series} in {:#?}", samples.keys().collect::<Vec<_>>()))
}

/// `promtool check metrics` over `text`, when Prometheus's tools are installed.
fn promtool_check(text: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        // CI installs it (.ci/run): there a missing promtool fails, as a missing browser does.
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is not installed: apt-get install prometheus"
        );
        eprintln!("SKIPPED promtool check: promtool is not installed (apt-get install prometheus)");
        return;
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn counters_move_as_hooks_events_spooled_hooks_and_sink_failures_happen() {
    let sb = Sandbox::new()
        // Nothing listens there: the exporter retries, and says so.
        .with_env("AEP_OTLP_ENDPOINT", &format!("http://127.0.0.1:{}", free_port()))
        .with_env("AEP_OTLP_FLUSH", "50ms");
    // Fired while no daemon runs: the shim spools it, the daemon ingests it at start.
    let out = sb.hook(&real_payload("hooks-local", "agent_start"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(sb.spooled(), 1);
    // And a spool file that is no hook: the daemon quarantines it.
    std::fs::write(sb.state_dir.join("spool/0-bogus.json"), b"{not json").unwrap();
    let daemon = sb.start();
    sb.wait_spool_empty(WAIT);
    sb.hook_recorded(&real_payload("hooks-local", "tool_call"));
    sb.hook_recorded(&real_payload("hooks-local", "tool_result"));
    // The same firing again (another hook folder's copy): recorded once.
    sb.hook_recorded(&real_payload("hooks-local", "tool_result"));
    let auth = format!("Bearer {}", daemon.token);
    let (status, _) = http(
        &daemon.addr(),
        "POST",
        "/hook",
        &[("Authorization", &auth)],
        b"{not json",
    );
    assert_eq!(status, 400);

    // The collector is down: wait until the exporter has retried.
    let (head, text) = wait_until_seen("the OTLP exporter to retry", WAIT, || {
        let (head, text) = get(&daemon.addr(), "/metrics", None);
        if samples(&text)
            .get(r#"aep_cline_sink_retries_total{sink="otlp"}"#)
            .is_some_and(|r| *r >= 1.0)
        {
            Ok((head, text))
        } else {
            Err(format!("/metrics:\n{text}"))
        }
    });
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let s = samples(&text);
    assert_eq!(
        value(&s, r#"aep_cline_hooks_total{hook="agent_start",outcome="spooled"}"#),
        1.0
    );
    let recorded = |hook: &str| {
        ["taken", "spooled"]
            .iter()
            .filter_map(|o| s.get(&format!(r#"aep_cline_hooks_total{{hook="{hook}",outcome="{o}"}}"#)))
            .sum::<f64>()
    };
    assert_eq!(recorded("tool_call"), 1.0, "{text}");
    assert_eq!(recorded("tool_result"), 1.0, "{text}");
    assert_eq!(
        value(&s, r#"aep_cline_hooks_total{hook="tool_result",outcome="duplicate"}"#),
        1.0
    );
    assert_eq!(
        value(&s, r#"aep_cline_hooks_total{hook="unknown",outcome="refused"}"#),
        1.0
    );

    // Events by class, as the log holds them.
    let session = SESSION;
    let log = sb.log(session);
    let appended: f64 = s
        .iter()
        .filter(|(k, _)| k.starts_with("aep_cline_events_appended_total{"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(appended, log.len() as f64, "{text}");
    let tools = log
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("tool."))
        .count();
    assert_eq!(
        value(&s, r#"aep_cline_events_appended_total{class="tool"}"#),
        tools as f64
    );
    assert_eq!(value(&s, "aep_cline_log_write_errors_total"), 0.0);

    // What /healthz reports, the same numbers.
    assert_eq!(value(&s, r#"aep_cline_sink_connected{sink="otlp"}"#), 0.0);
    assert_eq!(
        value(&s, r#"aep_cline_sink_pending_events{sink="otlp"}"#),
        log.len() as f64
    );
    assert_eq!(value(&s, r#"aep_cline_sink_sent_events_total{sink="otlp"}"#), 0.0);
    assert!(
        !s.keys().any(|k| k.contains(r#"sink="relay""#)),
        "the relay is off: no series"
    );
    assert!(
        !s.contains_key("aep_cline_hub_connected"),
        "the hub tap is off: no series"
    );
    assert_eq!(value(&s, "aep_cline_sessions_open"), 1.0);
    assert_eq!(value(&s, "aep_cline_spool_hooks"), 0.0);
    assert_eq!(value(&s, "aep_cline_spool_quarantined_hooks"), 1.0);
    assert_eq!(value(&s, "aep_cline_spool_lost_hooks_total"), 0.0);
    assert_eq!(value(&s, "aep_cline_approvals_pending"), 0.0);
    assert!(value(&s, "aep_cline_uptime_seconds") >= 0.0);
    assert!(value(&s, "aep_cline_connections_open") >= 1.0, "this scrape's own");
    assert_eq!(
        value(
            &s,
            &format!(r#"aep_cline_build_info{{version="{}"}}"#, env!("CARGO_PKG_VERSION"))
        ),
        1.0
    );
    // Bounded labels: no session id in any series.
    assert!(!text.contains(session), "a session id in /metrics:\n{text}");
    promtool_check(&text);

    // OpenMetrics when asked, as Prometheus asks for it.
    let (head, open) = get(
        &daemon.addr(),
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
    );
    assert!(head.contains("application/openmetrics-text; version=1.0.0"), "{head}");
    assert!(open.ends_with("# EOF\n"), "{open}");
    let s = samples(&open);
    assert_eq!(
        value(&s, r#"aep_cline_hooks_total{hook="agent_start",outcome="spooled"}"#),
        1.0
    );

    // Unauthenticated like /healthz, and behind the same guard against browsers.
    let (status, _) = http(
        &daemon.addr(),
        "GET",
        "/metrics",
        &[("Origin", "https://evil.example"), ("Sec-Fetch-Site", "cross-site")],
        b"",
    );
    assert_eq!(status, 403);
}

/// A real Prometheus (Debian's `prometheus`, which `.ci/run` installs) scrapes the daemon: the
/// target is up (Prometheus read every line, negotiating OpenMetrics as it does) and a query
/// sees the hooks counted.
#[test]
fn a_real_prometheus_scrapes_the_daemon_and_queries_its_counters() {
    if Command::new("prometheus").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "prometheus is not installed: apt-get install prometheus"
        );
        eprintln!("SKIPPED: prometheus is not installed (apt-get install prometheus)");
        return;
    }
    let sb = Sandbox::new();
    let daemon = sb.start();
    sb.hook_recorded(&real_payload("hooks-local", "agent_start"));
    sb.hook_recorded(&real_payload("hooks-local", "tool_call"));

    let dir = sb.root.path().join("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: aep-cline\n    \
             static_configs:\n      - targets: [\"{}\"]\n",
            daemon.addr()
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
    let mut prometheus = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _kill = Kill(&mut prometheus);
    let said = || std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();

    let query = "/api/v1/query?query=sum(aep_cline_hooks_total)";
    let answer = wait_until_seen("Prometheus to have the hooks counted", Duration::from_secs(60), || {
        support::daemon::try_http(&web, "GET", query, &[], b"")
            .filter(|(status, _)| *status == 200)
            .and_then(|(_, body)| serde_json::from_str::<serde_json::Value>(&body).ok())
            .filter(|a| a["data"]["result"].as_array().is_some_and(|r| !r.is_empty()))
            .ok_or_else(|| format!("its log:\n{}", said()))
    });
    let hooks: f64 = answer["data"]["result"][0]["value"][1]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(hooks, 2.0, "{answer}");
    let (_, targets) = http(&web, "GET", "/api/v1/targets", &[], b"");
    let targets: serde_json::Value = serde_json::from_str(&targets).unwrap();
    let target = &targets["data"]["activeTargets"][0];
    assert_eq!(target["health"], "up", "{target}");
    assert_eq!(target["lastError"], "", "{target}");
}

/// The metric names in `s` (`aep_cline_` and word characters).
fn names_in(s: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut rest = s;
    while let Some(at) = rest.find("aep_cline_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

/// A served name without the suffix the encoder adds (`_total`, a unit, `_info`, a
/// histogram's series): the name the code registers.
fn registered(name: &str) -> &str {
    let name = ["_bucket", "_count", "_sum"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    ["_total", "_seconds", "_bytes", "_info"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// docs/operations.md documents every metric the code registers, and only those; the Grafana
/// dashboard (docs/grafana-dashboard.json) queries documented metrics only.
#[test]
fn every_metric_is_documented_and_the_dashboard_queries_only_those() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let code: std::collections::BTreeSet<String> = names_in(&read("../lane/src/metrics/mod.rs"))
        .into_iter()
        .chain(names_in(&read("src/routes/metrics.rs")))
        .chain(names_in(&read("src/fleet/metrics.rs")))
        // The unit tests' expectations name served series; the registered names are the rest.
        .map(|n| registered(&n).to_string())
        .collect();
    let docs = read("../../docs/operations.md");
    let documented: std::collections::BTreeSet<String> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|n| n.starts_with("aep_cline_"))
        .map(str::to_string)
        .collect();
    let documented_registered: std::collections::BTreeSet<String> =
        documented.iter().map(|n| registered(n).to_string()).collect();
    assert_eq!(documented_registered, code, "docs/operations.md and the code disagree");

    let dashboard: serde_json::Value = serde_json::from_str(&read("../../docs/grafana-dashboard.json")).unwrap();
    let mut queried = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            queried.extend(names_in(target["expr"].as_str().unwrap()));
        }
    }
    assert!(!queried.is_empty());
    for name in &queried {
        let served = documented.contains(name)
            || documented.contains(&format!("{}_seconds", registered(name)))
            || documented.contains(registered(name));
        assert!(served, "the dashboard queries {name}, which /metrics does not serve");
    }

    // The alerts the guide suggests are rules Prometheus loads.
    let alerts = docs.split("## Alerts worth having").nth(1).unwrap();
    let rules = alerts.split("```yaml\n").nth(1).unwrap().split("```").next().unwrap();
    for name in names_in(rules) {
        assert!(
            documented.contains(&name),
            "an alert uses {name}, which /metrics does not serve"
        );
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), rules).unwrap();
    match Command::new("promtool")
        .args(["check", "rules"])
        .arg(file.path())
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "promtool check rules: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "promtool is not installed: apt-get install prometheus"
            );
            eprintln!("SKIPPED promtool check rules: promtool is not installed (apt-get install prometheus)");
        }
    }
}
