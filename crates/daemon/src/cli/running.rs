//! The daemon running for this state folder, as `service` and `doctor` see it from outside: the
//! settings it was started with (its own environment, `/proc/<pid>/environ`, read as every
//! file we do not own is), how they differ from the service's env file, and stopping it.
//!
//! A daemon reads its settings once, at start: a service file rewritten later changes nothing
//! until it restarts, and people need to be told so.

use std::path::Path;
use std::time::{Duration, Instant};

/// An environment larger than this is not a daemon's (Linux allows 2 MiB of arguments and
/// environment together).
const MAX_ENVIRON: u64 = 4 << 20;

/// Whether a variable is one of the daemon's settings the service keeps: `AEP_*` (the test-only
/// ones aside) and `CLINE_DIR`, set to something.
pub fn kept(k: &str, v: &str) -> bool {
    !v.trim().is_empty()
        && ((k.starts_with("AEP_") && !k.starts_with("AEP_CLINE_TEST") && k != "AEP_CLINE_SERVICE_CTL")
            || k == "CLINE_DIR")
}

/// The settings `pid` was started with, those the service keeps ([`kept`]),
/// sorted; `None` when its environment cannot be read (another user's, gone, not Linux).
pub fn settings_of(pid: u32) -> Option<Vec<(String, String)>> {
    let path = format!("/proc/{pid}/environ");
    let mut bytes = Vec::new();
    cline_usage::vendor_file::read(Path::new(&path), MAX_ENVIRON, &mut bytes).ok()?;
    let mut vars: Vec<(String, String)> = bytes
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = std::str::from_utf8(kv).ok()?;
            let (k, v) = kv.split_once('=')?;
            kept(k, v).then(|| (k.to_string(), v.to_string()))
        })
        .collect();
    vars.sort();
    Some(vars)
}

/// The env file's settings (`NAME="value"` lines as `service install` writes them;
/// comments and blank lines skipped), sorted. A line that is not such is an error naming it.
pub fn parse_env_file(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut vars = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || format!("line {}: not NAME=\"value\"", n + 1);
        let (k, v) = line.split_once('=').ok_or_else(bad)?;
        let v = match v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            Some(quoted) => {
                let mut out = String::new();
                let mut chars = quoted.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => out.push(chars.next().ok_or_else(bad)?),
                        c => out.push(c),
                    }
                }
                out
            }
            None => v.to_string(),
        };
        vars.push((k.trim().to_string(), v));
    }
    vars.sort();
    Ok(vars)
}

/// What differs between the settings a daemon runs with and `wanted`, by name only (a value
/// may be a token): `AEP_X (new)`, `AEP_Y (changed)`, `AEP_Z (removed)`. Empty: the same.
pub fn changed(running: &[(String, String)], wanted: &[(String, String)]) -> Vec<String> {
    let find = |list: &[(String, String)], k: &str| list.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut out = Vec::new();
    for (k, v) in wanted {
        match find(running, k) {
            None => out.push(format!("{k} (new)")),
            Some(was) if was != *v => out.push(format!("{k} (changed)")),
            Some(_) => {}
        }
    }
    for (k, _) in running {
        if find(wanted, k).is_none() {
            out.push(format!("{k} (removed)"));
        }
    }
    out
}

/// Stops `pid` (SIGTERM: the daemon's clean shutdown) and waits up to `within` for it to be
/// gone; `Ok(false)` when it still runs then.
pub fn stop(pid: u32, within: Duration) -> anyhow::Result<bool> {
    let pid = i32::try_from(pid).map_err(|_| anyhow::anyhow!("pid {pid} is not a process id"))?;
    // SAFETY: kill(2) with a signal number; it touches no memory of ours.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    if sent != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            return Ok(true);
        }
        anyhow::bail!("cannot stop the daemon (pid {pid}): {e}");
    }
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !alive(pid) {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(!alive(pid))
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 checks that the process exists; nothing is sent.
    #[allow(unsafe_code)]
    let r = unsafe { libc::kill(pid, 0) };
    // A zombie (our own child, not yet reaped) is gone for this purpose.
    r == 0 && !std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn what_changed_is_said_by_name_never_by_value() {
        let running = vars(&[("AEP_CAPTURE", "metadata"), ("AEP_TOKEN", "old-secret"), ("AEP_X", "1")]);
        let wanted = vars(&[("AEP_CAPTURE", "metadata"), ("AEP_TOKEN", "new-secret"), ("AEP_Y", "2")]);
        let said = changed(&running, &wanted);
        assert_eq!(said, ["AEP_TOKEN (changed)", "AEP_Y (new)", "AEP_X (removed)"]);
        assert!(said.iter().all(|s| !s.contains("secret")));
        assert!(changed(&running, &running).is_empty());
    }

    #[test]
    fn the_env_file_reads_back_as_written_and_a_bad_line_is_named() {
        let written = vars(&[("AEP_A", "with \"quotes\" and \\ backslash"), ("CLINE_DIR", "/x y")]);
        // As `service::env_file` writes it (its own test keeps the two in step through the CLI).
        let text = "# written by aep-cline\nAEP_A=\"with \\\"quotes\\\" and \\\\ backslash\"\nCLINE_DIR=\"/x y\"\n";
        assert_eq!(parse_env_file(text).unwrap(), written);
        assert_eq!(parse_env_file("AEP_B=plain\n").unwrap(), vars(&[("AEP_B", "plain")]));
        assert!(parse_env_file("# c\n\nnot a setting\n").unwrap_err().contains("line 3"));
    }

    #[test]
    fn our_own_settings_are_read_from_our_environment() {
        let mine = settings_of(std::process::id()).expect("our own environ is readable");
        assert!(mine.iter().all(|(k, _)| k.starts_with("AEP_") || k == "CLINE_DIR"));
        assert!(settings_of(u32::MAX).is_none());
    }

    #[test]
    fn stopping_a_gone_process_is_done() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(stop(child.id(), Duration::from_secs(5)).unwrap());
        let _ = child.wait();
        assert!(stop(child.id(), Duration::from_secs(1)).unwrap(), "gone already");
    }
}
