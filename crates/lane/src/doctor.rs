//! What `aep-cline doctor` prints, as a value each subsystem adds its own findings to: the
//! module that reports a subsystem's status (`/healthz`) also says what that status means for a
//! person and what to do (`<subsystem>/doctor.rs`), so the command knows no subsystem's insides.

/// The findings so far: one line each (`ok`, `info`, `warn`, `FAIL`), a warning's or a
/// failure's fix on the line below it.
#[derive(Debug, Default)]
pub struct Report {
    lines: String,
    failures: usize,
    warnings: usize,
}

impl Report {
    pub fn ok(&mut self, area: &str, text: impl AsRef<str>) {
        self.line("ok", area, text.as_ref(), None);
    }
    pub fn info(&mut self, area: &str, text: impl AsRef<str>) {
        self.line("info", area, text.as_ref(), None);
    }
    pub fn warn(&mut self, area: &str, text: impl AsRef<str>, fix: impl AsRef<str>) {
        self.warnings += 1;
        self.line("warn", area, text.as_ref(), Some(fix.as_ref()));
    }
    pub fn fail(&mut self, area: &str, text: impl AsRef<str>, fix: impl AsRef<str>) {
        self.failures += 1;
        self.line("FAIL", area, text.as_ref(), Some(fix.as_ref()));
    }
    /// A line of its own (a heading, the verdict), as it is.
    pub fn say(&mut self, line: &str) {
        self.lines.push_str(line);
        self.lines.push('\n');
    }
    pub fn failures(&self) -> usize {
        self.failures
    }
    pub fn warnings(&self) -> usize {
        self.warnings
    }
    pub fn text(&self) -> &str {
        &self.lines
    }
    fn line(&mut self, mark: &str, area: &str, text: &str, fix: Option<&str>) {
        self.lines.push_str(&format!("{mark:<5} {area:<8} {text}\n"));
        if let Some(fix) = fix.filter(|f| !f.is_empty()) {
            self.lines.push_str(&format!("{:<14} → {fix}\n", ""));
        }
    }
}

/// `812 B`, `3.4 KiB`, `1.2 MiB`.
pub fn size(bytes: u64) -> String {
    match bytes {
        0..=1023 => format!("{bytes} B"),
        1024..=1_048_575 => format!("{:.1} KiB", bytes as f64 / 1024.0),
        _ => format!("{:.1} MiB", bytes as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_are_counted_and_fixes_follow_their_line() {
        let mut r = Report::default();
        r.say("heading");
        r.ok("logs", "fine");
        r.warn("spool", "near its bound", "start the daemon");
        r.fail("relay", "down", "");
        assert_eq!((r.failures(), r.warnings()), (1, 1));
        assert_eq!(
            r.text(),
            "heading\nok    logs     fine\nwarn  spool    near its bound\n               → start the daemon\nFAIL  relay    down\n"
        );
        assert_eq!(
            (size(1023), size(1024), size(3 << 20)),
            ("1023 B".into(), "1.0 KiB".into(), "3.0 MiB".into())
        );
    }
}
