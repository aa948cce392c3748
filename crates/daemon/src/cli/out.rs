//! Standard output for the commands. A reader that closes the pipe early (`| head`) ends the
//! command quietly with 0, as `aep-cline stream` does, instead of the panic `println!` gives
//! on a broken pipe. Commands write their files first and print after, so stopping here never
//! leaves work half done. Also: tables, times and durations as a person reads them.
//!
//! Every text line goes through [`terminal`]: Event fields come from Cline, its MCP servers and
//! anyone who can post Events, and a raw escape sequence in a tool name would clear the screen,
//! write the clipboard (OSC 52) or hide a link (OSC 8) in the reader's terminal. `--json` output
//! is exact JSON ([`print_json`]; serde escapes every C0 control).

use std::borrow::Cow;
use std::io::Write;

/// Text made safe for a terminal: control characters (ESC, DEL, C1 among them; a tab too),
/// bidi overrides and zero-width characters are shown escaped, as `\u{1b}`, never sent raw
/// ([`aep_core::text::visible`]); newlines stay line breaks.
pub fn terminal(text: &str) -> Cow<'_, str> {
    aep_core::text::visible(text)
}

/// Prints one line on standard output.
pub fn line(text: impl std::fmt::Display) {
    let text = text.to_string();
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{}", terminal(&text)).and_then(|()| stdout.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("aep-cline: cannot write to standard output: {e}");
        std::process::exit(1);
    }
}

/// Writes `text` to stdout, made safe for a terminal. A closed stdout (EPIPE) ends the output
/// quietly.
pub fn print(text: &str) -> anyhow::Result<()> {
    write_stdout(&terminal(text))
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(anyhow::anyhow!("cannot write to stdout: {e}")),
        _ => Ok(()),
    }
}

/// Pretty JSON and a newline.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    write_stdout(&text)
}

/// Columns padded to their widest cell; the last column is not padded.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

pub use crate::human_time::{age, clock, millis, parse_time, short_duration, when};

/// Text on one line ([`aep_core::text::visible_line`]: a newline shows as `\u{a}`), `max`
/// characters of it, and how many more when it is cut.
pub fn one_line(text: &str, max: usize) -> String {
    aep_core::text::shown(text, max, true).told(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_sizes_read_as_a_person_reads_them() {
        let now = parse_time("2026-12-01T06:34:12.123Z").unwrap();
        assert_eq!(age("2026-12-01T06:34:02Z", now), "10s ago");
        assert_eq!(age("2026-12-01T04:34:12.000Z", now), "2h ago");
        assert_eq!(age("garbage", now), "-");
        assert_eq!(age("2026-12-01T07:00:00Z", now), "now");
        assert_eq!(when("2026-12-01T06:34:12.123Z"), "12-01 06:34");
        assert_eq!(clock("2026-12-01T06:34:12.123Z"), "06:34:12");
        assert_eq!(
            (millis(812), millis(1500), millis(124_000)),
            ("812ms".into(), "1.5s".into(), "2m04s".into())
        );
        assert_eq!(one_line("a\nb", 10), "a\\u{a}b");
        assert_eq!(terminal("a\tb\nc\u{202e}"), "a\\u{9}b\nc\\u{202e}");
        assert_eq!(
            terminal("x\u{1b}]52;c;aGk=\u{7}\u{1b}[2J\u{7f}\u{9b}y"),
            "x\\u{1b}]52;c;aGk=\\u{7}\\u{1b}[2J\\u{7f}\\u{9b}y"
        );
        assert_eq!(one_line("abcdef", 4), "abcd… 2 more characters");
        assert_eq!(
            table(&[vec!["A".into(), "BB".into()], vec!["CCC".into(), "D".into()]]),
            "A    BB\nCCC  D\n"
        );
    }
}
