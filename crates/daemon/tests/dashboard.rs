//! The dashboard in a real browser (headless Chromium through chromedriver), on the real binary
//! whose hub tap talks to a stub hub (real hub frames): signing in with the one-time link, the
//! session list, a pending approval first, Approve and Cancel with their acks and outcomes, and
//! the doors a foreign page or a rebound host name find shut.

use crate::support;

use serde_json::{json, Value};
use std::time::Duration;
use support::browser::Browser;
use support::daemon::{has, http, real_payload, Daemon, Sandbox};
use support::stub_hub::{real_frame, StubHub};

const SESSION: &str = "1796007217803_dxv4z";
const TOKEN: &str = "0123456789abcdef0123456789abcdef-stub";

/// `aep-cline open --no-browser`: the one-time link.
fn login_link(sandbox: &Sandbox) -> String {
    let out = sandbox.run(&["open", "--no-browser"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let url = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(url.contains("/login?code="), "{url}");
    url
}

fn wait_log(sandbox: &Sandbox, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    sandbox.wait_log(SESSION, what, Duration::from_secs(20), done)
}

fn ask(hub: &StubHub) {
    let mut approval = real_frame("approval.requested.approve");
    approval["envelope"]["sessionId"] = json!(SESSION);
    approval["envelope"]["payload"]["sessionId"] = json!(SESSION);
    hub.send(&approval.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_answers_and_cancels_from_the_page() {
    let hub = StubHub::start(TOKEN).await;
    let sandbox = Sandbox::new()
        .with_env("AEP_CLINE_HUB_CONTROL", "1")
        .with_env("AEP_CLINE_HUB_URL", &hub.url)
        .with_env("AEP_CLINE_HUB_TOKEN", TOKEN);
    let daemon = sandbox.start();
    hub.subscribed().await;
    for hook in ["agent_start", "tool_call"] {
        assert!(sandbox.hook(&real_payload("hooks-cancel", hook)).status.success());
    }
    ask(&hub);
    wait_log(&sandbox, "the request", |e| has(e, "attention.requested"));

    let browser = Browser::start().await;
    browser.client.goto(&login_link(&sandbox)).await.unwrap();
    browser
        .until("the first paint", 10, "return document.body.dataset.ready")
        .await;
    assert_eq!(
        browser.client.current_url().await.unwrap().path(),
        "/",
        "the code is not left in the address bar"
    );
    let row = browser
        .until(
            "the session's row",
            10,
            &format!("return document.querySelector('tr[data-session=\"{SESSION}\"]')?.innerText"),
        )
        .await;
    assert!(row.as_str().unwrap().contains("waiting (1)"), "{row}");
    browser
        .until(
            "the approval first",
            10,
            "return !document.getElementById('approvals').hidden",
        )
        .await;
    let title = browser.client.title().await.unwrap();
    assert!(title.starts_with("(1)"), "the count is in the title: {title}");

    // Approve: the hub gets the answer; the page shows the ack, then the outcome.
    browser.click("#approval-list button.approve").await;
    let sent = hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["payload"]["approved"], true);
    hub.reply(&sent, None);
    let mut resolved = real_frame("approval.resolved.approved");
    resolved["envelope"]["sessionId"] = json!(SESSION);
    hub.send(&resolved.to_string());
    let said = browser
        .until(
            "the ack",
            15,
            "return [...document.querySelectorAll('#feedback p.ok')].map(p => p.innerText).join('\\n')",
        )
        .await;
    let said = said.as_str().unwrap();
    assert!(
        said.contains("control.accepted") && said.contains("attention.answered (approve via control)"),
        "{said}"
    );
    browser
        .until(
            "no approval left",
            10,
            "return document.getElementById('approvals').hidden && !document.title.startsWith('(')",
        )
        .await;

    // A second approval answered in words: other text denies, the text as the reason.
    let mut second = real_frame("approval.requested.deny");
    second["envelope"]["sessionId"] = json!(SESSION);
    second["envelope"]["payload"]["sessionId"] = json!(SESSION);
    hub.send(&second.to_string());
    browser
        .until(
            "the second approval",
            10,
            "return document.querySelector('#approval-list input[type=text]')",
        )
        .await;
    browser
        .client
        .find(fantoccini::Locator::Css("#approval-list input[type=text]"))
        .await
        .unwrap()
        .send_keys("not now, use staging")
        .await
        .unwrap();
    browser.click("#approval-list form button[type=submit]").await;
    let sent = hub.command("approval.respond").await;
    assert_eq!(sent["envelope"]["payload"]["approved"], false);
    assert_eq!(sent["envelope"]["payload"]["reason"], "not now, use staging");
    hub.reply(&sent, None);
    let mut denied = real_frame("approval.resolved.denied");
    denied["envelope"]["sessionId"] = json!(SESSION);
    hub.send(&denied.to_string());
    browser
        .until("the answer's ack", 15, "return [...document.querySelectorAll('#feedback p.ok')].map(p => p.innerText).find(t => t.startsWith('Answer'))")
        .await;

    // The session's timeline; input sent (steering), then Cancel ends the run.
    browser.click(&format!("tr[data-session=\"{SESSION}\"] a")).await;
    browser
        .until(
            "the approval in the timeline",
            10,
            "return document.querySelector('#timeline li[data-kind=approval][data-status=approved]')",
        )
        .await;
    browser
        .until(
            "the Cancel button",
            10,
            "return document.querySelector('#actions button.cancel')",
        )
        .await;
    browser
        .client
        .find(fantoccini::Locator::Css("#send-text"))
        .await
        .unwrap()
        .send_keys("also run the linter")
        .await
        .unwrap();
    browser.click("#send-steer").await;
    browser.click("#actions form button[type=submit]").await;
    let input = hub.command("session.send_input").await;
    assert_eq!(input["envelope"]["payload"]["delivery"], "steer");
    hub.reply(&input, None);
    browser
        .until("the input's outcome", 15, "return [...document.querySelectorAll('#feedback p.ok')].map(p => p.innerText).find(t => t.startsWith('Steer') && t.includes('x.cline.input.sent (steer)'))")
        .await;
    browser.click("#actions button.cancel").await;
    let abort = hub.command("run.abort").await;
    hub.reply(&abort, None);
    // The hook lane reports the abort (Cline 3.0.65 fires session_shutdown): one run.cancelled by
    // control, and the button says what the cancel did, not only that it was accepted.
    assert!(sandbox
        .hook(&real_payload("hooks-cancel", "session_shutdown"))
        .status
        .success());
    let said = browser
        .until("the cancel's ack and effect", 20, "return [...document.querySelectorAll('#feedback p.ok')].map(p => p.innerText).find(t => t.startsWith('Cancel'))")
        .await;
    let said = said.as_str().unwrap();
    assert!(
        said.contains("control.accepted") && said.contains("run.cancelled"),
        "{said}"
    );
    let log = wait_log(&sandbox, "the cancelled run", |e| has(e, "run.cancelled"));
    let cancelled: Vec<&Value> = log.iter().filter(|e| e["type"] == "run.cancelled").collect();
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0]["data"]["by"], "control");
    browser
        .until(
            "the run cancelled in the timeline",
            10,
            "return document.querySelector('#timeline li[data-kind=run][data-status=cancelled]')",
        )
        .await;
    // The hub's session goes on, idle (its frames named it: the hook closed the run, not the
    // session, as on the real hub): input may still be sent, nothing is left to cancel.
    browser
        .until("no Cancel once the run ended", 10, "return !document.querySelector('#actions button.cancel') && document.querySelector('#actions form button[type=submit]')")
        .await;
    // What the actions said belongs to this page: the list starts clean (#32).
    assert!(browser
        .until(
            "feedback on the session page",
            5,
            "return document.querySelectorAll('#feedback p').length"
        )
        .await
        .as_u64()
        .is_some_and(|n| n > 0));
    browser
        .until("the feedback gone on the list", 10, "location.hash = '#/'; return document.querySelectorAll('#feedback p').length === 0 && !document.querySelector('#list-view').hidden")
        .await;

    // A page from elsewhere, or a rebound host name, gets nothing, even with the cookie.
    let cookie = browser.client.get_named_cookie("aep_cline_dashboard").await.unwrap();
    let cookie = format!("aep_cline_dashboard={}", cookie.value());
    let host = daemon.addr();
    let act = json!({"action": "cancel", "session": SESSION}).to_string();
    for (method, path, headers) in [
        (
            "GET",
            "/api/sessions",
            vec![("cookie", cookie.as_str()), ("origin", "http://evil.example")],
        ),
        (
            "POST",
            "/api/act",
            vec![
                ("cookie", cookie.as_str()),
                ("origin", "http://evil.example"),
                ("content-type", "application/json"),
            ],
        ),
        (
            "POST",
            "/api/act",
            vec![
                ("cookie", cookie.as_str()),
                ("origin", "null"),
                ("content-type", "application/json"),
            ],
        ),
    ] {
        let (status, body) = http(&host, method, path, &headers, act.as_bytes());
        assert_eq!(status, 403, "{method} {path} {headers:?}: {body}");
        assert!(!body.contains(SESSION), "{body}");
    }
    let (status, body) = rebound(&host, "/api/sessions", &cookie);
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(SESSION));
    // The same request from the page's own origin works: the refusals above are the origin's.
    let origin = format!("http://{host}");
    let (status, body) = http(
        &host,
        "GET",
        "/api/sessions",
        &[("cookie", &cookie), ("origin", &origin)],
        b"",
    );
    assert_eq!(status, 200, "{body}");
    // Bad actions from the page's own origin: each refused with what was wrong, nothing sent.
    let long = json!({"action": "send", "session": SESSION, "text": "x".repeat(4001), "steer": false}).to_string();
    for (content_type, body, code, says) in [
        ("text/plain", act.clone(), 415, "application/json"),
        ("application/json", "{".to_string(), 400, "not an action"),
        (
            "application/json",
            json!({"action": "dance", "session": SESSION}).to_string(),
            400,
            "not an action",
        ),
        (
            "application/json",
            json!({"action": "approve", "session": SESSION}).to_string(),
            400,
            "not an action",
        ),
        (
            "application/json",
            json!({"action": "send", "session": SESSION, "text": "  ", "steer": false}).to_string(),
            400,
            "empty",
        ),
        ("application/json", long, 400, "4001 characters"),
        (
            "application/json",
            json!({"action": "cancel", "session": "elsewhere"}).to_string(),
            404,
            "no-route",
        ),
    ] {
        let (status, answer) = http(
            &host,
            "POST",
            "/api/act",
            &[("cookie", &cookie), ("origin", &origin), ("content-type", content_type)],
            body.as_bytes(),
        );
        assert_eq!(status, code, "{body:.80}: {answer}");
        assert!(answer.contains(says), "{answer}");
        assert!(!answer.contains("xxxxxxxx"), "no payload echoed");
    }
    // Not signed in: the sign-in page, no data; a spent or made-up code does not sign in.
    let (status, body) = http(&host, "GET", "/", &[], b"");
    assert_eq!(status, 401);
    assert!(body.contains("aep-cline open") && !body.contains(SESSION));
    let (status, _) = http(&host, "GET", "/api/sessions", &[], b"");
    assert_eq!(status, 401);
    let link = login_link(&sandbox);
    let path = &link[link.find("/login").unwrap()..];
    let (first, _) = http(&host, "GET", path, &[], b"");
    let (again, _) = http(&host, "GET", path, &[], b"");
    let (made_up, _) = http(&host, "GET", "/login?code=0000", &[], b"");
    assert_eq!((first, again, made_up), (303, 403, 403));
    // The token never appears in the link.
    assert!(!link.contains(&daemon.token));
    browser.close().await;
    drop(daemon);
}

/// A request whose Host names another site (DNS rebinding).
fn rebound(addr: &str, path: &str, cookie: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: evil.example:80\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    let _ = s.read_to_string(&mut r);
    let status = r.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_control_the_page_observes_and_offers_no_buttons_and_outlives_a_restart() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sandbox = Sandbox::new().with_env("AEP_LISTEN", &format!("127.0.0.1:{port}"));
    let daemon: Daemon = sandbox.start();
    for hook in ["agent_start", "tool_call"] {
        assert!(sandbox.hook(&real_payload("hooks-cancel", hook)).status.success());
    }
    let browser = Browser::start().await;
    browser.client.goto(&login_link(&sandbox)).await.unwrap();
    browser
        .until("the first paint", 10, "return document.body.dataset.ready")
        .await;
    let control = browser
        .until(
            "the control badge",
            10,
            "return document.getElementById('control').innerText",
        )
        .await;
    assert_eq!(control, "control off (hub approvals answered in Cline)");
    browser.click(&format!("tr[data-session=\"{SESSION}\"] a")).await;
    browser
        .until(
            "the timeline",
            10,
            "return document.querySelector('#timeline li[data-kind=tool]')",
        )
        .await;
    let actions = browser
        .until(
            "the actions box",
            10,
            "return document.getElementById('actions').innerText",
        )
        .await;
    assert!(actions.as_str().unwrap().contains("Observe only"), "{actions}");
    let buttons = browser
        .js(
            "return document.querySelectorAll('#actions button:not(.end), #approvals button').length",
            vec![],
        )
        .await;
    assert_eq!(buttons, 0);
    // Ending a stuck session touches only the daemon's record: offered with control off too.
    let end = browser
        .js("return document.querySelectorAll('#actions button.end').length", vec![])
        .await;
    assert_eq!(end, 1);

    // The daemon restarts on the same port (its token survives): the open page notices, then
    // follows the new daemon by itself, and a hook taken since (the session's end) shows on it.
    let (status, _) = daemon.stop();
    assert!(status.success());
    browser
        .until(
            "the page noticing",
            20,
            "return document.getElementById('conn').innerText !== 'live'",
        )
        .await;
    let daemon = sandbox.start();
    browser
        .until(
            "live again",
            20,
            "return document.getElementById('conn').innerText === 'live'",
        )
        .await;
    assert!(sandbox
        .hook(&real_payload("hooks-cancel", "session_shutdown"))
        .status
        .success());
    browser
        .until(
            "the session's end, live",
            20,
            "return document.querySelector('#timeline li[data-kind=session][data-status=ended]')",
        )
        .await;

    // A token that changes (the token file deleted) signs the page out; a new link signs it in,
    // and the session is there, read back from its log.
    drop(daemon);
    std::fs::remove_file(sandbox.state_dir.join("token")).unwrap();
    let _daemon = sandbox.start();
    let said = browser
        .until("the page signed out", 20, "return document.getElementById('conn').innerText.includes('signed out') && document.getElementById('conn').innerText")
        .await;
    assert!(said.as_str().unwrap().contains("aep-cline open"), "{said}");
    browser.client.goto(&login_link(&sandbox)).await.unwrap();
    browser
        .until(
            "the session, from the log",
            20,
            &format!("return document.querySelector('tr[data-session=\"{SESSION}\"]')"),
        )
        .await;
    browser
        .until(
            "live again",
            10,
            "return document.getElementById('conn').innerText === 'live'",
        )
        .await;
    browser.close().await;
}
