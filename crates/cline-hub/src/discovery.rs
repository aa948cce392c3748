//! Where the hub is and how to authenticate to it: the vendor's discovery file
//! (`$CLINE_DIR/data/locks/hub/production.json` on CLI 3.0.65), or a URL and token given
//! directly. The adapter reads only the path it is given: the vendor names the file per
//! launching program, and a fail-open observer does not guess files in the vendor's data
//! directory (design record, "Gates").
//!
//! The token is a bearer secret: [`Token`] never prints it.

use crate::frame::{AUTH_SUBPROTOCOL_PREFIX, PROTOCOL_VERSION};
use serde::Deserialize;
use std::fmt;

/// The hub's bearer token. `Debug` and `Display` print `<redacted>`, so it cannot reach a log
/// by accident; [`Token::subprotocol`] is the one place it is spelled out.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// A token usable in the WebSocket subprotocol header: non-empty, visible ASCII without
    /// spaces or separators.
    pub fn new(token: &str) -> Result<Token, DiscoveryError> {
        let token = token.trim();
        let usable = !token.is_empty()
            && token
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?={}".contains(&b));
        if usable {
            Ok(Token(token.to_string()))
        } else {
            Err(DiscoveryError::BadToken)
        }
    }

    /// `cline-hub-auth.<token>`, the subprotocol the hub authenticates the upgrade with.
    pub fn subprotocol(&self) -> String {
        format!("{AUTH_SUBPROTOCOL_PREFIX}{}", self.0)
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A hub to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub token: Token,
    /// The discovery file's `protocolVersion` (absent when the URL was given directly).
    pub protocol_version: Option<String>,
    /// Oldest and newest client protocol versions the hub accepts, when it says.
    pub client_versions: Option<(String, String)>,
    /// The hub instance: a restarted hub has a new id and restarts its event sequence.
    pub hub_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    #[error("the hub discovery file is not JSON ({0}); is this the file `cline hub ensure` writes?")]
    NotJson(String),
    #[error("the hub discovery file has no `{0}`; is this the file `cline hub ensure` writes?")]
    Missing(&'static str),
    #[error("the hub URL {0:?} is not a ws:// or wss:// URL")]
    BadUrl(String),
    #[error("the hub token is empty or has characters a WebSocket subprotocol cannot carry")]
    BadToken,
}

/// The hub speaks a protocol version this client does not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the hub speaks protocol {found} and this client {PROTOCOL_VERSION}: the hub tap stays off (observe-only); \
     use Cline CLI 3.0.65's hub or an aep-cline that supports {found}"
)]
pub struct VersionMismatch {
    pub found: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    url: Option<String>,
    auth_token: Option<String>,
    protocol_version: Option<String>,
    min_client_protocol_version: Option<String>,
    max_client_protocol_version: Option<String>,
    hub_id: Option<String>,
}

impl Endpoint {
    /// A hub named directly (`AEP_CLINE_HUB_URL` + `AEP_CLINE_HUB_TOKEN`).
    pub fn direct(url: &str, token: &str) -> Result<Endpoint, DiscoveryError> {
        Ok(Endpoint {
            url: checked_url(url)?,
            token: Token::new(token)?,
            protocol_version: None,
            client_versions: None,
            hub_id: None,
        })
    }

    /// A hub described by its discovery file's bytes.
    pub fn from_discovery(bytes: &[u8]) -> Result<Endpoint, DiscoveryError> {
        let file: File = serde_json::from_slice(bytes).map_err(|e| DiscoveryError::NotJson(e.to_string()))?;
        let url = file.url.ok_or(DiscoveryError::Missing("url"))?;
        let token = file.auth_token.ok_or(DiscoveryError::Missing("authToken"))?;
        Ok(Endpoint {
            url: checked_url(&url)?,
            token: Token::new(&token)?,
            protocol_version: file.protocol_version,
            client_versions: file.min_client_protocol_version.zip(file.max_client_protocol_version),
            hub_id: file.hub_id,
        })
    }

    /// Whether this client can speak to the hub: its `protocolVersion` is ours, or ours lies
    /// within the client versions it accepts. Unknown (a direct URL) passes; the frames'
    /// envelope versions are checked as they arrive.
    pub fn check_version(&self) -> Result<(), VersionMismatch> {
        let Some(found) = &self.protocol_version else {
            return Ok(());
        };
        let ours = version_number(PROTOCOL_VERSION);
        let accepted = match &self.client_versions {
            Some((min, max)) => match (version_number(min), version_number(max)) {
                (Some(min), Some(max)) => ours.is_some_and(|v| min <= v && v <= max),
                _ => false,
            },
            None => false,
        };
        if found == PROTOCOL_VERSION || accepted {
            Ok(())
        } else {
            Err(VersionMismatch { found: found.clone() })
        }
    }
}

fn version_number(v: &str) -> Option<u32> {
    v.strip_prefix('v')?.parse().ok()
}

fn checked_url(url: &str) -> Result<String, DiscoveryError> {
    let url = url.trim();
    if url.starts_with("ws://") || url.starts_with("wss://") {
        Ok(url.to_string())
    } else {
        Err(DiscoveryError::BadUrl(url.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = r#"{"hubId":"hub_1","protocolVersion":"v1","minClientProtocolVersion":"v1",
        "maxClientProtocolVersion":"v1","authToken":"e457a0193b9df9a0d5be202c706cc37864715762f4e8845656661dde030abe7e",
        "host":"127.0.0.1","port":25463,"url":"ws://127.0.0.1:25463/hub","pid":1}"#;

    #[test]
    fn the_real_discovery_file_parses_and_the_token_never_prints() {
        let e = Endpoint::from_discovery(REAL.as_bytes()).unwrap();
        assert_eq!(e.url, "ws://127.0.0.1:25463/hub");
        assert_eq!(e.hub_id.as_deref(), Some("hub_1"));
        assert_eq!(e.check_version(), Ok(()));
        assert!(e.token.subprotocol().starts_with("cline-hub-auth.e457a019"));
        let shown = format!("{e:?} {}", e.token);
        assert!(!shown.contains("e457a019"), "{shown}");
    }

    #[test]
    fn bad_discovery_files_say_what_is_wrong() {
        assert!(matches!(
            Endpoint::from_discovery(b"{"),
            Err(DiscoveryError::NotJson(_))
        ));
        assert_eq!(
            Endpoint::from_discovery(br#"{"url":"ws://h/hub"}"#),
            Err(DiscoveryError::Missing("authToken"))
        );
        assert_eq!(
            Endpoint::from_discovery(br#"{"authToken":"abc"}"#),
            Err(DiscoveryError::Missing("url"))
        );
        assert_eq!(
            Endpoint::from_discovery(br#"{"url":"http://h/hub","authToken":"abc"}"#),
            Err(DiscoveryError::BadUrl("http://h/hub".into()))
        );
        assert_eq!(Endpoint::direct("ws://h/hub", "a b"), Err(DiscoveryError::BadToken));
        assert_eq!(Endpoint::direct("ws://h/hub", ""), Err(DiscoveryError::BadToken));
    }

    #[test]
    fn another_protocol_version_is_a_mismatch_unless_the_hub_still_accepts_ours() {
        let with = |v: &str, range: Option<(&str, &str)>| Endpoint {
            protocol_version: Some(v.into()),
            client_versions: range.map(|(a, b)| (a.into(), b.into())),
            ..Endpoint::direct("ws://h/hub", "t").unwrap()
        };
        assert_eq!(with("v1", None).check_version(), Ok(()));
        assert_eq!(
            with("v2", None).check_version(),
            Err(VersionMismatch { found: "v2".into() })
        );
        assert_eq!(with("v2", Some(("v1", "v2"))).check_version(), Ok(()));
        assert!(with("v3", Some(("v2", "v3"))).check_version().is_err());
        assert!(with("v2", Some(("odd", "v2"))).check_version().is_err());
        assert_eq!(Endpoint::direct("ws://h/hub", "t").unwrap().check_version(), Ok(()));
    }
}
