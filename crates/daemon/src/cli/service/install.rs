//! `aep-cline service install`: the service's files written and the daemon started through
//! the service manager. Linux writes the env file and the unit (or uses the packaged one),
//! restarts a daemon that runs with other settings, and starts it detached, saying so, where no
//! systemd user session answers; macOS writes the launchd agent and bootstraps it. Each step
//! is a function of its own, so each says on one screen what it does and what it prints.

use super::{
    ctl, env_file, env_path, ours, packaged_unit, plist, plist_path, remove, run_ctl, running, settings,
    start_detached, stop_daemon, systemd_answers, unit, unit_path, users_uid, write_private, LABEL, UNIT,
};
use crate::cli::out;
use anyhow::{bail, Context};
use std::path::Path;

/// Writes the service for this binary with this shell's settings; starts it unless `no_start`.
pub(super) fn install(macos: bool, no_start: bool) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot tell where the aep-cline binary is")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let vars = settings();
    if macos {
        launchd(&exe, &vars, no_start)
    } else {
        systemd(&exe, &vars, no_start)
    }
}

/// The launchd agent written, then booted out and bootstrapped again so launchd reads it anew.
fn launchd(exe: &Path, vars: &[(String, String)], no_start: bool) -> anyhow::Result<()> {
    let path = plist_path()?;
    let log = crate::state::state_dir()?.join("daemon.log");
    write_private(&path, &plist(exe, vars, &log))?;
    out::print(&format!("wrote {}\n", path.display()))?;
    if no_start {
        return Ok(());
    }
    let ctl = ctl("launchctl");
    let uid = users_uid();
    let _ = std::process::Command::new(&ctl)
        .args(["bootout", &format!("gui/{uid}/{LABEL}")])
        .status();
    if !run_ctl(&ctl, &["bootstrap", &format!("gui/{uid}"), &path.display().to_string()]) {
        bail!(
            "the agent is written but not started: run `launchctl bootstrap gui/{uid} {}`",
            path.display()
        );
    }
    Ok(())
}

/// The env file and the unit written, then the daemon (re)started with them.
fn systemd(exe: &Path, vars: &[(String, String)], no_start: bool) -> anyhow::Result<()> {
    let (unit_file, env) = (unit_path()?, env_path()?);
    write_private(&env, &env_file(vars))?;
    place_unit(exe, &unit_file, &env)?;
    let kept = if vars.is_empty() {
        "no AEP_* settings: the defaults".to_string()
    } else {
        vars.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ")
    };
    out::print(&format!("wrote {} ({kept})\n", env.display()))?;
    if no_start {
        return Ok(());
    }
    restart_if_other_settings(vars)?;
    enable()
}

/// Our unit written, unless the package's is installed: then a unit of ours that would shadow
/// it goes, and a person's own is left, and said.
fn place_unit(exe: &Path, unit_file: &Path, env: &Path) -> anyhow::Result<()> {
    match packaged_unit() {
        Some(packaged) => {
            if ours(unit_file) {
                remove(unit_file)?;
            } else if unit_file.exists() {
                eprintln!(
                    "aep-cline: {} is not ours and shadows the packaged unit; left as it is",
                    unit_file.display()
                );
            }
            out::print(&format!("using the packaged unit {}\n", packaged.display()))
        }
        None => {
            write_private(unit_file, &unit(exe, env))?;
            out::print(&format!("wrote {}\n", unit_file.display()))
        }
    }
}

/// A daemon reads its settings once: one running with others is stopped, to be started again
/// with these; one whose settings cannot be read is left, and `service restart` named.
fn restart_if_other_settings(vars: &[(String, String)]) -> anyhow::Result<()> {
    let Some(d) = running() else {
        return Ok(());
    };
    let was = crate::cli::running::settings_of(d.discovery.pid);
    match was.map(|was| crate::cli::running::changed(&was, vars)) {
        Some(changed) if changed.is_empty() => Ok(()),
        Some(changed) => {
            out::print(&format!(
                "the running daemon (pid {}) has other settings ({}): restarting it\n",
                d.discovery.pid,
                changed.join(", ")
            ))?;
            out::print(&format!("{}\n", stop_daemon(false)?))
        }
        None => out::print(&format!(
            "a daemon runs (pid {}) whose settings cannot be read: `aep-cline service restart` applies these\n",
            d.discovery.pid
        )),
    }
}

/// The unit enabled and started by the systemd user session; where none answers (a container,
/// ssh without linger), the daemon still runs now, detached, and what would keep it running
/// is said.
fn enable() -> anyhow::Result<()> {
    let ctl = ctl("systemctl");
    let managed = systemd_answers(&ctl)
        && run_ctl(&ctl, &["--user", "daemon-reload"])
        && run_ctl(&ctl, &["--user", "enable", "--now", UNIT]);
    if managed {
        return out::print(&format!("started: systemctl --user status {UNIT}\n"));
    }
    let started = start_detached().context(format!(
        "the unit is written but no service manager started it, and neither could a detached \
         daemon: run `aep-cline daemon` yourself, or get a systemd user session (`loginctl \
         enable-linger`) and run `systemctl --user enable --now {UNIT}`"
    ))?;
    out::print(&format!(
        "no systemd user session answered: the unit is written for when there is one \
         (`loginctl enable-linger`, then `systemctl --user enable --now {UNIT}`)\n{started}\n\
         it does not start again at login or after a failure: put `aep-cline service start` in \
         your shell profile, or run `aep-cline daemon` under your own supervisor\n"
    ))
}
