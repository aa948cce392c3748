//! The AEP redaction corpus (`conformance/fixtures/redaction/cases.json`, AEP-0003 §9.4): every
//! text and value case, with the options each case pins, plus the operator options, idempotence
//! and odd-input behaviour the corpus leaves to implementations.

use aep_core::redact::{RedactError, RedactOptions, Redactor, PII, SECRET};
use serde_json::{json, Value};

const CASES: &str = include_str!("../../../conformance/fixtures/redaction/cases.json");

/// The case's `opts` as [`RedactOptions`]; an option this test does not know fails the case
/// rather than being ignored.
fn options(case: &Value) -> Result<RedactOptions, String> {
    let mut options = RedactOptions::default();
    let Some(opts) = case.get("opts") else {
        return Ok(options);
    };
    let opts = opts.as_object().ok_or("opts is not an object")?;
    for (key, value) in opts {
        match key.as_str() {
            "home" => options.home = Some(value.as_str().ok_or("opts.home is not a string")?.to_owned()),
            "pii" => options.pii = value.as_bool().ok_or("opts.pii is not a boolean")?,
            "secretValues" => options.secret_values = strings(value).ok_or("opts.secretValues is not strings")?,
            "secretNames" => options.secret_names = strings(value).ok_or("opts.secretNames is not strings")?,
            other => return Err(format!("unknown option {other:?}: teach this test what it means")),
        }
    }
    Ok(options)
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value
        .as_array()?
        .iter()
        .map(|item| item.as_str().map(str::to_owned))
        .collect()
}

/// Checks `output` against the case's `must_contain` / `must_not_contain`; returns the failures.
fn check(case: &Value, output: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for (field, wanted) in [("must_contain", true), ("must_not_contain", false)] {
        let needles = case
            .get(field)
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for needle in needles {
            let Some(needle) = needle.as_str() else {
                failures.push(format!("{field} holds a non-string {needle}"));
                continue;
            };
            if output.contains(needle) != wanted {
                failures.push(format!("{field} {needle:?} violated by output {output:?}"));
            }
        }
    }
    failures
}

/// Runs one case list; returns how many cases ran and every failure, named by case.
fn run(kind: &str, redact: impl Fn(&Redactor, &Value) -> Result<String, String>) -> (usize, Vec<String>) {
    let corpus: Value = serde_json::from_str(CASES).expect("the vendored redaction corpus is JSON");
    let cases = corpus[kind]
        .as_array()
        .unwrap_or_else(|| panic!("the corpus has no {kind} array"));
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap_or("<unnamed>");
        let outcome = options(case)
            .and_then(|options| Redactor::new(options).map_err(|err| err.to_string()))
            .and_then(|redactor| redact(&redactor, &case["input"]))
            .map(|output| check(case, &output));
        match outcome {
            Ok(case_failures) => failures.extend(case_failures.into_iter().map(|f| format!("{kind} {name:?}: {f}"))),
            Err(err) => failures.push(format!("{kind} {name:?}: {err}")),
        }
    }
    (cases.len(), failures)
}

#[test]
fn corpus_text_cases() {
    let (count, failures) = run("text_cases", |redactor, input| {
        let text = input.as_str().ok_or("input is not a string")?;
        Ok(redactor.redact_text(text))
    });
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(count, 28, "the corpus has 28 text cases; every one must run");
}

#[test]
fn corpus_value_cases() {
    let (count, failures) = run("value_cases", |redactor, input| {
        let output = redactor.redact_value(input);
        // Redacting a value never changes its shape: same keys, same array lengths.
        if !same_shape(input, &output) {
            return Err(format!("shape changed: {input} became {output}"));
        }
        Ok(output.to_string())
    });
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(count, 5, "the corpus has 5 value cases; every one must run");
}

fn same_shape(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => a.keys().eq(b.keys()),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len(),
        _ => true,
    }
}

fn redactor(options: RedactOptions) -> Redactor {
    Redactor::new(options).expect("valid options")
}

#[test]
fn operator_secret_values_are_replaced_wherever_they_occur() {
    let r = redactor(RedactOptions {
        secret_values: vec!["hunter2".into(), "hunter2-long".into(), "a.b*c".into(), String::new()],
        ..RedactOptions::default()
    });
    assert_eq!(
        r.redact_text("x hunter2-long y hunter2"),
        format!("x {SECRET} y {SECRET}")
    );
    // Escaped, not regex syntax: `a.b*c` matches only itself.
    assert_eq!(r.redact_text("a.b*c axbbc"), format!("{SECRET} axbbc"));
    // The empty value is ignored, not matched between every character.
    assert_eq!(r.redact_text("plain"), "plain");
    assert_eq!(
        r.redact_value(&json!({"argv": ["--x", "hunter2"]})),
        json!({"argv": ["--x", SECRET]})
    );
}

#[test]
fn operator_secret_value_is_never_left_half_redacted() {
    // An AWS key id inside the operator's value: the generic rule must not take part of it.
    let r = redactor(RedactOptions {
        secret_values: vec!["Zq9-AKIAIOSFODNN7EXAMPLE".into()],
        ..Default::default()
    });
    assert_eq!(r.redact_text("k=Zq9-AKIAIOSFODNN7EXAMPLE;"), format!("k={SECRET};"));
    // A URL with a password inside: rule (a) alone would leave the user and host.
    let url = "postgres://admin:pw@db.internal/prod";
    let r = redactor(RedactOptions {
        secret_values: vec![url.into()],
        ..Default::default()
    });
    assert_eq!(
        r.redact_text(&format!("connect {url} now")),
        format!("connect {SECRET} now")
    );
    // A value that is also a credential name: what it names stays secret.
    let r = redactor(RedactOptions {
        secret_values: vec!["secret".into()],
        ..Default::default()
    });
    assert_eq!(r.redact_text("secret=abc"), format!("{SECRET}={SECRET}"));
}

#[test]
fn operator_secret_names_redact_their_assignments_and_keys() {
    let r = redactor(RedactOptions {
        secret_names: vec!["DEPLOY_HOOK".into(), "db.url".into()],
        ..Default::default()
    });
    assert_eq!(
        r.redact_text("export DEPLOY_HOOK=https://h.test/x ok"),
        format!("export DEPLOY_HOOK={SECRET} ok")
    );
    assert_eq!(
        r.redact_text(r#"{"deploy_hook": "v1", "n": 2}"#),
        format!(r#"{{"deploy_hook": "{SECRET}", "n": 2}}"#)
    );
    assert_eq!(r.redact_text("db.url:\n  postgres://x"), format!("db.url:\n  {SECRET}"));
    // Escaped: `.` is literal, and the name must start at a word boundary.
    assert_eq!(
        r.redact_text("dbXurl=1 MY_DEPLOY_HOOK_2=3"),
        "dbXurl=1 MY_DEPLOY_HOOK_2=3"
    );
    assert_eq!(
        r.redact_value(&json!({"Deploy_Hook": {"nested": 1}, "other": "x"})),
        json!({"Deploy_Hook": SECRET, "other": "x"})
    );
    // Without the option, the same text passes.
    assert_eq!(
        redactor(RedactOptions::default()).redact_text("DEPLOY_HOOK=x"),
        "DEPLOY_HOOK=x"
    );
}

#[test]
fn operator_secrets_never_rewrite_markers() {
    let r = redactor(RedactOptions {
        secret_values: vec!["pii".into(), "REDACTED".into()],
        secret_names: vec!["REDACTED".into()],
        ..Default::default()
    });
    let once = r.redact_text("pii REDACTED=x a@b.test");
    assert_eq!(once, format!("{SECRET} {SECRET}={SECRET} {PII}"));
    assert_eq!(r.redact_text(&once), once);
}

#[test]
fn pii_off_keeps_emails_and_phones_but_still_redacts_secrets() {
    let r = redactor(RedactOptions {
        pii: false,
        ..Default::default()
    });
    let text = "mail ops@example.com, call +1 (555) 123-4567, key AKIAIOSFODNN7EXAMPLE";
    assert_eq!(
        r.redact_text(text),
        format!("mail ops@example.com, call +1 (555) 123-4567, key {SECRET}")
    );
    let on = redactor(RedactOptions::default()).redact_text(text);
    assert_eq!(on, format!("mail {PII}, call {PII}, key {SECRET}"));
}

#[test]
fn too_large_operator_secrets_are_an_error_not_a_panic() {
    // A whole file pasted in as one secret value: 1 MiB of literal is over the regex size limit.
    let secret_values = vec![format!("secret-value-{}", "x".repeat(1 << 20))];
    let err = Redactor::new(RedactOptions {
        secret_values,
        ..Default::default()
    })
    .expect_err("over the size limit");
    assert!(matches!(err, RedactError::TooLarge { list: "values", .. }), "{err:?}");
    assert!(
        !err.to_string().contains("secret-value-"),
        "the error must not echo secrets: {err}"
    );
    assert!(
        err.to_string().contains("fewer or shorter"),
        "the error says what to do: {err}"
    );
}

#[test]
fn redacting_twice_is_redacting_once() {
    let r = redactor(RedactOptions {
        home: Some("/home/operator".into()),
        secret_names: vec!["DEPLOY_HOOK".into()],
        secret_values: vec!["s3cr3t-deploy".into()],
        pii: true,
    });
    let corpus: Value = serde_json::from_str(CASES).expect("corpus");
    let mut texts: Vec<String> = corpus["text_cases"]
        .as_array()
        .expect("text cases")
        .iter()
        .map(|c| c["input"].as_str().unwrap().to_owned())
        .collect();
    texts.extend(
        [
            "token=\n\nnext",
            "/home/operator/home/alice/x /x/home//home/y",
            "Bearer Bearer abc",
            "password: \"a\\\"b\" DEPLOY_HOOK: 'x y' s3cr3t-deploy",
            "+1 555 123 4567+1 555 123 4567 555-123-4567555-123-4567",
            "a@b.co/home/x x@y.com/home/operator",
            // (c) completes an (a) match: found by the property test.
            "https://u:/home/operator[REDACTED:secret]@",
        ]
        .map(str::to_owned),
    );
    for text in &texts {
        let once = r.redact_text(text);
        assert_eq!(r.redact_text(&once), once, "not idempotent on {text:?}");
    }
    let value = json!({"token": 1, "a": ["--token", "x", {"k": "AKIAIOSFODNN7EXAMPLE /home/bob"}]});
    let once = r.redact_value(&value);
    assert_eq!(r.redact_value(&once), once);
}

#[test]
fn odd_unicode_never_panics_and_passes_through() {
    let r = redactor(RedactOptions {
        home: Some("/home/opé".into()),
        ..Default::default()
    });
    for text in [
        "",
        "\u{0}\u{1}\u{7f}",
        "e\u{301}\u{301}\u{301} z\u{200d}w\u{200d}j \u{feff}bom",
        "مرحبا \u{202e}reversed\u{202c} עברית",
        "🦀🧑‍🚀👩🏽‍💻 ﷽",
        "５５５-１２３-４５６７ full-width digits",
        "\u{10ffff}\u{e000}\u{fffd}",
    ] {
        assert_eq!(r.redact_text(text), text);
    }
    assert_eq!(
        r.redact_text("/home/opé/файл token=ключ🔑"),
        format!("~/файл token={SECRET}")
    );
    assert_eq!(r.redact_text("é/home/opé"), "é~");
}

#[test]
fn object_keys_are_redacted_too_and_never_collide() {
    let r = redactor(RedactOptions {
        home: Some("/home/bob".into()),
        pii: true,
        ..Default::default()
    });
    let value = json!({
        "AKIAJ7EXAMPLEKEY1234": 2,
        "bob.key@example.org": 1,
        "ann@example.org": {"nested@example.org": "x"},
        "/home/bob/notes": 3,
        "~/notes": 4,
        "password": "hunter2",
        "plain": "kept",
    });
    let out = r.redact_value(&value);
    assert_eq!(
        out,
        json!({
            SECRET: 2,
            PII: {PII: "x"},
            format!("{PII}#2"): 1,
            "~/notes": 4,
            "~/notes#2": 3,
            "password": SECRET,
            "plain": "kept",
        }),
        "{out}"
    );
    let text = out.to_string();
    for leaked in ["AKIAJ7", "bob.key", "ann@", "/home/bob"] {
        assert!(!text.contains(leaked), "{leaked} in {text}");
    }
    assert_eq!(r.redact_value(&out), out, "idempotent");
}
