//! `aep-cline service uninstall`: the daemon stopped, whoever started it, and the service's
//! files removed; never the packaged unit, which is the package manager's.

use super::{
    ctl, env_path, packaged_unit, plist_path, remove, run_ctl, stop_daemon, systemd_answers, unit_path, users_uid,
    LABEL, UNIT,
};
use crate::cli::out;

/// Stops the daemon, then removes what `install` wrote for this platform's service manager.
pub(super) fn uninstall(macos: bool) -> anyhow::Result<()> {
    // Stopped whoever started it (the service manager, or `service start` detached).
    out::print(&format!("{}\n", stop_daemon(macos)?))?;
    if macos {
        launchd()
    } else {
        systemd()
    }
}

/// The agent booted out and its plist removed.
fn launchd() -> anyhow::Result<()> {
    let path = plist_path()?;
    let _ = run_ctl(&ctl("launchctl"), &["bootout", &format!("gui/{}/{LABEL}", users_uid())]);
    remove(&path)
}

/// The unit disabled (where a systemd user session answers), our unit and the env file removed.
fn systemd() -> anyhow::Result<()> {
    let ctl = ctl("systemctl");
    let managed = systemd_answers(&ctl);
    if managed {
        let _ = run_ctl(&ctl, &["--user", "disable", "--now", UNIT]);
    }
    // The packaged unit is the package manager's to remove (`apt remove aep-cline`).
    let unit_file = unit_path()?;
    if packaged_unit().is_none() || unit_file.exists() {
        remove(&unit_file)?;
    }
    remove(&env_path()?)?;
    if managed {
        let _ = run_ctl(&ctl, &["--user", "daemon-reload"]);
    }
    Ok(())
}
