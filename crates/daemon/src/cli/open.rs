//! `aep-cline open`: a one-time sign-in link to the dashboard, printed and opened in a browser
//! when there is one. The link holds a code, not the daemon's token; the code works once, for
//! two minutes, and sets an HttpOnly, SameSite=Strict cookie.

use super::client::Daemon;
use super::out;
use anyhow::bail;
use std::time::Duration;

/// Open the dashboard: a one-time sign-in link, printed (and opened in a browser).
///
/// The daemon must be running (`aep-cline daemon` or `aep-cline service install`). The link
/// works once, within two minutes; it sets a cookie that keeps this browser signed in while
/// the daemon keeps its token.
#[derive(clap::Args, Debug)]
pub struct OpenArgs {
    /// Only print the link; do not start a browser.
    #[arg(long)]
    no_browser: bool,
}

pub fn run(args: OpenArgs) -> anyhow::Result<()> {
    let daemon = Daemon::find()?;
    let answer = daemon.request("POST", "/api/login-code", None, Duration::from_secs(5))?;
    match answer.status {
        200 => {}
        404 => bail!("the daemon's dashboard is off (AEP_DASHBOARD=0): restart it without that setting"),
        401 => bail!("the daemon refused the token in its discovery file: restart the daemon"),
        s => bail!("the daemon did not give a sign-in link (HTTP {s}): {}", answer.detail()),
    }
    let url = answer.json()["url"].as_str().unwrap_or_default().to_string();
    if url.is_empty() {
        bail!("the daemon's answer has no link");
    }
    out::print(&format!("{url}\n"))?;
    let opened = !args.no_browser && browser(&url);
    eprintln!(
        "{} (the link works once, within two minutes)",
        if opened {
            "opened in your browser"
        } else {
            "open this link in a browser on this machine"
        }
    );
    Ok(())
}

/// Starts the desktop's browser on `url`, detached; false when there is none.
fn browser(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some() {
        "xdg-open"
    } else {
        return false;
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}
