//! The REAL Cline hub (`cline hub ensure`) inside a [`ClineSandbox`], on its own port, stopped
//! (`cline hub stop`, then killed if it is still there) when dropped, so no test leaves a hub
//! running.

use super::cline::ClineSandbox;
use super::daemon::Sandbox;
use super::free_port;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A daemon sandbox whose hub tap (`tap`: `AEP_CLINE_HUB`, or `AEP_CLINE_HUB_CONTROL` for
/// control too) reads the discovery file `cline hub ensure` will write in `cline`, with its hooks
/// installed in the sandbox's `CLINE_DIR`: the hub runs hooks with its own environment.
pub fn tapped_sandbox(cline: &ClineSandbox, tap: &str) -> Sandbox {
    let discovery = cline.cline_dir().join("data/locks/hub/production.json");
    let aep = Sandbox::new()
        .with_env(tap, "1")
        .with_env("AEP_CLINE_HUB_DISCOVERY", discovery.to_str().unwrap());
    aep.install_hooks_for(cline);
    aep
}

pub struct RealHub<'a> {
    cline: &'a ClineSandbox,
    port: u16,
}

impl<'a> RealHub<'a> {
    /// `cline hub ensure` on a free port; the hub runs hooks and tools with the sandbox's
    /// environment.
    pub fn ensure(cline: &'a ClineSandbox) -> RealHub<'a> {
        let hub = RealHub {
            cline,
            port: free_port(),
        };
        // The hub outlives the command and would hold its pipes open: output goes to a file.
        let log = cline.root().join(format!("hub-{}.log", hub.port));
        // Cline gives its detached hub 15 s to come up; on a loaded machine (two cores running
        // several suites) it can need longer. `hub ensure` is idempotent: asking again finds the
        // hub that came up late, or starts one.
        let ensured = (0..3).any(|_| hub.run(&["hub", "ensure"], &log));
        assert!(
            ensured,
            "cline hub ensure failed three times: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        assert!(
            hub.discovery().is_file(),
            "cline hub ensure wrote no discovery file at {}",
            hub.discovery().display()
        );
        hub
    }

    /// Runs `cline <args>` to its end (60 s at most), output appended to `log`.
    fn run(&self, args: &[&str], log: &std::path::Path) -> bool {
        let file = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .expect("the hub log file")
        };
        let mut child = self
            .command(args)
            .stdin(std::process::Stdio::null())
            .stdout(file())
            .stderr(file())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run cline {args:?}: {e}"));
        for _ in 0..600 {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        panic!(
            "cline {args:?} did not finish within 60 s: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    /// A `cline` command with the sandbox environment and this hub's port.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.cline.command();
        cmd.env("CLINE_HUB_PORT", self.port.to_string()).args(args);
        cmd
    }

    /// The vendor's discovery file (what `AEP_CLINE_HUB_DISCOVERY` names).
    pub fn discovery(&self) -> PathBuf {
        self.cline.cline_dir().join("data/locks/hub/production.json")
    }

    fn pid(&self) -> Option<u32> {
        let d: serde_json::Value = serde_json::from_slice(&std::fs::read(self.discovery()).ok()?).ok()?;
        d["pid"].as_u64().map(|p| p as u32)
    }
}

impl Drop for RealHub<'_> {
    fn drop(&mut self) {
        let pid = self.pid();
        let log = self.cline.root().join(format!("hub-{}.log", self.port));
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run(&["hub", "stop"], &log)));
        if let Some(pid) = pid {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}
