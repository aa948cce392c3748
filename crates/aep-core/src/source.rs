//! The `source` URI (AEP-0001 §5, attribute 6): `aep://{host}/agent/{agent}/session/{session}`
//! for session-scoped Events, `aep://{host}/agent/{agent}` for agent-scoped ones and commands.
//! Segments are percent-encoded so an odd session id (spaces, slashes, unicode) still yields a
//! valid URI.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but RFC 3986 unreserved characters is encoded.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

fn encode(segment: &str) -> String {
    utf8_percent_encode(segment, SEGMENT).to_string()
}

/// `aep://{host}/agent/{agent}`.
pub fn agent_source(host: &str, agent: &str) -> String {
    format!("aep://{}/agent/{}", encode(host), encode(agent))
}

/// `aep://{host}/agent/{agent}/session/{session}`.
pub fn session_source(host: &str, agent: &str, session: &str) -> String {
    format!("{}/session/{}", agent_source(host, agent), encode(session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_pass_and_odd_ones_are_encoded() {
        assert_eq!(
            session_source("host-a", "cline", "1700_abc"),
            "aep://host-a/agent/cline/session/1700_abc"
        );
        assert_eq!(
            session_source("h", "cline", "a b/c?d#é"),
            "aep://h/agent/cline/session/a%20b%2Fc%3Fd%23%C3%A9"
        );
        assert_eq!(agent_source("h", "cline"), "aep://h/agent/cline");
    }
}
