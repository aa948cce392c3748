//! An app on Cline's SDK other than the CLI: `sdk_host.mjs` (beside this file) runs one session
//! through `@cline/core` 0.0.86 with a `source` of the test's choosing (`vscode`, `jetbrains`,
//! ...), as the VS Code extension 4.x, JetBrains and the desktop app do, against a
//! [`FakeModel`], in a [`ClineSandbox`]'s environment. The SDK finds the sandbox's hook files
//! and writes its store itself (docs/cline-vendor-facts.md, "An SDK host other than the CLI").
//!
//! Node.js 22 and the SDK come from the cache `.ci/install-cline.sh` fills (`target/cline-sdk`);
//! when they are missing the tests FAIL, saying how to install them (never skip).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::cline::{ClineRun, ClineSandbox};
use super::fake_model::{FakeModel, MODEL_ID};

/// The cache `.ci/install-cline.sh` installs Node.js 22 and `@cline/core` into.
fn cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/cline-sdk")
}

/// The host script.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/sdk_host.mjs")
}

/// The Node.js 22 binary the SDK runs on; panics with how to install it when it is missing.
fn node() -> PathBuf {
    let node = cache().join("node_modules/node/bin/node");
    let core = cache().join("node_modules/@cline/core/package.json");
    assert!(
        node.is_file() && core.is_file(),
        "Node.js 22 and @cline/core 0.0.86 are not in {}: run `.ci/install-cline.sh` from the repository root \
         (it installs them there from the npm registry). End-to-end tests never skip.",
        cache().display()
    );
    node
}

/// `node sdk_host.mjs --source <source> ...`: one session of the app `source` with `prompt`, in
/// the sandbox's environment (its `HOME`, `CLINE_DIR`, in-process backend) and workspace, ready
/// for more environment before [`ClineSandbox::run_command`].
pub fn command(cline: &ClineSandbox, model: &FakeModel, source: &str, prompt: &str) -> Command {
    let mut cmd = Command::new(node());
    cline.apply_env(&mut cmd);
    cmd.env("NODE_PATH", cache().join("node_modules"))
        .current_dir(cline.workspace())
        .arg(script())
        .args(["--source", source, "--model", MODEL_ID, "--base-url"])
        .arg(model.base_url())
        .arg("--cwd")
        .arg(cline.workspace())
        .arg(prompt);
    cmd
}

/// Runs [`command`] to its end; the host's one line of JSON (`sessionId`, `status`, `source`).
pub fn run(cline: &ClineSandbox, cmd: Command) -> (ClineRun, Value) {
    let run = cline.run_command(cmd, Duration::from_secs(120));
    run.assert_success("the SDK host (sdk_host.mjs)");
    let said = run
        .records()
        .pop()
        .unwrap_or_else(|| panic!("the SDK host printed no JSON line: {run:?}"));
    (run, said)
}
