//! Batches, wildcards and paths against the README's kind of policy: a deny list of `rm -r` and
//! of pushes to main, and an approve list of read-only commands. The hostile command lines
//! themselves are the corpus (tests/corpus/cases.jsonl, run by tests/corpus.rs).

use cline_policy::{Answer, Asked, PolicyFile};

const POLICY: &str = r#"
[[rule]]
name = "no-rm-r"
tool = "run_commands"
command = ["rm -r *", "rm -R *", "rm --recursive *"]
answer = "deny"
reason = "no recursive deletes"

[[rule]]
name = "no-push-main"
tool = "run_commands"
command = "git push * main"
answer = "deny"

[[rule]]
name = "read-only"
tool = "run_commands"
command = ["ls *", "cat *", "echo *", "grep *", "git status", "git diff *"]
answer = "approve"
"#;

use Answer::{Approve as A, Ask as Q, Deny as D};

fn answer(policy: &PolicyFile, line: &str) -> (Answer, String) {
    let input = serde_json::json!({ "commands": [line] }).to_string();
    let asked = Asked::from_approval("run_commands", Some(&input), Some("/home/dev/proj"));
    let d = policy.decide(&asked);
    (d.answer(), format!("{}\n{}", d.why, asked.describe()))
}

#[test]
fn a_batch_is_approved_only_when_every_line_is() {
    let policy = PolicyFile::parse(POLICY).unwrap();
    let input = serde_json::json!({ "commands": ["ls", "ls; touch x"] }).to_string();
    let asked = Asked::from_approval("run_commands", Some(&input), None);
    assert_eq!(policy.decide(&asked).answer(), Q);
    let input = serde_json::json!({ "commands": ["ls", "cat $(rm -rf x)"] }).to_string();
    let asked = Asked::from_approval("run_commands", Some(&input), None);
    assert_eq!(policy.decide(&asked).answer(), D);
}

#[test]
fn a_glob_like_approve_rule_does_not_approve_what_follows_it() {
    // The newcomer's `command = "echo *"`: words, so `rm -rf / ; echo done` is two commands.
    let p = PolicyFile::parse("[[rule]]\nname='echo'\ncommand='echo *'\nanswer='approve'\n").unwrap();
    assert_eq!(answer(&p, "rm -rf / ; echo done").0, Q);
    assert_eq!(answer(&p, "echo done").0, A);
}

#[test]
fn paths_outside_the_workspace_never_match_a_relative_glob() {
    let p = PolicyFile::parse(
        "[[rule]]\nname='env'\npath='**/.env'\nanswer='deny'\n\
         [[rule]]\nname='all'\npath='**'\nanswer='approve'\n\
         [[rule]]\nname='etc'\npath='/etc/**'\nanswer='deny'\n",
    )
    .unwrap();
    let ws = Some("/home/dev/proj");
    let edit = |path: &str| {
        let input = serde_json::json!({ "path": path }).to_string();
        p.decide(&Asked::from_approval("editor", Some(&input), ws)).answer()
    };
    assert_eq!(edit("src/main.rs"), A);
    assert_eq!(edit("/home/dev/proj/src/main.rs"), A);
    assert_eq!(edit("/etc/shadow"), D);
    assert_eq!(edit("src/../../../../etc/passwd"), D);
    assert_eq!(edit("src/../../x"), Q);
    assert_eq!(edit("../../../etc/passwd"), D);
    assert_eq!(edit("~/.ssh/id_rsa"), Q);
    assert_eq!(edit("/home/dev/other/x"), Q);
    assert_eq!(edit("config/.env"), D);
    // A batch: one path under the deny rule is enough to deny; approve needs all.
    let input = serde_json::json!({ "files": [{"path": "a.rs"}, {"path": "b/.env"}] }).to_string();
    assert_eq!(
        p.decide(&Asked::from_approval("read_files", Some(&input), ws)).answer(),
        D
    );
    let input = serde_json::json!({ "files": [{"path": "a.rs"}, {"path": "/home/x"}] }).to_string();
    assert_eq!(
        p.decide(&Asked::from_approval("read_files", Some(&input), ws)).answer(),
        Q
    );
}
