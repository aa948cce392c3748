//! The hostile corpus (tests/corpus/*.jsonl) against the policy it is written for
//! (tests/corpus/policy.toml): every case must get its answer. The pass rate is in
//! docs/benchmarks.md; the daemon's own test fires the same cases through the live hook.

use cline_policy::{cases, PolicyFile};
use std::path::Path;

fn corpus() -> Vec<(String, cases::Case)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut all = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let cases = cases::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        all.extend(cases.into_iter().map(|c| (name.clone(), c)));
    }
    all
}

#[test]
fn every_case_of_the_corpus_gets_its_answer() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let policy = PolicyFile::parse(&std::fs::read_to_string(dir.join("policy.toml")).unwrap()).unwrap();
    let cases = corpus();
    let mut wrong = Vec::new();
    for (file, case) in &cases {
        let got = cases::decide(&policy, case);
        if !got.holds(case) {
            let asked = policy.asked(&case.tool, &case.input, Some(&case.workspace));
            wrong.push(format!(
                "{file}:{}: {} {} -> {} {:?} (expected {} {:?}): {}\n{}",
                case.at,
                case.tool,
                case.input,
                got.answer,
                got.rule,
                case.expect,
                case.rule,
                got.why,
                asked.describe()
            ));
        }
    }
    println!(
        "corpus: {} of {} cases answered as written",
        cases.len() - wrong.len(),
        cases.len()
    );
    assert!(
        wrong.is_empty(),
        "{} of {} wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
