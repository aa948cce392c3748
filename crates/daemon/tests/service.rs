//! `aep-cline service install | uninstall | status` on the real binary, with a recording stand-in
//! for `systemctl` (this machine has no systemd user session): the unit runs this binary's
//! `daemon` and restarts it on failure, systemd itself finds nothing to fault in it, the
//! settings (tokens included) go to an owner-only file and never into the unit, the service
//! manager is told to reload and start it, and a failure to start says what to run.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use support::daemon::Sandbox;

fn fake_ctl(dir: &Path, exit: i32) -> std::path::PathBuf {
    let path = dir.join(format!("ctl-{exit}"));
    let calls = dir.join("calls");
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit {exit}\n", calls.display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn install_writes_a_unit_that_keeps_the_daemon_running() {
    let sandbox = Sandbox::new();
    let config = sandbox.root.path().join("config");
    let ok = fake_ctl(sandbox.root.path(), 0);
    let run = |args: &[&str], ctl: &Path| {
        sandbox.run(
            args,
            &[
                ("XDG_CONFIG_HOME", config.to_str().unwrap()),
                ("AEP_CLINE_SERVICE_CTL", ctl.to_str().unwrap()),
                ("AEP_CAPTURE", "metadata,attention=redacted"),
                ("AEP_TOKEN", "endpoint-secret-123"),
                // The detached daemon below: any free port, never a real daemon's.
                ("AEP_LISTEN", "127.0.0.1:0"),
                // As on a machine without the Debian package, whatever this one has.
                ("AEP_CLINE_TEST_PACKAGED_UNIT", "/nonexistent/aep-cline.service"),
            ],
        )
    };
    let out = run(&["service", "install"], &ok);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let unit_path = config.join("systemd/user/aep-cline.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let exe = Path::new(support::daemon::BIN).canonicalize().unwrap();
    assert!(
        unit.contains(&format!("ExecStart={} daemon\n", exe.display())),
        "{unit}"
    );
    assert!(unit.contains("Restart=on-failure"));
    assert!(!unit.contains("endpoint-secret-123"), "no token in the unit");
    let env_path = config.join("aep-cline/daemon.env");
    let env = std::fs::read_to_string(&env_path).unwrap();
    assert!(env.contains("AEP_CAPTURE=\"metadata,attention=redacted\"\n"), "{env}");
    assert!(env.contains("AEP_TOKEN=\"endpoint-secret-123\"\n"));
    assert!(
        env.contains("AEP_LOG_DIR=") && env.contains("AEP_CLINE_STATE_DIR="),
        "{env}"
    );
    assert!(!env.contains("AEP_CLINE_SERVICE_CTL"), "{env}");
    let mode = std::fs::metadata(&env_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let calls = std::fs::read_to_string(sandbox.root.path().join("calls")).unwrap();
    assert_eq!(
        calls,
        "--user show-environment\n--user daemon-reload\n--user enable --now aep-cline.service\n"
    );
    // systemd's own reading of the unit finds nothing to fault.
    let verify = std::process::Command::new("systemd-analyze")
        .args(["verify", unit_path.to_str().unwrap()])
        .output();
    match verify {
        Ok(v) => assert!(
            v.status.success() && v.stderr.is_empty(),
            "systemd-analyze: {}",
            String::from_utf8_lossy(&v.stderr)
        ),
        Err(e) => eprintln!("systemd-analyze is not installed ({e}): the unit's syntax was not checked by systemd"),
    }

    // status: installed, the daemon not running (exit 1); then running (exit 0).
    let out = run(&["service", "status"], &ok);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("installed: ") && text.contains("not running: no aep-cline daemon is running"),
        "{text}"
    );
    let daemon = sandbox.start();
    let out = run(&["service", "status"], &ok);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(&format!("running: pid {}", daemon.child.id())), "{text}");
    drop(daemon);

    // A service manager that fails (no systemd user session: "Failed to connect to bus"): the
    // files are there, the daemon runs detached all the same, and what would keep it running is
    // said.
    let failing = fake_ctl(sandbox.root.path(), 1);
    let out = run(&["service", "install"], &failing);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("systemctl --user enable --now aep-cline.service"),
        "{text}"
    );
    assert!(text.contains("started detached: pid "), "{text}");
    assert!(text.contains("aep-cline service start"), "{text}");
    assert!(!text.contains("endpoint-secret-123"));
    let detached = sandbox
        .discovery()
        .expect("the detached daemon wrote its discovery file");
    let pid = detached["pid"].as_u64().unwrap() as i32;
    let out = run(&["service", "status"], &ok);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let out = run(&["service", "start"], &ok);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with(&format!("already running: pid {pid}")), "{text}");
    // SIGTERM: the detached daemon stops like any other.
    assert!(std::process::Command::new("kill")
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success());
    let stopped = std::time::Instant::now();
    while sandbox.discovery().is_some() {
        assert!(
            stopped.elapsed() < std::time::Duration::from_secs(30),
            "the daemon did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // uninstall: stopped and gone.
    std::fs::remove_file(sandbox.root.path().join("calls")).unwrap();
    let out = run(&["service", "uninstall"], &ok);
    assert!(out.status.success());
    assert!(!unit_path.exists() && !env_path.exists());
    let calls = std::fs::read_to_string(sandbox.root.path().join("calls")).unwrap();
    assert_eq!(
        calls,
        "--user show-environment\n--user stop aep-cline.service\n--user show-environment\n\
         --user disable --now aep-cline.service\n--user daemon-reload\n"
    );
    let out = run(&["service", "status"], &ok);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("not installed"));
}

/// With the Debian package's unit there, `install` uses it: it writes only the env file, removes
/// a unit of ours that would shadow the package's, and enables the package's; `uninstall`
/// leaves the package's unit to the package manager.
#[test]
fn install_uses_the_packaged_unit_when_the_package_is_installed() {
    let sandbox = Sandbox::new();
    let config = sandbox.root.path().join("config");
    let packaged = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/aep-cline.service");
    let ok = fake_ctl(sandbox.root.path(), 0);
    let run = |args: &[&str]| {
        sandbox.run(
            args,
            &[
                ("XDG_CONFIG_HOME", config.to_str().unwrap()),
                ("AEP_CLINE_SERVICE_CTL", ok.to_str().unwrap()),
                ("AEP_CLINE_TEST_PACKAGED_UNIT", packaged.to_str().unwrap()),
                ("AEP_CAPTURE", "metadata"),
            ],
        )
    };
    // A unit an earlier `install` wrote, before the package came.
    let user_unit = config.join("systemd/user/aep-cline.service");
    std::fs::create_dir_all(user_unit.parent().unwrap()).unwrap();
    std::fs::write(
        &user_unit,
        "[Unit]\nDescription=aep-cline: Cline's activity as AEP events (the daemon)\n",
    )
    .unwrap();
    let out = run(&["service", "install"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains(&format!("using the packaged unit {}", packaged.display())),
        "{text}"
    );
    assert!(!user_unit.exists(), "ours would shadow the package's: {text}");
    let env = std::fs::read_to_string(config.join("aep-cline/daemon.env")).unwrap();
    assert!(env.contains("AEP_CAPTURE=\"metadata\"\n"), "{env}");
    let calls = std::fs::read_to_string(sandbox.root.path().join("calls")).unwrap();
    assert_eq!(
        calls,
        "--user show-environment\n--user daemon-reload\n--user enable --now aep-cline.service\n"
    );
    // The package's unit reads the env file where `install` wrote it: %E is XDG_CONFIG_HOME.
    let unit = std::fs::read_to_string(&packaged).unwrap();
    assert!(unit.contains("EnvironmentFile=-%E/aep-cline/daemon.env\n"), "{unit}");
    assert!(unit.contains("ExecStart=/usr/bin/aep-cline daemon\n"), "{unit}");

    let out = run(&["service", "status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with(&format!("installed: {} (packaged)", packaged.display())),
        "{text}"
    );

    let out = run(&["service", "uninstall"]);
    assert!(out.status.success());
    assert!(packaged.is_file(), "the package's unit is the package manager's");
    assert!(!config.join("aep-cline/daemon.env").exists());
    let out = run(&["service", "status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with("not installed: the packaged unit"), "{text}");
}

/// A service that follows its settings, without a service manager (#32): `install` again with
/// another setting restarts the running daemon and says what changed (names, never values);
/// `doctor` says when the env file and the running daemon differ; `stop`, `restart` and
/// `uninstall` stop the daemon that `install` started detached; no raw `systemctl` failure is
/// printed beside the friendly line.
#[test]
fn install_again_restarts_a_daemon_with_other_settings_and_stop_restart_uninstall_stop_it() {
    let sandbox = Sandbox::new();
    let config = sandbox.root.path().join("config");
    let failing = fake_ctl(sandbox.root.path(), 1);
    let run = |args: &[&str], capture: &str| {
        sandbox.run(
            args,
            &[
                ("XDG_CONFIG_HOME", config.to_str().unwrap()),
                ("AEP_CLINE_SERVICE_CTL", failing.to_str().unwrap()),
                ("AEP_CAPTURE", capture),
                ("AEP_TOKEN", "secret-value-42"),
                ("AEP_LISTEN", "127.0.0.1:0"),
                ("AEP_CLINE_TEST_PACKAGED_UNIT", "/nonexistent/aep-cline.service"),
            ],
        )
    };
    let text = |out: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let pid = || sandbox.discovery().and_then(|d| d["pid"].as_u64());
    let environ = |pid: u64| std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let out = run(&["service", "install"], "metadata");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !text(&out).contains("failed:"),
        "one friendly line, no raw failure: {}",
        text(&out)
    );
    let first = pid().expect("the detached daemon runs");

    // The same settings: nothing to restart.
    let out = run(&["service", "install"], "metadata");
    assert!(!text(&out).contains("restarting"), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("already running: pid {first}")),
        "{}",
        text(&out)
    );

    // Another capture: restarted, the change named, no value shown.
    let out = run(&["service", "install"], "redacted");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("has other settings (AEP_CAPTURE (changed)): restarting it"),
        "{said}"
    );
    assert!(
        !said.contains("secret-value-42") && !said.contains("redacted)"),
        "{said}"
    );
    let second = pid().expect("running again");
    assert_ne!(first, second);
    assert!(String::from_utf8_lossy(&environ(second)).contains("AEP_CAPTURE=redacted"));

    // The env file says otherwise than the daemon: doctor says so.
    let env_path = config.join("aep-cline/daemon.env");
    let env = std::fs::read_to_string(&env_path).unwrap();
    std::fs::write(
        &env_path,
        env.replace("AEP_CAPTURE=\"redacted\"", "AEP_CAPTURE=\"full\""),
    )
    .unwrap();
    let doctor = text(&run(&["doctor"], "redacted"));
    assert!(
        doctor.contains("settings differ from")
            && doctor.contains("AEP_CAPTURE (changed)")
            && doctor.contains("service restart"),
        "{doctor}"
    );

    // stop, restart, uninstall.
    let out = run(&["service", "stop"], "full");
    assert!(text(&out).contains(&format!("stopped: pid {second}")), "{}", text(&out));
    assert!(pid().is_none(), "stopped");
    assert!(text(&run(&["service", "stop"], "full")).contains("not running"));
    let out = run(&["service", "restart"], "full");
    assert!(text(&out).contains("started detached"), "{}", text(&out));
    let third = pid().expect("restarted");
    let out = run(&["service", "uninstall"], "full");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("stopped: pid {third}")), "{}", text(&out));
    assert!(pid().is_none(), "uninstall stopped the daemon");
    assert!(!env_path.exists());
}
