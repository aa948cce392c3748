//! "What is asked": what an approval would let Cline do, the local view's [`Detail`] of the
//! hub frame's tool name and `inputJson` (the command, the file, the argument), redacted by the
//! daemon's redactor and made visible (a right-to-left override shows as `\u{202e}`, a newline
//! stays a line break). All of it is kept for the link's page; a notification shows up to
//! [`MAX_CHARS`] of it and says how much more there is and where. It goes to the person, never
//! into an Event.

use aep_core::redact::Redactor;
use cline_hub::Detail;

/// The most of an approval a notification shows, in characters (a cut says what it hid).
pub const MAX_CHARS: usize = 200;

/// The most the link's page shows, in characters: every command a person would read, while
/// the approvals remembered for their pages stay bounded in memory (a longer one says how much
/// more there is, to be read in Cline).
pub const MAX_PAGE_CHARS: usize = 64 * 1024;

/// `tool: what` (e.g. `run_commands: npm test`): the owner's local view of the approval
/// ([`Detail::whole`], redacted as the log is), all of it up to [`MAX_PAGE_CHARS`]: what the
/// link's page shows.
pub fn asked(tool: Option<&str>, input_json: Option<&str>, redactor: &Redactor) -> String {
    let whole = Detail::whole(tool, input_json, redactor).summary();
    aep_core::text::shown(&whole, MAX_PAGE_CHARS, false).told(Some("Cline"))
}

/// What a notification shows of [`asked`]: all of it when it fits in [`MAX_CHARS`], else its
/// start, how many characters are left out and the page where all of it is (`whole_at`).
pub fn shown(asked: &str, whole_at: Option<&str>) -> String {
    aep_core::text::shown(asked, MAX_CHARS, false).told(whole_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_core::redact::RedactOptions;

    fn redactor() -> Redactor {
        Redactor::new(RedactOptions {
            home: Some("/home/dev".into()),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn the_command_or_the_file_is_said_redacted_on_one_bounded_line() {
        let r = redactor();
        // The real hub frame's input (hub-frames.jsonl).
        assert_eq!(
            asked(Some("run_commands"), Some(r#"{"commands":["echo approved-run"]}"#), &r),
            "run_commands: echo approved-run"
        );
        assert_eq!(
            asked(
                Some("run_commands"),
                Some(r#"{"commands":["cd x &&\n  make", "ls"]}"#),
                &r
            ),
            "run_commands: cd x &&\n  make; ls",
            "a newline stays a line break"
        );
        assert_eq!(
            asked(
                Some("editor"),
                Some(r#"{"command":"create","path":"/home/dev/p/src/main.rs"}"#),
                &r
            ),
            "editor: ~/p/src/main.rs"
        );
        assert_eq!(
            asked(Some("execute_command"), Some(r#"{"command":"npm test"}"#), &r),
            "execute_command: npm test"
        );
        assert_eq!(
            asked(
                Some("read_files"),
                Some(r#"{"files":[{"path":"/home/dev/a.rs"},"b.rs"]}"#),
                &r
            ),
            r#"read_files: files [{"path":"~/a.rs"},"b.rs"]"#
        );
        assert_eq!(
            asked(
                Some("apply_patch"),
                Some(r#"{"input":"*** Begin Patch\n*** Update File: src/x.rs\n@@"}"#),
                &r
            ),
            "apply_patch: src/x.rs"
        );
        let secret = asked(
            Some("run_commands"),
            Some(
                r#"{"commands":["curl -H 'Authorization: Bearer sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789' x"]}"#,
            ),
            &r,
        );
        assert!(!secret.contains("abcdefghijklmnop"), "{secret}");
        let long = asked(
            Some("run_commands"),
            Some(&format!(r#"{{"commands":["{}; touch TAIL_RAN"]}}"#, "a".repeat(500))),
            &r,
        );
        assert!(long.ends_with("; touch TAIL_RAN"), "all of it, for the link's page");
        let cut = shown(&long, Some("https://p/notify/t"));
        let hidden = long.chars().count() - MAX_CHARS;
        assert_eq!(
            cut,
            format!(
                "run_commands: {}… {hidden} more characters: see https://p/notify/t",
                "a".repeat(MAX_CHARS - "run_commands: ".len())
            )
        );
        assert_eq!(
            shown("run_commands: make", Some("x")),
            "run_commands: make",
            "whole: no note"
        );
        let huge = asked(
            Some("run_commands"),
            Some(&format!(r#"{{"commands":["{}"]}}"#, "b".repeat(MAX_PAGE_CHARS))),
            &r,
        );
        assert!(
            huge.ends_with("… 14 more characters: see Cline") && huge.starts_with("run_commands: bbb"),
            "the page's text is bounded too, and says so"
        );
        let hiding = asked(
            Some("run_commands"),
            Some(r#"{"commands":["ls \u202e\u200b\ufeffx"]}"#),
            &r,
        );
        assert_eq!(hiding, r"run_commands: ls \u{202e}\u{200b}\u{feff}x");
        assert_eq!(asked(Some("use_mcp"), Some("not json"), &r), "use_mcp");
        assert_eq!(asked(None, None, &r), "a tool");
    }
}
