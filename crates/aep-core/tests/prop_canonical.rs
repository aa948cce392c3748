//! Properties the corpus cannot enumerate: canonical JSON (AEP-0003 §9.3) does not depend on
//! the order keys were inserted in, and the redaction pipeline (§9.4) never panics and is
//! idempotent on any text.

use aep_core::digest::{canonical_json, digest};
use aep_core::redact::{RedactOptions, Redactor};
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// A JSON tree whose objects keep their entries as an ordered list, so the same object can be
/// built with its keys inserted in different orders.
#[derive(Debug, Clone)]
enum Tree {
    Leaf(Value),
    Array(Vec<Tree>),
    Object(Vec<(String, Tree)>),
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        // Floats exact in binary, integral ones included (`1.0` must print as `1`).
        (-4_000_000i64..4_000_000).prop_map(|n| Value::from(n as f64 / 4.0)),
        any::<String>().prop_map(Value::from),
    ]
}

fn tree() -> impl Strategy<Value = Tree> {
    leaf().prop_map(Tree::Leaf).prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Tree::Array),
            // Keys include non-BMP and private-use characters, whose UTF-16 order differs
            // from their UTF-8 order.
            prop::collection::btree_map("[a-zA-Z0-9_\u{e000}\u{1F600}é]{0,4}", inner, 0..6)
                .prop_map(|entries| Tree::Object(entries.into_iter().collect())),
        ]
    })
}

/// Builds the tree, inserting each object's keys in the order `order` gives.
fn build(tree: &Tree, order: &dyn Fn(usize) -> Vec<usize>) -> Value {
    match tree {
        Tree::Leaf(value) => value.clone(),
        Tree::Array(items) => Value::Array(items.iter().map(|item| build(item, order)).collect()),
        Tree::Object(entries) => {
            let mut map = Map::new();
            for index in order(entries.len()) {
                let (key, value) = &entries[index];
                map.insert(key.clone(), build(value, order));
            }
            Value::Object(map)
        }
    }
}

/// The same tree written as JSON text with each object's members in the order `order` gives,
/// so the property holds for parsed input too, whatever map `serde_json` is built with.
fn write(tree: &Tree, order: &dyn Fn(usize) -> Vec<usize>) -> String {
    match tree {
        Tree::Leaf(value) => value.to_string(),
        Tree::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|item| write(item, order))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Tree::Object(entries) => {
            let members: Vec<String> = order(entries.len())
                .into_iter()
                .map(|index| {
                    let (key, value) = &entries[index];
                    format!("{}: {}", Value::from(key.as_str()), write(value, order))
                })
                .collect();
            format!("{{ {} }}", members.join(", "))
        }
    }
}

/// A deterministic permutation of `0..n` from `seed`.
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut indices: Vec<usize> = (0..n).collect();
    let mut state = seed | 1;
    for i in (1..n).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        indices.swap(i, (state % (i as u64 + 1)) as usize);
    }
    indices
}

/// Text that exercises the pipeline: fragments of every rule, glued by arbitrary characters.
fn adversarial_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("token"),
        Just("password"),
        Just("DEPLOY_HOOK"),
        Just("="),
        Just(":"),
        Just("\""),
        Just("'"),
        Just(" "),
        Just("\n"),
        Just("--"),
        Just("Bearer "),
        Just("bearer "),
        Just("Authorization: Basic "),
        Just("https://u:"),
        Just("@"),
        Just(".com"),
        Just("/home/"),
        Just("/Users/"),
        Just("/home/operator"),
        Just("~"),
        Just("+1 "),
        Just("(555) "),
        Just("555-123-4567"),
        Just("555"),
        Just("-"),
        Just("."),
        Just("AKIAIOSFODNN7EXAMPLE"),
        Just("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"),
        Just("ghp_AbCdEfGhIjKlMnOpQrStUvWx"),
        Just("sk-"),
        Just("-----BEGIN RSA PRIVATE KEY-----"),
        Just("-----END RSA PRIVATE KEY-----"),
        Just("[REDACTED:secret]"),
        Just("[REDACTED:pii]"),
        Just("["),
        Just("]"),
        Just("s3cr3t"),
        Just("a"),
        Just("x9"),
    ]
    .prop_map(str::to_owned);
    let piece = prop_oneof![3 => fragment, 1 => "\\PC{0,3}", 1 => "[a-z0-9 ]{0,3}"];
    prop::collection::vec(piece, 0..14).prop_map(|pieces| pieces.concat())
}

/// Compiled once, as the daemon does.
static PIPELINE: LazyLock<Redactor> = LazyLock::new(|| {
    Redactor::new(RedactOptions {
        home: Some("/home/operator".into()),
        secret_names: vec!["DEPLOY_HOOK".into()],
        secret_values: vec!["s3cr3t".into()],
        pii: true,
    })
    .expect("valid options")
});

proptest! {
    #[test]
    fn canonical_json_ignores_key_insertion_order(tree in tree(), a in any::<u64>(), b in any::<u64>()) {
        let forward = build(&tree, &|n| (0..n).collect());
        let reverse = build(&tree, &|n| (0..n).rev().collect());
        let shuffled_a = build(&tree, &|n| shuffled(n, a));
        let canonical = canonical_json(&forward);
        prop_assert_eq!(&canonical_json(&reverse), &canonical);
        prop_assert_eq!(&canonical_json(&shuffled_a), &canonical);
        prop_assert_eq!(digest(&reverse), digest(&forward));

        let parsed: Value = serde_json::from_str(&write(&tree, &|n| shuffled(n, b))).expect("written JSON parses");
        prop_assert_eq!(&canonical_json(&parsed), &canonical);
        prop_assert_eq!(digest(&parsed), digest(&forward));

        // The canonical form is itself JSON for the same value, with no whitespace added.
        let reparsed: Value = serde_json::from_str(&canonical).expect("canonical JSON parses");
        prop_assert_eq!(canonical_json(&reparsed), canonical);
    }

    #[test]
    fn redact_text_never_panics_and_is_idempotent_on_any_string(text in any::<String>()) {
        let redactor = &*PIPELINE;
        let once = redactor.redact_text(&text);
        prop_assert_eq!(redactor.redact_text(&once), once);
    }

    #[test]
    fn redact_text_is_idempotent_on_adversarial_text(text in adversarial_text()) {
        let redactor = &*PIPELINE;
        let once = redactor.redact_text(&text);
        prop_assert_eq!(redactor.redact_text(&once), once, "input {:?}", text);
    }
}
