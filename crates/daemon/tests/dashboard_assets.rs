//! The dashboard's scripts on their own, run by Node (`node`, as Debian's `nodejs` package
//! installs it; the test fails when it is missing): what a link or a page can hand them never
//! throws.

use std::process::Command;

/// Runs an ES module snippet that imports `view.js`; returns its stdout.
fn node(script: &str) -> String {
    let view = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/dashboard/view.js");
    let program = format!("import * as view from 'file://{view}';\n{script}");
    let out = Command::new("node")
        .args(["--input-type=module", "-e", &program])
        .output()
        .expect("node is not there: install Debian's nodejs package; these tests never skip");
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_malformed_session_link_names_no_session_and_never_throws() {
    let out = node(
        "for (const h of ['#/s/%E0', '#/s/a%2Fb', '', '#/', '#/s/%', '#/s/%ZZ%E0%A4']) \
         console.log(JSON.stringify(view.linkedSession(h)));",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            r#"{"id":null,"bad":"%E0"}"#,
            r#"{"id":"a/b"}"#,
            r#"{"id":null}"#,
            r#"{"id":null}"#,
            r#"{"id":null,"bad":"%"}"#,
            r#"{"id":null,"bad":"%ZZ%E0%A4"}"#,
        ]
    );
}

#[test]
fn the_page_decodes_links_only_through_the_guarded_helper() {
    let app = include_str!("../assets/dashboard/app.js");
    assert!(
        !app.contains("decodeURI"),
        "app.js decodes a link itself; use view.js's linkedSession, which cannot throw"
    );
}
