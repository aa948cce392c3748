//! Action links: a notification's approve and deny URLs, which work from another device without
//! the dashboard's cookie. The token in the URL is the authentication: it names one approval
//! (session and `attention.requested` id), one answer and an expiry, and carries an HMAC-SHA256
//! over them with a key drawn from the OS when the daemon starts. The key lives in memory only:
//! a restarted daemon's links are refused, and the hub re-sends what still waits (new requests,
//! new notifications). A link answers once ([`Spent`]).
//!
//! Expiry is judged on the boot clock ([`crate::firing::boot_ns`], suspend included), which no
//! `date` or NTP step moves: at signing the daemon records each link's deadline on it, and a
//! wall clock set back does not revive an expired link. The signed wall-clock expiry decides
//! only for a link whose record was let go ([`MAX_ISSUED`]).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use parking_lot::Mutex;
use sha2::Sha256;
use std::collections::HashMap;

type HmacSha256 = Hmac<Sha256>;

/// Domain separation: this key signs nothing else.
const CONTEXT: &[u8] = b"aep-cline notification link v1\0";
/// Spent links remembered at once (each until its expiry).
const MAX_SPENT: usize = 16_384;
/// Issued links whose boot-clock deadline is remembered at once (the nearest deadline goes).
const MAX_ISSUED: usize = 16_384;

/// Now, on both clocks a link's expiry is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Unix seconds (the signed expiry's clock, shown to people).
    pub wall: u64,
    /// Nanoseconds since boot ([`crate::firing::boot_ns`]): never steps back.
    pub boot_ns: u64,
}

impl Now {
    pub fn read() -> Now {
        Now {
            wall: super::now_s(),
            boot_ns: crate::firing::boot_ns(),
        }
    }
}

/// The answer a link gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Approve,
    Deny,
}

impl Answer {
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Approve => "approve",
            Answer::Deny => "deny",
        }
    }
}

/// What a link is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub session: String,
    /// The `attention.requested` Event id (the command's `subject`).
    pub request: String,
    pub answer: Answer,
    /// Unix seconds after which the link is refused.
    pub expires: u64,
}

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("this link was not made by this daemon (or was changed, or the daemon restarted since)")]
    Forged,
    #[error("this link has expired")]
    Expired,
}

/// Signs and checks links.
pub struct Signer {
    key: [u8; 32],
    /// Each issued link's deadline on the boot clock, by its signature.
    issued: Mutex<HashMap<[u8; 32], u64>>,
}

impl Signer {
    /// A fresh key from the OS's random source.
    pub fn generate() -> anyhow::Result<Signer> {
        let key =
            crate::secret::try_key().map_err(|e| anyhow::anyhow!("cannot draw a key for notification links: {e}"))?;
        Ok(Signer {
            key,
            issued: Mutex::new(HashMap::new()),
        })
    }

    fn mac(&self, payload: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes a key of any length");
        mac.update(CONTEXT);
        mac.update(payload);
        mac
    }

    /// The token: `payload.signature`, both base64url (the payload's fields `\0`-separated).
    /// Its deadline on the boot clock is recorded as of `now`.
    pub fn sign(&self, link: &Link, now: Now) -> String {
        let payload = format!(
            "{}\0{}\0{}\0{}",
            link.answer.as_str(),
            link.expires,
            link.session,
            link.request
        );
        let tag: [u8; 32] = self.mac(payload.as_bytes()).finalize().into_bytes().into();
        let deadline = now
            .boot_ns
            .saturating_add(link.expires.saturating_sub(now.wall).saturating_mul(1_000_000_000));
        let mut issued = self.issued.lock();
        if issued.len() >= MAX_ISSUED {
            issued.retain(|_, d| *d >= now.boot_ns);
            if issued.len() >= MAX_ISSUED {
                if let Some(nearest) = issued.iter().min_by_key(|(_, d)| **d).map(|(t, _)| *t) {
                    issued.remove(&nearest);
                }
            }
        }
        issued.insert(tag, deadline);
        format!("{}.{}", URL_SAFE_NO_PAD.encode(payload), URL_SAFE_NO_PAD.encode(tag))
    }

    /// The link a token names, if this daemon signed it and it has not expired at `now`: by
    /// the boot clock when its issue is recorded, else by the signed wall-clock expiry. The
    /// signature is checked in constant time, before anything else is read.
    pub fn verify(&self, token: &str, now: Now) -> Result<Link, Refused> {
        let (payload, tag) = token.split_once('.').ok_or(Refused::Forged)?;
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| Refused::Forged)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| Refused::Forged)?;
        self.mac(&payload).verify_slice(&tag).map_err(|_| Refused::Forged)?;
        let payload = String::from_utf8(payload).map_err(|_| Refused::Forged)?;
        let mut fields = payload.splitn(4, '\0');
        let mut next = || fields.next().ok_or(Refused::Forged);
        let answer = match next()? {
            "approve" => Answer::Approve,
            "deny" => Answer::Deny,
            _ => return Err(Refused::Forged),
        };
        let expires = next()?.parse().map_err(|_| Refused::Forged)?;
        let (session, request) = (next()?.to_string(), next()?.to_string());
        let deadline = <[u8; 32]>::try_from(tag.as_slice())
            .ok()
            .and_then(|tag| self.issued.lock().get(&tag).copied());
        let expired = match deadline {
            Some(deadline) => now.boot_ns > deadline,
            None => now.wall > expires,
        };
        if expired {
            return Err(Refused::Expired);
        }
        Ok(Link {
            session,
            request,
            answer,
            expires,
        })
    }
}

/// Links used already, each kept until it would have expired anyway.
#[derive(Default)]
pub struct Spent {
    used: Mutex<HashMap<String, u64>>,
}

impl Spent {
    /// Marks `token` used; `false` when it was used already.
    pub fn spend(&self, token: &str, expires: u64, now: u64) -> bool {
        let mut used = self.used.lock();
        if used.contains_key(token) {
            return false;
        }
        if used.len() >= MAX_SPENT {
            used.retain(|_, e| *e >= now);
        }
        if used.len() >= MAX_SPENT {
            // Still full of live links: the one nearest its expiry goes (it may then be
            // presented again, and the intake refuses a second answer to one approval).
            if let Some(oldest) = used.iter().min_by_key(|(_, e)| **e).map(|(t, _)| t.clone()) {
                used.remove(&oldest);
            }
        }
        used.insert(token.to_string(), expires);
        true
    }

    pub fn is_spent(&self, token: &str) -> bool {
        self.used.lock().contains_key(token)
    }

    /// Gives a link back: its answer was refused before anything was decided (the hub was
    /// away), so the person may try it again.
    pub fn unspend(&self, token: &str) {
        self.used.lock().remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            session: "1796007302932_yw1yh".into(),
            request: "01KB0000000000000000000000".into(),
            answer: Answer::Approve,
            expires: 1_000,
        }
    }

    /// `wall` Unix seconds, the boot clock at `boot` seconds.
    fn at(wall: u64, boot: u64) -> Now {
        Now {
            wall,
            boot_ns: boot * 1_000_000_000,
        }
    }

    #[test]
    fn a_signed_link_verifies_until_it_expires() {
        let signer = Signer::generate().unwrap();
        // Signed at 400 (boot clock at 50): it expires 600 s later on both clocks.
        let token = signer.sign(&link(), at(400, 50));
        assert!(
            token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "URL-safe: {token}"
        );
        assert_eq!(signer.verify(&token, at(999, 649)), Ok(link()));
        assert_eq!(signer.verify(&token, at(1_000, 650)), Ok(link()));
        assert_eq!(signer.verify(&token, at(1_001, 651)), Err(Refused::Expired));
    }

    #[test]
    fn a_wall_clock_set_back_does_not_revive_an_expired_link() {
        let signer = Signer::generate().unwrap();
        let token = signer.sign(&link(), at(400, 50));
        // 601 s later by the boot clock, the wall clock set back to the issue: still expired.
        assert_eq!(signer.verify(&token, at(401, 651)), Err(Refused::Expired));
        assert_eq!(signer.verify(&token, at(0, 10_000)), Err(Refused::Expired));
        // Nor does a wall clock set forward expire it early.
        assert_eq!(signer.verify(&token, at(1_001 + 3_600, 649)), Ok(link()));
        // A link this daemon holds no record of (a record let go) falls back to its signed expiry.
        let unrecorded = Signer {
            key: signer.key,
            issued: Mutex::new(HashMap::new()),
        };
        assert_eq!(unrecorded.verify(&token, at(1_000, 10_000)), Ok(link()));
        assert_eq!(unrecorded.verify(&token, at(1_001, 0)), Err(Refused::Expired));
    }

    #[test]
    fn the_issue_records_stay_bounded() {
        let signer = Signer::generate().unwrap();
        for n in 0..MAX_ISSUED as u64 + 10 {
            let link = Link {
                request: format!("r{n}"),
                ..link()
            };
            signer.sign(&link, at(400, 1));
        }
        assert_eq!(signer.issued.lock().len(), MAX_ISSUED);
    }

    #[test]
    fn changed_foreign_or_malformed_tokens_are_forged() {
        let signer = Signer::generate().unwrap();
        let token = signer.sign(&link(), at(0, 0));
        // Another daemon (or this one after a restart) has another key.
        let other = Signer::generate().unwrap();
        assert_eq!(other.verify(&token, at(0, 0)), Err(Refused::Forged));
        // The answer flipped, the expiry stretched, the approval swapped: the signature no longer fits.
        let (_, tag) = token.split_once('.').unwrap();
        for payload in [
            "deny\u{0}1000\u{0}1796007302932_yw1yh\u{0}01KB0000000000000000000000",
            "approve\u{0}9999999999\u{0}1796007302932_yw1yh\u{0}01KB0000000000000000000000",
            "approve\u{0}1000\u{0}1796007302932_yw1yh\u{0}01KBOTHER",
        ] {
            let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(payload));
            assert_eq!(signer.verify(&forged, at(0, 0)), Err(Refused::Forged), "{payload:?}");
        }
        for junk in ["", ".", "abc", "a.b", "%%%.%%%", &format!("{token}x")] {
            assert_eq!(signer.verify(junk, at(0, 0)), Err(Refused::Forged), "{junk:?}");
        }
        // An expired AND forged link says forged: the expiry is read only once it is signed.
        assert_eq!(other.verify(&token, at(5_000, 5_000)), Err(Refused::Forged));
    }

    #[test]
    fn a_link_is_spent_once_and_can_be_given_back() {
        let spent = Spent::default();
        assert!(spent.spend("t", 10, 0));
        assert!(!spent.spend("t", 10, 0));
        spent.unspend("t");
        assert!(spent.spend("t", 10, 0));
    }
}
