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

/// Every script the pages load parses as the ES module it is (a stray word once made `api`
/// lose its `async`, and the whole dashboard failed to load): `node --check` on each.
#[test]
fn every_page_script_parses_as_a_module() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for folder in ["dashboard", "fleet"] {
        let assets = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets")
            .join(folder);
        for entry in std::fs::read_dir(&assets).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|x| x != "js") {
                continue;
            }
            // As a module, whatever its name says: the pages load them with type=module.
            let copy = dir
                .path()
                .join(format!("{folder}-{}.mjs", path.file_stem().unwrap().to_string_lossy()));
            std::fs::copy(&path, &copy).unwrap();
            let out = Command::new("node")
                .arg("--check")
                .arg(&copy)
                .output()
                .expect("node is not there: install Debian's nodejs package; these tests never skip");
            assert!(
                out.status.success(),
                "{} does not parse: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 3, "only {checked} scripts found");
}
