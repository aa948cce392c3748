//! A program (a `cline` TUI) on a terminal of its own: tmux on a socket in the test's folder,
//! never the user's server, killed when dropped.

use std::path::{Path, PathBuf};

/// A `cline` TUI in a tmux of its own (its own socket in the sandbox), killed when dropped.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Runs `cmd` (its program, arguments, environment and folder) in a new detached tmux
    /// session on a terminal of 200x50.
    pub fn start(root: &Path, cmd: &std::process::Command) -> Tmux {
        let socket = root.join("tmux.sock");
        let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', r"'\''"));
        let mut line = String::from("exec env -i TERM=xterm-256color");
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                line.push_str(&format!(" {}={}", k.to_string_lossy(), quote(v)));
            }
        }
        line.push(' ');
        line.push_str(&quote(cmd.get_program()));
        for a in cmd.get_args() {
            line.push(' ');
            line.push_str(&quote(a));
        }
        let script = root.join("tui.sh");
        let cwd = cmd.get_current_dir().expect("a working folder");
        std::fs::write(&script, format!("#!/bin/sh\ncd {}\n{line}\n", quote(cwd.as_os_str()))).unwrap();
        let tmux = Tmux { socket };
        let ok = tmux
            .command(&["new-session", "-d", "-s", "tui", "-x", "200", "-y", "50"])
            .arg(format!("sh {}", script.display()))
            .status()
            .unwrap();
        assert!(ok.success(), "tmux new-session failed");
        let ok = tmux
            .command(&["set-option", "-t", "tui", "remain-on-exit", "on"])
            .status()
            .unwrap();
        assert!(ok.success());
        tmux
    }

    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new("tmux");
        cmd.arg("-S").arg(&self.socket).args(args);
        cmd
    }

    pub fn keys(&self, keys: &str) {
        let ok = self.command(&["send-keys", "-t", "tui", keys]).status().unwrap();
        assert!(ok.success(), "tmux send-keys {keys}");
    }

    /// Whether the program has exited (its pane is kept, dead, by `remain-on-exit`).
    pub fn exited(&self) -> bool {
        let out = self
            .command(&["display-message", "-p", "-t", "tui", "#{pane_dead}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// What the terminal shows now.
    pub fn screen(&self) -> String {
        let out = self.command(&["capture-pane", "-p", "-t", "tui"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command(&["kill-server"]).status();
    }
}
