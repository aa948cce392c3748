//! Content digests (AEP-0003 §9.3): SHA-256 over the RFC 8785 canonical JSON of the original
//! content (before redaction), first 16 bytes as 32 lowercase hex characters, no prefix.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// RFC 8785 canonical JSON: keys sorted by UTF-16 code units, no whitespace, numbers printed
/// as JavaScript prints them (`1.0` → `1`).
pub fn canonical_json(value: &Value) -> String {
    serde_jcs::to_string(value).expect("a serde_json::Value always canonicalizes")
}

/// The AEP digest of `value`.
pub fn digest(value: &Value) -> String {
    let hash = Sha256::digest(canonical_json(value).as_bytes());
    hex::encode(&hash[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_vectors() {
        assert_eq!(
            digest(&json!({"command": "npm test"})),
            "9178ac939ad908d8fd89e97596cdc0e5"
        );
        assert_eq!(digest(&json!("ok 42 tests")), "9623cdc86ee0e1f01e338bc35845417f");
    }

    #[test]
    fn canonical_form_is_javascript_compatible() {
        assert_eq!(
            canonical_json(&json!({"b": 1.0, "a": [true, null, "x"]})),
            r#"{"a":[true,null,"x"],"b":1}"#
        );
        // UTF-16 ordering: U+1F600 (surrogates from 0xD83D) sorts before U+E000.
        assert_eq!(
            canonical_json(&json!({"\u{1F600}": 1, "\u{E000}": 2})),
            "{\"\u{1F600}\":1,\"\u{E000}\":2}"
        );
    }
}
