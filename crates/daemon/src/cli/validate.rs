//! `aep-cline validate FILE...`: checks JSONL logs with aep-core's validator, every Event alone
//! (AEP-0001, AEP-0002) and the files as one stream in the order given (ordering, `(source,
//! id)` reuse, terminals, acks), plus the JSONL framing rules (AEP-0003 §3.1). One line per
//! violation on stdout, `file:line: rule: detail`; a summary on stderr; non-zero exit when
//! anything is wrong.

use aep_core::validate::StreamValidator;
use anyhow::bail;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::PathBuf;

/// Validate AEP JSONL logs (e.g. ~/.aep/logs/cline/*.jsonl); `-` reads stdin.
///
/// Prints one line per violation (file:line: rule: detail) and exits non-zero if there is any.
#[derive(clap::Args)]
pub struct ValidateArgs {
    /// The JSONL files, checked as one stream in this order.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

pub fn run(args: ValidateArgs) -> anyhow::Result<()> {
    let mut validator = StreamValidator::new();
    let (mut events, mut violations) = (0usize, 0usize);
    for file in &args.files {
        let name = file.display().to_string();
        let text = match read(file) {
            Ok(text) => text,
            Err(e) => {
                super::out::line(format_args!("{name}: cannot read: {e}"));
                violations += 1;
                continue;
            }
        };
        let found = check(&name, &text, &mut validator, &mut events);
        violations += found.len();
        for line in found {
            super::out::line(&line);
        }
    }
    eprintln!(
        "{} file(s), {events} valid Event(s), {violations} violation(s)",
        args.files.len()
    );
    if violations > 0 {
        bail!("{violations} violation(s) found");
    }
    Ok(())
}

/// A file's bytes. A directory or a device (a symlink to `/dev/zero`) is refused; a FIFO is
/// opened without blocking, so one no writer holds reads as empty instead of hanging.
fn read(file: &PathBuf) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if file.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes)?;
        return Ok(bytes);
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(file)?;
    let kind = f.metadata()?.file_type();
    if kind.is_fifo() {
        // Blocking again: a writer's data is waited for; with none, the read ends at once.
        // SAFETY: F_SETFL on a descriptor this function owns.
        #[allow(unsafe_code)]
        unsafe {
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, 0)
        };
    } else if !kind.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file or a pipe (a directory, a device?)",
        ));
    }
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The violations of one file's text, as printable lines; counts its valid Events.
fn check(name: &str, text: &[u8], validator: &mut StreamValidator, events: &mut usize) -> Vec<String> {
    let mut out = Vec::new();
    let lines: Vec<&[u8]> = text.split(|b| *b == b'\n').collect();
    let last = lines.len() - 1; // the text after the final newline: empty for a whole file
    for (i, line) in lines.iter().enumerate() {
        let at = i + 1;
        if i == last {
            if !line.is_empty() {
                out.push(format!(
                    "{name}:{at}: AEP-0003 §3.1 (each line ends with a newline): the last line is unterminated, a torn write?"
                ));
            }
            break;
        }
        let line = match std::str::from_utf8(line) {
            Ok(line) => line,
            Err(e) => {
                out.push(format!("{name}:{at}: AEP-0003 §3.1 (UTF-8): not UTF-8: {e}"));
                continue;
            }
        };
        if line.trim().is_empty() {
            out.push(format!("{name}:{at}: AEP-0003 §3.1 (no blank lines): a blank line"));
            continue;
        }
        let value: serde_json::Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.push(format!(
                    "{name}:{at}: AEP-0003 §3.1 (one Event per line): not JSON: {e}"
                ));
                continue;
            }
        };
        match validator.push(&value) {
            Ok(()) => *events += 1,
            Err(v) => out.push(format!("{name}:{at}: {v}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const E0: &str = r#"{"aep":"0.1","id":"a","type":"session.started","time":"2026-01-01T00:00:00Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":0}"#;
    const E1: &str = r#"{"aep":"0.1","id":"b","type":"session.ended","time":"2026-01-01T00:00:01Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":1,"data":{"reason":"normal"}}"#;

    #[test]
    fn every_broken_line_is_reported_with_its_rule() {
        let mut n = 0;
        let ok = format!("{E0}\n{E1}\n");
        assert!(check("f", ok.as_bytes(), &mut StreamValidator::new(), &mut n).is_empty());
        assert_eq!(n, 2);
        let bad = format!(
            "{E0}\n\nnot json\n{E0}x\n{}\n{E1}",
            E1.replace("\"seq\":1", "\"seq\":0")
        );
        let found = check("f", bad.as_bytes(), &mut StreamValidator::new(), &mut n);
        assert_eq!(found.len(), 5, "{found:#?}");
        assert!(found[0].starts_with("f:2: AEP-0003 §3.1 (no blank lines)"));
        assert!(found[1].starts_with("f:3:") && found[1].contains("not JSON"));
        assert!(found[2].starts_with("f:4:"));
        assert!(found[3].starts_with("f:5: AEP-0001 §7.2"), "{}", found[3]);
        assert!(found[4].starts_with("f:6:") && found[4].contains("unterminated"));
        let found = check("f", b"\xff\xfe{}\n", &mut StreamValidator::new(), &mut n);
        assert!(found[0].starts_with("f:1: AEP-0003 §3.1 (UTF-8)"), "{found:?}");
    }
}
