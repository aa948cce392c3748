//! "What is asked": one line saying what an approval would let Cline do, the local view's
//! [`Detail`] of the hub frame's tool name and `inputJson` (the command, the file, the
//! argument), redacted by the daemon's redactor and bounded. It goes to the person in a notification and on a link's page, never
//! into an Event.

use aep_core::redact::Redactor;
use cline_hub::Detail;

/// The longest line, in characters (an ellipsis marks a cut).
pub const MAX_CHARS: usize = 200;

/// `tool: what` (e.g. `run_commands: npm test`): the owner's local view of the approval
/// ([`Detail`], redacted as the log is), on one bounded line.
pub fn asked(tool: Option<&str>, input_json: Option<&str>, redactor: &Redactor) -> String {
    aep_core::text::fit(&one_line(&Detail::of(tool, input_json, redactor).summary()), MAX_CHARS)
}

/// Line breaks and runs of blanks as one space; control characters dropped.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect()
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
            "run_commands: cd x && make; ls"
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
            Some(&format!(r#"{{"commands":["{}"]}}"#, "a".repeat(500))),
            &r,
        );
        assert_eq!(long.chars().count(), MAX_CHARS);
        assert!(long.ends_with('…'));
        assert_eq!(asked(Some("use_mcp"), Some("not json"), &r), "use_mcp");
        assert_eq!(asked(None, None, &r), "a tool");
    }
}
