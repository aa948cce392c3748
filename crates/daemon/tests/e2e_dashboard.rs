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
