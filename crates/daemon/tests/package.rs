//! The Debian package: `.ci/check-deb.sh --quick` builds it with `cargo deb` (from the debug
//! build the tests already made), checks its contents with `dpkg-deb -c`, extracts it into a
//! scratch root with `dpkg-deb -x` and runs the binary there. cargo-deb is not part of the
//! toolchain: the script installs the pinned one under target/tools once
//! (`.ci/install-cargo-deb.sh`), so the test never skips.

use std::path::Path;
use std::process::Command;

#[test]
fn the_deb_holds_the_binary_the_unit_and_the_docs_and_its_binary_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join(".ci/check-deb.sh"))
        .arg("--quick")
        .current_dir(&root)
        .output()
        .expect("run .ci/check-deb.sh");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "check-deb.sh: {}\n{said}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("ok: aep-cline_"), "{said}");
}
