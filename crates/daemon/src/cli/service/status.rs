//! `aep-cline service status`: whether the service is installed (our unit or agent, or the
//! packaged unit with its env file), and whether a daemon answers `/healthz`; the exit code is
//! the latter, so a script can wait on it.

use super::{env_path, packaged_unit, plist_path, unit_path};
use crate::cli::client::Daemon;
use crate::cli::out;
use std::process::ExitCode;

/// Prints both lines; fails when no daemon answers.
pub(super) fn status(macos: bool) -> anyhow::Result<ExitCode> {
    let mut text = installed(macos)?;
    let running = answers(&mut text);
    out::print(&text)?;
    Ok(if running { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The install line: the packaged unit counts as installed once `install` wrote its env file.
fn installed(macos: bool) -> anyhow::Result<String> {
    let path = if macos { plist_path()? } else { unit_path()? };
    let packaged = (!macos && !path.is_file()).then(packaged_unit).flatten();
    Ok(if let Some(packaged) = packaged {
        if env_path()?.is_file() {
            format!("installed: {} (packaged)\n", packaged.display())
        } else {
            format!(
                "not installed: the packaged unit {} is there; `aep-cline service install` enables it\n",
                packaged.display()
            )
        }
    } else if path.is_file() {
        format!("installed: {}\n", path.display())
    } else {
        format!(
            "not installed ({} does not exist): `aep-cline service install`\n",
            path.display()
        )
    })
}

/// The running line, pushed onto `text`: which daemon answers, or why none does.
fn answers(text: &mut String) -> bool {
    match Daemon::find().and_then(|d| {
        d.request("GET", "/healthz", None, std::time::Duration::from_secs(3))
            .map(|a| (d, a))
    }) {
        Ok((d, a)) if a.status == 200 => {
            text.push_str(&format!("running: pid {}, {}\n", d.discovery.pid, d.discovery.url));
            true
        }
        Ok(_) => {
            text.push_str("not running: the daemon does not answer /healthz\n");
            false
        }
        Err(e) => {
            text.push_str(&format!("not running: {e:#}\n"));
            false
        }
    }
}
