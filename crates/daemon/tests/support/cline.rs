//! Runs the real Cline CLI (3.0.65) offline, in an isolated sandbox, against a [`FakeModel`].
//!
//! Each [`ClineSandbox`] owns a temporary folder with its own `HOME`, `CLINE_DIR` and workspace,
//! so no test sees the developer's Cline state or another test's, and Cline's four hook folders
//! (`~/Documents/Cline/Hooks`, `$CLINE_DIR/hooks`, `<cwd>/.clinerules/hooks`, `<cwd>/.cline/hooks`)
//! all live inside it. Runs use `CLINE_SESSION_BACKEND_MODE=local` so the run (and its hooks)
//! stays in the CLI process instead of going through a background hub.
//!
//! The CLI comes from `AEP_CLINE_TEST_CLI`, else from the cache `.ci/install-cline.sh` fills. When
//! it is missing the tests FAIL (never skip): a green run must mean the real CLI was exercised.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

use super::fake_model::{FakeModel, MODEL_ID};

/// Environment variable naming the Cline CLI binary to test against.
pub const CLI_ENV: &str = "AEP_CLINE_TEST_CLI";

/// The hook file names `install-hooks` writes (docs/cline-vendor-facts.md, "Hooks").
pub use aep_cline::cli::install::HOOK_FILES;

/// How long one CLI invocation may take before the harness kills it. A real run against the fake
/// model takes a few seconds; this only bounds a hung run.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// Finds the CLI: `env_value` (from [`CLI_ENV`]) if set, else the install script's cache. Errs,
/// saying how to fix it, when the file is not there.
pub fn resolve_cli(env_value: Option<OsString>) -> Result<PathBuf, String> {
    let (path, origin) = match env_value.filter(|v| !v.is_empty()) {
        Some(v) => (PathBuf::from(v), CLI_ENV.to_owned()),
        None => (default_cli_path(), "the default cache location".to_owned()),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the real Cline CLI is not at {} ({origin}). Run `.ci/install-cline.sh` from the repository root \
             (it installs cline@3.0.65 into target/cline-cli and prints the binary's path), or set {CLI_ENV} \
             to a Cline 3.0.65 binary. End-to-end tests never skip.",
            path.display()
        ))
    }
}

/// Where `.ci/install-cline.sh` puts the platform binary by default.
fn default_cli_path() -> PathBuf {
    let platform = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("macos", "aarch64") => "darwin-arm64",
        ("macos", _) => "darwin-x64",
        (_, "aarch64") => "linux-arm64",
        _ => "linux-x64",
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/cline-cli/node_modules/@cline")
        .join(format!("cli-{platform}"))
        .join("bin/cline")
}

/// An isolated home for the real CLI, configured to talk to one fake model.
pub struct ClineSandbox {
    cli: PathBuf,
    root: TempDir,
}

impl ClineSandbox {
    /// Makes the sandbox and runs `cline auth -p openai-compatible … -b <model>` in it.
    /// Panics (failing the test) when the CLI is missing or `auth` fails.
    pub fn new(model: &FakeModel) -> Self {
        let cli = resolve_cli(std::env::var_os(CLI_ENV)).unwrap_or_else(|e| panic!("{e}"));
        let root = tempfile::Builder::new()
            .prefix("aep-cline-e2e-")
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a temporary folder for the Cline sandbox: {e}"));
        let sandbox = ClineSandbox { cli, root };
        for dir in [sandbox.home(), sandbox.hooks_dir(), sandbox.workspace()] {
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        let mut auth = sandbox.command();
        auth.args([
            "auth",
            "-p",
            "openai-compatible",
            "-k",
            "dummy-key",
            "-m",
            MODEL_ID,
            "-b",
        ])
        .arg(model.base_url());
        sandbox.run_command(auth, RUN_TIMEOUT).assert_success("cline auth");
        sandbox
    }

    /// The sandbox's temporary folder; everything else lives under it, and a test may put its
    /// own files (daemon logs, spools, captures) here too.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    pub fn home(&self) -> PathBuf {
        self.root().join("home")
    }

    pub fn cline_dir(&self) -> PathBuf {
        self.home().join(".cline")
    }

    /// `$CLINE_DIR/hooks`, one of the folders Cline runs hook files from.
    pub fn hooks_dir(&self) -> PathBuf {
        self.cline_dir().join("hooks")
    }

    /// The run's working directory (Cline's workspace root).
    pub fn workspace(&self) -> PathBuf {
        self.root().join("workspace")
    }

    /// Sets the sandbox's environment on `cmd`, replacing the inherited one (only `PATH` is kept),
    /// so the developer's `CLINE_*`, API keys or `AEP_*` never leak in. Use it for anything that
    /// must see the same Cline state, for example `aep-cline install-hooks` or the daemon.
    pub fn apply_env(&self, cmd: &mut Command) {
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("CLINE_DIR", self.cline_dir())
            .env("CLINE_SESSION_BACKEND_MODE", "local")
            .env("CLINE_NO_AUTO_UPDATE", "1")
            .env("CLINE_TELEMETRY_DISABLED", "1");
    }

    /// A `cline` command with the sandbox environment, run in the workspace.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.cli);
        self.apply_env(&mut cmd);
        cmd.current_dir(self.workspace());
        cmd
    }

    /// `cline --json -P openai-compatible -m fake-model <prompt>`, ready to run; add environment
    /// or arguments before passing it to [`ClineSandbox::run_command`].
    pub fn json_run_command(&self, prompt: &str) -> Command {
        let mut cmd = self.command();
        cmd.args(["--json", "-P", "openai-compatible", "-m", MODEL_ID, prompt]);
        cmd
    }

    /// Runs `cline --json … <prompt>` to the end (see [`ClineSandbox::run_command`]).
    pub fn run(&self, prompt: &str) -> ClineRun {
        self.run_command(self.json_run_command(prompt), RUN_TIMEOUT)
    }

    /// Runs `cmd` to the end and collects its output. Panics with everything it printed when it
    /// does not exit within `timeout`; its whole process group is killed then.
    pub fn run_command(&self, mut cmd: Command, timeout: Duration) -> ClineRun {
        // Its own process group, so a timeout also kills the shells and hooks it started.
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let stdout = read_to_end_in_background(child.stdout.take().expect("stdout is piped"));
        let stderr = read_to_end_in_background(child.stderr.take().expect("stderr is piped"));
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() >= timeout => break None,
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("cannot wait for {cmd:?}: {e}"),
            }
        };
        let elapsed = started.elapsed();
        let Some(status) = status else {
            kill_process_group(child.id());
            let _ = child.wait();
            panic!(
                "{cmd:?} did not finish within {timeout:?} and was killed.\n--- stdout ---\n{}\n--- stderr ---\n{}",
                collect(&stdout),
                collect(&stderr)
            );
        };
        let (stdout, stderr) = (collect(&stdout), collect(&stderr));
        ClineRun {
            status,
            stdout_lines: stdout.lines().map(str::to_owned).collect(),
            stderr,
            elapsed,
        }
    }

    /// Writes an executable hook file into `$CLINE_DIR/hooks` (`name` as Cline expects it, for
    /// example `PreToolUse` or `PreToolUse.sh`; the interpreter comes from the shebang).
    pub fn write_hook(&self, name: &str, script: &str) -> PathBuf {
        let path = self.hooks_dir().join(name);
        std::fs::write(&path, script).unwrap_or_else(|e| panic!("cannot write hook {}: {e}", path.display()));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("cannot make hook {} executable: {e}", path.display()));
        path
    }

    /// Installs all nine hook files as capturing hooks: each firing saves its stdin payload as
    /// one file under `<root>/hook-captures`. They print nothing (Cline reads hook stdout as
    /// control).
    pub fn capture_hooks(&self) -> HookCapture {
        let dir = self.root().join("hook-captures");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        // Write to a temporary name, then rename: a reader never sees half a payload.
        let script = format!(
            "#!/bin/sh\nf='{}'/\"$(date +%s%N)-$$\"\ncat > \"$f.tmp\" && mv \"$f.tmp\" \"$f.json\"\n",
            dir.display()
        );
        for name in HOOK_FILES {
            self.write_hook(name, &script);
        }
        HookCapture { dir }
    }
}

/// What one CLI invocation did.
#[derive(Debug)]
pub struct ClineRun {
    pub status: ExitStatus,
    pub stdout_lines: Vec<String>,
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

impl ClineRun {
    /// Panics, showing stderr, unless the command exited 0.
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what} failed with {}.\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status,
            self.stdout_lines.join("\n"),
            self.stderr
        );
    }

    /// The `--json` stream's records. Panics on a line that is not JSON: the stream must be pure
    /// JSONL for the adapter to read it.
    pub fn records(&self) -> Vec<Value> {
        self.stdout_lines
            .iter()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| {
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("--json stdout line {} is not JSON ({e}): {line}", i + 1))
            })
            .collect()
    }

    /// The last `run_result` record. Panics, showing the output, when there is none.
    pub fn run_result(&self) -> Value {
        self.records()
            .into_iter()
            .rev()
            .find(|r| r["type"] == "run_result")
            .unwrap_or_else(|| {
                panic!(
                    "the run printed no run_result record ({}).\n--- stdout ---\n{}\n--- stderr ---\n{}",
                    self.status,
                    self.stdout_lines.join("\n"),
                    self.stderr
                )
            })
    }
}

/// The payloads saved by [`ClineSandbox::capture_hooks`].
pub struct HookCapture {
    dir: PathBuf,
}

impl HookCapture {
    /// Every payload captured so far, in firing order (by capture time).
    pub fn payloads(&self) -> Vec<Value> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", self.dir.display()))
            .map(|entry| entry.expect("readable directory entry").path())
            .filter(|p| p.extension().is_some_and(|ext| ext == "json"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
                serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("captured hook payload {} is not JSON ({e}): {text}", p.display()))
            })
            .collect()
    }

    /// Waits until a payload with each of `hook_names` (`hookName`) has been captured and returns
    /// all payloads. Needed because Cline runs agent_start/agent_end hooks detached: they may
    /// land after the CLI has exited. Panics, listing what did arrive, after `timeout`.
    pub fn wait_for(&self, hook_names: &[&str], timeout: Duration) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let payloads = self.payloads();
            let missing: Vec<&str> = hook_names
                .iter()
                .copied()
                .filter(|name| !payloads.iter().any(|p| p["hookName"] == *name))
                .collect();
            if missing.is_empty() {
                return payloads;
            }
            if started.elapsed() >= timeout {
                let seen: Vec<&str> = payloads.iter().filter_map(|p| p["hookName"].as_str()).collect();
                panic!("hooks {missing:?} did not fire within {timeout:?}; captured: {seen:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn read_to_end_in_background(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let text = match pipe.read_to_end(&mut bytes) {
            Ok(_) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => format!("{}\n<reading the pipe failed: {e}>", String::from_utf8_lossy(&bytes)),
        };
        let _ = tx.send(text);
    });
    rx
}

/// The output of a pipe reader. Bounded: a grandchild that inherited the pipe and outlives the
/// CLI must not hang the test.
fn collect(output: &mpsc::Receiver<String>) -> String {
    output
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| "<output still open 10 s after exit: a child process kept the pipe>".to_owned())
}

fn kill_process_group(pid: u32) {
    // std has no killpg; `kill -KILL -- -<pgid>` does it without unsafe code.
    let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).status();
}
