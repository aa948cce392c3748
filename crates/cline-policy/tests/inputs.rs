//! Every tool input shape Cline accepts, as the vendor's own code read it
//! (tests/data/cline-tool-inputs.json: 3.0.65 run through `@cline/core` 0.0.86's own runtime,
//! 2.18 through the real CLI; docs/cline-vendor-facts.md, "Tool inputs"). What Cline runs or
//! touches must always be among what the policy read, and a tool whose input it does not know
//! is said to be unread, never taken for one without commands or paths.

use cline_policy::input::tool_name;
use cline_policy::programs::Custom;
use cline_policy::shell::Script;
use cline_policy::Asked;
use serde_json::Value;

fn words_of(script: &Script) -> Vec<Vec<String>> {
    script
        .top()
        .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
        .collect()
}

#[test]
fn what_cline_runs_or_touches_is_always_among_what_the_policy_read() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/cline-tool-inputs.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(cases.len() >= 150);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for case in &cases {
        if case["accepted_by_vendor"] != true || case["hook_fires"] == false {
            continue;
        }
        checked += 1;
        let legacy = case["generation"] == "2";
        let tool = tool_name(case["tool"].as_str().unwrap(), legacy);
        let asked = Asked::from_input(tool, &case["input"], Some("/home/dev/proj"), &Custom::default());
        let read: Vec<Vec<String>> = asked.scripts.iter().flat_map(words_of).collect();
        for command in case["commands"].as_array().unwrap() {
            let runs = words_of(&Script::parse(command.as_str().unwrap()));
            if let Some(missed) = runs.iter().find(|w| !read.contains(w)) {
                wrong.push(format!("{tool} {}: runs {missed:?}, read {read:?}", case["input"]));
            }
        }
        let given: Vec<&str> = asked.paths.iter().map(|p| p.given.as_str()).collect();
        for path in case["paths"].as_array().unwrap() {
            if !given.contains(&path.as_str().unwrap()) {
                wrong.push(format!("{tool} {}: touches {path}, read {given:?}", case["input"]));
            }
        }
        let opaque = tool.contains("__") || tool == "use_mcp_tool";
        if opaque && asked.unread.is_empty() {
            wrong.push(format!("{tool}: an MCP tool's input must be unread"));
        }
    }
    assert!(checked >= 100, "{checked}");
    assert!(wrong.is_empty(), "{} wrong:\n{}", wrong.len(), wrong.join("\n"));
}
