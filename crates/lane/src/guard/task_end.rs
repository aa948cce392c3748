//! Ending a Cline 2.18 task a guard stopped. 2.18 stops a task whose hook answered `cancel`
//! (the tool does not run) and then waits at `ask: resume_task` for a person, forever: `cline
//! task -y --json` never exits, and one SIGTERM is not enough (docs/cline-vendor-facts.md). Two
//! SIGTERMs, a second apart, make it shut down (exit 1), as they would from a terminal; so after
//! such a stop the daemon sends them to the CLI that ran the hook, then SIGKILL if it still
//! lives. Only to a process whose command line is the 2.x CLI's `task` command: 2.x's hooks also
//! run inside the VS Code extension, which a person drives and which must never be signalled.

use crate::lane::parent::Parent;
use std::time::Duration;

/// How long the CLI is given to reach its `resume_task` question before the first SIGTERM, and
/// between the signals.
const PAUSE: Duration = Duration::from_secs(1);
/// How long after the second SIGTERM it may take to exit before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// Whether `command_line` is Cline 2.x's CLI running a task (`node .../cline task ...`, or the
/// `cline` launcher).
pub fn is_cline_task(command_line: &str) -> bool {
    let words: Vec<&str> = command_line.split_whitespace().collect();
    let cline = words.iter().position(|w| {
        w.rsplit('/')
            .next()
            .is_some_and(|b| b == "cline" || b == "cli.mjs" || b == "cline.js")
    });
    cline.is_some_and(|at| words[at + 1..].first() == Some(&"task"))
}

/// Ends the 2.18 task `cli` runs, on a thread of its own (the hook is answered meanwhile).
/// Returns `false` without doing anything when `cli` is not a 2.x CLI running a task.
pub fn end(cli: Parent) -> bool {
    let Some(line) = cli.command_line() else {
        return false;
    };
    if !is_cline_task(&line) {
        tracing::info!(
            pid = cli.pid,
            "guard: a stopped Cline 2.x task is not the CLI's (VS Code?): it waits for its person"
        );
        return false;
    }
    std::thread::spawn(move || {
        std::thread::sleep(PAUSE);
        for _ in 0..2 {
            if !cli.signal(libc::SIGTERM) {
                return;
            }
            std::thread::sleep(PAUSE);
        }
        std::thread::sleep(GRACE.saturating_sub(PAUSE));
        if cli.signal(libc::SIGKILL) {
            tracing::warn!(
                pid = cli.pid,
                "guard: the stopped Cline 2.x task did not exit on SIGTERM: killed"
            );
        }
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_2x_clis_task_is_ended() {
        assert!(is_cline_task(
            "node /home/dev/.npm/lib/node_modules/cline/dist/cli.mjs task -y --json CMD:rm"
        ));
        assert!(is_cline_task("/usr/bin/cline task -y hello"));
        assert!(!is_cline_task("/usr/share/code/code --type=extensionHost"));
        assert!(!is_cline_task("node /x/cline/dist/cli.mjs auth -p openai"));
        assert!(!is_cline_task("cline"));
    }
}
