//! docs/policy-programs.md lists the programs table as the policy holds it: regenerate it with
//! `AEP_CLINE_WRITE_DOCS=1 cargo test -p cline-policy --test programs_doc` when the table changes.

#[test]
fn the_programs_doc_is_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/policy-programs.md");
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    let table = cline_policy::programs::table::describe();
    let marker = "<!-- the table: generated from crates/cline-policy/src/programs/table.rs -->\n";
    let at = doc.find(marker).map(|i| i + marker.len());
    if std::env::var_os("AEP_CLINE_WRITE_DOCS").is_some() {
        let head = at.map_or_else(|| format!("{doc}{marker}"), |i| doc[..i].to_string());
        std::fs::write(path, format!("{head}{table}")).unwrap();
        return;
    }
    let at = at.expect("docs/policy-programs.md has the table's marker");
    assert_eq!(
        &doc[at..],
        table,
        "docs/policy-programs.md is stale: run AEP_CLINE_WRITE_DOCS=1 cargo test -p cline-policy --test programs_doc"
    );
}
