//! `aep-cline install-hooks`: the files for both Cline generations, in the folders each reads,
//! idempotence, foreign files left alone, and an uninstall that removes only its own.
//!
//! Cline 2.x's global folder is `$(xdg-user-dir DOCUMENTS)/Cline/Hooks`: these tests run the real
//! `xdg-user-dir` (Debian's `xdg-user-dirs`, which `.ci/run` installs) with `HOME` and
//! `XDG_CONFIG_HOME` in the sandbox.

use crate::support;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use support::daemon::{real_payload, Sandbox, BIN};

use aep_cline::cli::install::HOOK_FILES as FILES;

/// `HOME` is the sandbox root; `XDG_CONFIG_HOME` pinned under it (what xdg-user-dir reads).
fn xdg(sb: &Sandbox) -> String {
    assert!(
        std::process::Command::new("xdg-user-dir")
            .arg("DOCUMENTS")
            .output()
            .is_ok(),
        "xdg-user-dir is missing: install Debian's xdg-user-dirs (Cline 2.x asks it for its hook folder)"
    );
    sb.root.path().join(".config").to_str().unwrap().to_string()
}

#[test]
fn installs_every_hook_for_both_generations_and_is_idempotent() {
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let cline = cline_dir.to_str().unwrap();
    let config = xdg(&sb);
    let env = [("CLINE_DIR", cline), ("XDG_CONFIG_HOME", config.as_str())];
    let out = sb.run(&["install-hooks"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    // No user-dirs.dirs: `xdg-user-dir DOCUMENTS` says $HOME, so 2.x reads $HOME/Cline/Hooks,
    // which 3.x does not: one folder per generation.
    let hooks = cline_dir.join("hooks");
    let hooks2 = sb.root.path().join("Cline").join("Hooks");
    assert!(
        said.contains(&format!("covers  Cline 3.x: {}\n", hooks.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("covers  Cline 2.x: {}\n", hooks2.display())),
        "{said}"
    );
    assert!(!sb.root.path().join("Documents").exists());
    for dir in [&hooks, &hooks2] {
        for name in FILES {
            let path = dir.join(name);
            let meta = std::fs::metadata(&path).unwrap_or_else(|_| panic!("{name} missing in {}", dir.display()));
            assert_eq!(meta.permissions().mode() & 0o111, 0o111, "{name} is executable");
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("#!/bin/sh\n"));
            assert!(
                text.contains(" hook; fi\n") && text.contains("AEP_CLINE_STATE_DIR="),
                "{text}"
            );
        }
    }
    assert!(FILES.contains(&"Notification") && FILES.len() == 11);
    let again = sb.run(&["install-hooks"], &env);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout).matches("unchanged").count(), 22);

    // Uninstall clears both.
    let out = sb.run(&["install-hooks", "--uninstall"], &env);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("removed").count(), 22);
    assert_eq!(std::fs::read_dir(&hooks2).unwrap().count(), 0);
    assert!(sb.run(&["install-hooks"], &env).status.success());

    // A hook file runs the shim for real: the payload reaches the spool (no daemon yet).
    let status = std::process::Command::new(hooks.join("PreToolUse"))
        .env_remove("AEP_CLINE_STATE_DIR")
        .stdin(std::fs::File::open(tempfile_with(&real_payload("hooks-local", "tool_call"))).unwrap())
        .output()
        .unwrap();
    assert!(status.status.success() && status.stdout.is_empty());
    assert_eq!(sb.spooled(), 1, "the installed file pinned the state dir");
    assert!(BIN.ends_with("aep-cline"));
}

fn tempfile_with(bytes: &[u8]) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("aep-cline-payload-{}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn documents_is_the_one_global_folder_when_both_generations_read_it() {
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let config = xdg(&sb);
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        std::path::Path::new(&config).join("user-dirs.dirs"),
        "XDG_DOCUMENTS_DIR=\"$HOME/Documents\"\n",
    )
    .unwrap();
    let env = [
        ("CLINE_DIR", cline_dir.to_str().unwrap()),
        ("XDG_CONFIG_HOME", config.as_str()),
    ];
    let out = sb.run(&["install-hooks"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    let documents = sb.root.path().join("Documents/Cline/Hooks");
    assert!(
        said.contains(&format!("covers  Cline 3.x and 2.x: {}\n", documents.display())),
        "{said}"
    );
    assert_eq!(said.matches("installed").count(), 11, "{said}");
    for name in FILES {
        assert!(documents.join(name).is_file(), "{name}");
    }
    assert!(
        !cline_dir.join("hooks").exists(),
        "3.x reads Documents too: no second folder"
    );
}

#[test]
fn project_hooks_go_to_clinerules_which_both_generations_read() {
    let sb = Sandbox::new();
    let project = sb.root.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let out = sb.run(&["install-hooks", "--project", project.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hooks = project.join(".clinerules/hooks");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("covers  Cline 3.x and 2.x: {}\n", hooks.display())));
    for name in FILES {
        assert!(hooks.join(name).is_file(), "{name}");
    }
    assert!(!project.join(".cline").exists());
}

#[test]
fn a_foreign_hook_file_is_never_overwritten_and_uninstall_removes_only_ours() {
    let sb = Sandbox::new();
    let project = sb.root.path().join("proj");
    let hooks = project.join(".clinerules").join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::write(hooks.join("PreToolUse"), "#!/bin/sh\necho mine\n").unwrap();
    let out = sb.run(&["install-hooks", "--project", project.to_str().unwrap()], &[]);
    assert!(!out.status.success(), "a conflict is reported with a failing exit code");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not written by aep-cline") && err.contains("--project"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(hooks.join("PreToolUse")).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
    assert!(hooks.join("TaskStart").exists(), "the other ten are installed");
    let out = sb.run(
        &["install-hooks", "--project", project.to_str().unwrap(), "--uninstall"],
        &[],
    );
    assert!(out.status.success());
    let left: Vec<String> = std::fs::read_dir(&hooks)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["PreToolUse"]);
    assert_eq!(
        std::fs::read_to_string(hooks.join("PreToolUse")).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
}

#[test]
fn a_reader_that_closes_early_gets_every_file_written_and_no_panic() {
    use std::io::BufRead;
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let mut child = std::process::Command::new(BIN)
        .arg("install-hooks")
        .env("HOME", sb.root.path())
        .env("XDG_CONFIG_HOME", xdg(&sb))
        .env("CLINE_DIR", &cline_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -1`: one line read, then the pipe is closed.
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let scripts: std::collections::HashSet<String> = FILES
        .iter()
        .map(|name| std::fs::read_to_string(cline_dir.join("hooks").join(name)).unwrap())
        .collect();
    assert_eq!(scripts.len(), 1, "all eleven files point at one binary");
}

#[test]
fn a_project_folder_that_does_not_exist_is_refused_and_nothing_is_created() {
    let sb = Sandbox::new();
    let missing = sb.root.path().join("no-such-project");
    let out = sb.run(&["install-hooks", "--project", missing.to_str().unwrap()], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such folder"));
    assert!(!missing.exists());
}

#[test]
fn a_project_install_under_global_hooks_writes_nothing_and_says_why() {
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let project = sb.root.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let env = [("CLINE_DIR", cline_dir.to_str().unwrap())];
    assert!(sb.run(&["install-hooks"], &env).status.success());
    let out = sb.run(&["install-hooks", "--project", project.to_str().unwrap()], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!(
            "the global hooks in {} (Cline 3.x reads it) already run for {}",
            cline_dir.join("hooks").display(),
            project.display()
        )),
        "{said}"
    );
    assert!(said.contains("--uninstall --global"), "{said}");
    assert!(!project.join(".clinerules").exists(), "no second copy for Cline to run");
    let doctor = sb.run_in(&project, &["doctor", "--project", project.to_str().unwrap()], &env);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(!report.contains("more than once"), "{report}");

    // Removing the global ones (only them) lets the project have its own.
    let out = sb.run(&["install-hooks", "--uninstall", "--global"], &env);
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("removed").count(), 22);
    let out = sb.run(&["install-hooks", "--project", project.to_str().unwrap()], &env);
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("installed").count(), 11);
    let out = sb.run(&["install-hooks", "--uninstall", "--global"], &env);
    assert!(String::from_utf8_lossy(&out.stdout).contains("no aep-cline hook files in"));
    assert!(
        project.join(".clinerules/hooks/PreToolUse").is_file(),
        "--global leaves the project's"
    );
}

#[test]
fn a_reinstall_after_clines_folders_moved_removes_the_copies_it_wrote_before() {
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let config = xdg(&sb);
    let env = [
        ("CLINE_DIR", cline_dir.to_str().unwrap()),
        ("XDG_CONFIG_HOME", config.as_str()),
    ];
    // No user-dirs.dirs: one folder per generation.
    assert!(sb.run(&["install-hooks"], &env).status.success());
    let (v3, v2) = (cline_dir.join("hooks"), sb.root.path().join("Cline/Hooks"));
    assert!(v3.join("TaskStart").is_file() && v2.join("TaskStart").is_file());
    let foreign = v3.join("TaskStart.sh");
    std::fs::write(&foreign, "#!/bin/sh\necho mine\n").unwrap();
    // Now 2.x reads ~/Documents, as 3.x does: one folder serves both.
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        std::path::Path::new(&config).join("user-dirs.dirs"),
        "XDG_DOCUMENTS_DIR=\"$HOME/Documents\"\n",
    )
    .unwrap();
    let out = sb.run(&["install-hooks"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said.matches("  removed  ").count(), 22, "{said}");
    assert!(
        said.contains("a copy from an earlier install in a folder Cline no longer needs"),
        "{said}"
    );
    for name in FILES {
        assert!(!v3.join(name).exists() && !v2.join(name).exists(), "{name}");
        assert!(sb.root.path().join("Documents/Cline/Hooks").join(name).is_file());
    }
    assert!(foreign.is_file(), "a file aep-cline did not write is never removed");
    let doctor = sb.run(&["doctor"], &env);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        !report.contains("more than once") && report.contains("ok    hooks"),
        "{report}"
    );
}

#[test]
fn a_global_install_removes_the_current_workspaces_own_copy() {
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let project = sb.root.path().join("proj");
    std::fs::create_dir_all(&project).unwrap();
    let env = [("CLINE_DIR", cline_dir.to_str().unwrap())];
    assert!(sb
        .run(&["install-hooks", "--project", project.to_str().unwrap()], &env)
        .status
        .success());
    let out = sb.run_in(&project, &["install-hooks"], &env);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("(the global hooks run for this workspace now)"), "{said}");
    assert!(!project.join(".clinerules/hooks/PreToolUse").exists());
    assert!(cline_dir.join("hooks/PreToolUse").is_file());
}

#[test]
fn a_hook_file_whose_binary_is_gone_still_spools_the_payload_and_says_why() {
    let sb = Sandbox::new();
    let copy = sb.root.path().join("aep-cline-copy");
    std::fs::copy(BIN, &copy).unwrap();
    let cline_dir = sb.root.path().join("cline-home");
    let out = std::process::Command::new(&copy)
        .arg("install-hooks")
        .env("HOME", sb.root.path())
        .env("CLINE_DIR", &cline_dir)
        .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::remove_file(&copy).unwrap(); // `cargo clean`
    let ran = std::process::Command::new(cline_dir.join("hooks").join("TaskStart"))
        .env("HOME", sb.root.path())
        .stdin(std::fs::File::open(tempfile_with(&real_payload("hooks-local", "agent_start"))).unwrap())
        .output()
        .unwrap();
    assert!(ran.status.success() && ran.stdout.is_empty());
    assert!(String::from_utf8_lossy(&ran.stderr).contains("is missing"));
    assert_eq!(
        std::fs::read_dir(sb.state_dir.join("spool"))
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "hook"))
            .count(),
        1
    );
    let daemon = sb.start();
    let events = sb.wait_for_events("1796007203184_6l7jh", 2);
    assert_eq!(support::daemon::types(&events), ["session.started", "run.started"]);
    drop(daemon);
}

#[test]
fn installed_closed_a_hook_file_whose_binary_is_gone_stops_the_tool_and_says_why() {
    let sb = Sandbox::new();
    let copy = sb.root.path().join("aep-cline-copy");
    std::fs::copy(BIN, &copy).unwrap();
    let cline_dir = sb.root.path().join("cline-home");
    let install = |enforce: &[&str], env: Option<&str>| {
        let mut cmd = std::process::Command::new(&copy);
        cmd.arg("install-hooks")
            .args(enforce)
            .env("HOME", sb.root.path())
            .env("CLINE_DIR", &cline_dir)
            .env("AEP_CLINE_STATE_DIR", &sb.state_dir)
            .env_remove("AEP_CLINE_ENFORCE");
        if let Some(v) = env {
            cmd.env("AEP_CLINE_ENFORCE", v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let fire = |hook: &str, enforce: Option<&str>| {
        let mut cmd = std::process::Command::new(cline_dir.join("hooks").join(hook));
        cmd.env("HOME", sb.root.path()).env_remove("AEP_CLINE_ENFORCE");
        if let Some(v) = enforce {
            cmd.env("AEP_CLINE_ENFORCE", v);
        }
        let out = cmd
            .stdin(std::fs::File::open(tempfile_with(&real_payload("hooks-local", "tool_call"))).unwrap())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // Installed closed (from the installer's own environment here): it says so.
    let said = install(&[], Some("closed"));
    assert!(said.contains("enforce  closed"), "{said}");
    std::fs::rename(&copy, sb.root.path().join("moved")).unwrap();
    let control: Value = serde_json::from_str(fire("PreToolUse", None).trim()).unwrap();
    assert_eq!(control["cancel"], true);
    assert!(
        control["errorMessage"].as_str().unwrap().contains("is missing"),
        "{control}"
    );
    // Only the hook Cline waits on before a tool answers; Cline's own setting wins.
    assert_eq!(fire("PostToolUse", None), "");
    assert_eq!(fire("PreToolUse", Some("open")), "");
    // Installed open, Cline's environment can still close it.
    std::fs::rename(sb.root.path().join("moved"), &copy).unwrap();
    let said = install(&["--enforce", "open"], Some("closed"));
    assert!(said.contains("enforce  open"), "{said}");
    std::fs::remove_file(&copy).unwrap();
    assert_eq!(fire("PreToolUse", None), "");
    assert!(fire("PreToolUse", Some("closed")).contains("\"cancel\":true"));
}
