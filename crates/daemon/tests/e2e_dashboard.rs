//! The dashboard and the terminal commands on the REAL Cline hub (CLI 3.0.65), offline (the fake
//! model, as in e2e_hub.rs), in a real browser: the page lists the real session, shows its
//! pending approval first, a click on Approve lets the real tool run, `aep-cline approve` answers
//! the next one from the terminal, and a click on Cancel ends the running run with
//! `run.cancelled {by: control}` caused by the page's command. The screenshots of the session
//! list and the timeline in the README come from this test (AEP_CLINE_UPDATE_SCREENSHOTS=1).

use crate::support;

use serde_json::Value;
use std::time::Duration;
use support::browser::Browser;
use support::cline::ClineSandbox;
use support::daemon::{of, types, Sandbox, BIN};
use support::fake_model::{FakeModel, Script};
use support::hub_client::HubClient;
use support::real_hub::{tapped_sandbox, RealHub};
use support::wait::wait_until_seen_every_async;

fn setup() -> (FakeModel, ClineSandbox, Sandbox) {
    let model = FakeModel::start(Script::default());
    let cline = ClineSandbox::new(&model);
    let aep = tapped_sandbox(&cline, "AEP_CLINE_HUB_CONTROL");
    (model, cline, aep)
}

fn wait_log(aep: &Sandbox, session: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    aep.wait_log(session, what, Duration::from_secs(60), done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_and_the_terminal_steer_a_real_cline() {
    let (_model, cline, aep) = setup();
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;

    client.start_run(&session, "please CMD:echo approved-from-the-page");
    wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });

    let browser = Browser::start().await;
    let link = aep.run(&["open", "--no-browser"], &[]);
    assert!(link.status.success(), "{}", String::from_utf8_lossy(&link.stderr));
    browser
        .client
        .goto(String::from_utf8_lossy(&link.stdout).trim())
        .await
        .unwrap();
    browser
        .until("the first paint", 10, "return document.body.dataset.ready")
        .await;
    let row = format!("tr[data-session=\"{session}\"]");
    browser
        .until(
            "the real session, waiting",
            20,
            &format!("return document.querySelector('{row}')?.innerText.includes('waiting')"),
        )
        .await;
    browser
        .until(
            "the approval first",
            10,
            "return document.querySelector('#approval-list button.approve')",
        )
        .await;
    assert!(browser.client.title().await.unwrap().starts_with("(1)"));
    browser.screenshot("dashboard-sessions.png").await;
    // Dark and light: the theme button switches, and the choice shows.
    let background = "return getComputedStyle(document.body).backgroundColor";
    let light = browser.js(background, vec![]).await;
    browser.click("#theme").await;
    let dark = browser.js(background, vec![]).await;
    assert_eq!(
        (light.as_str(), dark.as_str()),
        (Some("rgb(255, 255, 255)"), Some("rgb(13, 17, 23)"))
    );
    browser.screenshot("dashboard-sessions-dark.png").await;
    browser.click("#theme").await;

    // A click on Approve: the real tool runs.
    browser.click("#approval-list button.approve").await;
    let log = wait_log(&aep, &session, "the approved run's end", |l| {
        !of(l, "run.finished").is_empty()
    });
    assert_eq!(
        of(&log, "tool.completed").len(),
        1,
        "the approved tool ran: {:?}",
        types(&log)
    );
    let answered = of(&log, "attention.answered");
    assert_eq!(answered[0]["data"]["via"], "control");
    let said = browser
        .until(
            "the ack on the page",
            15,
            "return [...document.querySelectorAll('#feedback p.ok')].map(p => p.innerText).join('\\n')",
        )
        .await;
    assert!(said.as_str().unwrap().contains("control.accepted"), "{said}");

    // The next approval, answered from the terminal; then Cancel on the page while it runs.
    client.start_run(&session, "finally CMD:sleep 20; echo never");
    let log = wait_log(&aep, &session, "the second approval", |l| {
        of(l, "attention.requested").len() == 2
    });
    let short = of(&log, "attention.requested")[1]["id"].as_str().unwrap()[20..].to_lowercase();
    let approve = {
        let (home, logs, state) = (
            aep.root.path().to_path_buf(),
            aep.log_dir.clone(),
            aep.state_dir.clone(),
        );
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(BIN)
                .args(["approve", &short])
                .env("HOME", home)
                .env("AEP_LOG_DIR", logs)
                .env("AEP_CLINE_STATE_DIR", state)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    let printed = String::from_utf8_lossy(&approve.stdout);
    assert!(
        approve.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&approve.stderr)
    );
    assert!(printed.starts_with("accepted: approve"), "{printed}");
    client.event(&session, "tool.started", 0).await;
    browser.click(&format!("{row} a")).await;
    browser
        .until(
            "the Cancel button",
            20,
            "return document.querySelector('#actions button.cancel')",
        )
        .await;
    browser.click("#actions button.cancel").await;
    let log = wait_log(&aep, &session, "the cancelled run", |l| {
        !of(l, "run.cancelled").is_empty()
    });
    let cancelled = of(&log, "run.cancelled");
    assert_eq!(cancelled[0]["data"]["by"], "control");
    let command = cancelled[0]["cause"].as_str().unwrap().to_string();
    let ack = log
        .iter()
        .find(|e| e["type"] == "control.accepted" && e["cause"] == command.as_str())
        .unwrap_or_else(|| panic!("the cancel's ack: {:?}", types(&log)));
    let source = log
        .iter()
        .find(|e| e["id"] == ack["cause"])
        .map(|e| e["source"].clone());
    assert!(source.is_none(), "the command itself is not in the session's log");
    browser
        .until(
            "the run cancelled in the timeline",
            20,
            "return document.querySelector('#timeline li[data-kind=run][data-status=cancelled]')",
        )
        .await;
    browser.screenshot("dashboard-timeline.png").await;
    browser.close().await;
    drop(daemon);
    drop(hub);
}

/// A command's output, asserting it succeeded.
fn shown(aep: &Sandbox, args: &[&str]) -> String {
    let out = aep.run(args, &[]);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `dir`, read as text (lossy), with its path.
fn files_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out
}

/// The owner's local view on the REAL hub: what the pending approval asks (the command), the
/// session's title (its first prompt) and its workspace folder show in the page (as text:
/// markup in a command stays inert), in `approvals` and in `show`; with
/// AEP_CLINE_LOCAL_DETAIL=0 none of it is served; and the log, at capture `metadata`, holds
/// none of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_sees_what_an_approval_asks_and_the_log_does_not() {
    let (_model, cline, mut aep) = setup();
    aep.env.push(("AEP_CLINE_LOCAL_DETAIL".into(), "0".into()));
    let hub = RealHub::ensure(&cline);
    let daemon = aep.start();
    let client = HubClient::connect(&hub.discovery()).await;
    let session = client.create_session(&cline.workspace()).await;
    let command = "echo '<b>local-view-7c1</b>'";
    client.start_run(&session, &format!("show me CMD:{command}"));
    wait_log(&aep, &session, "the approval", |l| {
        !of(l, "attention.requested").is_empty()
    });
    let folder = cline.workspace().to_str().unwrap().to_string();

    // Off: the commands and the API say what the log says, nothing more.
    let listed = shown(&aep, &["approvals"]);
    assert!(
        listed.contains("run_commands") && !listed.contains("local-view-7c1"),
        "{listed}"
    );
    let show = shown(&aep, &["show", &session]);
    assert!(!show.contains("local-view-7c1") && !show.contains(&folder), "{show}");
    let api = support::daemon::http(
        &daemon.addr(),
        "GET",
        "/api/approvals",
        &[("authorization", &format!("Bearer {}", daemon.token))],
        b"",
    );
    assert_eq!(api.0, 200);
    assert!(
        !api.1.contains("local-view-7c1") && !api.1.contains("\"detail\""),
        "{}",
        api.1
    );
    let (status, _) = daemon.stop();
    assert!(status.success());

    // On (the default): the tap subscribes again, the hub re-sends the approval still pending,
    // and the daemon holds what it asks.
    aep.env.retain(|(k, _)| k != "AEP_CLINE_LOCAL_DETAIL");
    let daemon = aep.start();
    let expected = format!(" asks (run_commands):\n  $ {command}\n");
    // Each look runs `aep-cline approvals`: every 200 ms.
    wait_until_seen_every_async(
        "the pending approval listed",
        Duration::from_secs(60),
        Duration::from_millis(200),
        async || {
            let listed = shown(&aep, &["approvals"]);
            if listed.contains(&expected) {
                return Ok(());
            }
            let (log, err) = (aep.log(&session), daemon.stderr());
            Err(format!(
                "`approvals` lists:\n{listed}\nthe log: {:?}\nthe daemon said:\n{err}",
                types(&log)
            ))
        },
    )
    .await;
    let show = shown(&aep, &["show", &session]);
    assert!(show.contains(&format!("folder    {folder}\n")), "{show}");
    assert!(show.contains("title     show me CMD:"), "{show}");
    assert!(show.contains(&format!("$ {command}")), "{show}");
    // The terminal's list names them too: the folder's name for the digest, and a TITLE.
    let table = shown(&aep, &["sessions"]);
    let header = table.lines().next().unwrap();
    assert!(header.ends_with("TITLE"), "{table}");
    let line = table.lines().find(|l| l.starts_with(&session)).unwrap();
    let name = std::path::Path::new(&folder)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(line.contains(&name) && line.contains("show me CMD:"), "{table}");

    let browser = Browser::start().await;
    let link = aep.run(&["open", "--no-browser"], &[]);
    assert!(link.status.success(), "{}", String::from_utf8_lossy(&link.stderr));
    browser
        .client
        .goto(String::from_utf8_lossy(&link.stdout).trim())
        .await
        .unwrap();
    let asked = browser
        .until(
            "the command above the buttons",
            20,
            "const li = document.querySelector('#approval-list li'); \
             const pre = li && li.querySelector('.asked pre.command'); \
             const buttons = li && li.querySelector('button.approve'); \
             return pre && buttons && (pre.compareDocumentPosition(buttons) & Node.DOCUMENT_POSITION_FOLLOWING) \
                 && !li.querySelector('.asked b') && pre.textContent",
        )
        .await;
    assert_eq!(asked.as_str(), Some(command), "the command, as text");
    let row = format!("tr[data-session=\"{session}\"]");
    let listed = browser
        .until(
            "the title and folder in the list",
            20,
            &format!("const r = document.querySelector('{row}'); return r && r.querySelector('.title') && r.innerText"),
        )
        .await;
    let listed = listed.as_str().unwrap();
    assert!(listed.contains("show me CMD:") && listed.contains(&folder), "{listed}");
    browser.screenshot("dashboard-approval-detail.png").await;
    browser.click(&format!("{row} a")).await;
    let facts = browser
        .until(
            "the title and folder on the session page",
            20,
            "const f = document.querySelector('#facts'); return f && f.innerText.includes('Folder') && f.innerText",
        )
        .await;
    assert!(facts.as_str().unwrap().contains(&folder), "{facts}");
    browser.click("#approval-list button.approve").await;
    let log = wait_log(&aep, &session, "the approved run's end", |l| {
        !of(l, "run.finished").is_empty()
    });
    assert_eq!(of(&log, "tool.completed").len(), 1, "{:?}", types(&log));
    browser
        .until(
            "the detail gone with the approval",
            20,
            "return !document.querySelector('#approval-list .asked')",
        )
        .await;
    browser.close().await;
    drop(daemon);

    // The log at `metadata` holds none of it: not the command, not the title, not the folder.
    let files = files_under(&aep.log_dir);
    assert!(!files.is_empty());
    for (path, text) in &files {
        for secret in ["local-view-7c1", "show me", folder.as_str()] {
            assert!(!text.contains(secret), "{} holds {secret:?}", path.display());
        }
    }
    drop(hub);
}
