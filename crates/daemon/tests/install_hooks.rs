//! `aep-cline install-hooks`: the nine files, idempotence, foreign files left alone, and an
//! uninstall that removes only its own.

mod support;

use std::os::unix::fs::PermissionsExt;
use support::daemon::{real_payload, Sandbox, BIN};

use aep_cline::cli::install::HOOK_FILES as FILES;

#[test]
fn installs_nine_executable_hooks_into_cline_dir_and_is_idempotent() {
    let sb = Sandbox::new();
    let cline_dir = sb.root.path().join("cline-home");
    let cline = cline_dir.to_str().unwrap();
    let out = sb.run(&["install-hooks"], &[("CLINE_DIR", cline)]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hooks = cline_dir.join("hooks");
    for name in FILES {
        let path = hooks.join(name);
        let meta = std::fs::metadata(&path).unwrap_or_else(|_| panic!("{name} missing"));
        assert_eq!(meta.permissions().mode() & 0o111, 0o111, "{name} is executable");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("#!/bin/sh\n"));
        assert!(
            text.contains(" hook\n") && text.contains("AEP_CLINE_STATE_DIR="),
            "{text}"
        );
    }
    let again = sb.run(&["install-hooks"], &[("CLINE_DIR", cline)]);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout).matches("unchanged").count(), 9);

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
fn a_foreign_hook_file_is_never_overwritten_and_uninstall_removes_only_ours() {
    let sb = Sandbox::new();
    let project = sb.root.path().join("proj");
    let hooks = project.join(".cline").join("hooks");
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
    assert!(hooks.join("TaskStart").exists(), "the other eight are installed");
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
