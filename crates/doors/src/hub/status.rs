//! What the hub tap is doing, for `/healthz` and `aep-cline doctor`: connected or not, to
//! which hub (its URL and protocol version, never its token), since when, and the last reason
//! it could not connect.

use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{json, Value};

#[derive(Debug, Default, Clone, Serialize)]
struct Inner {
    connected: bool,
    url: Option<String>,
    protocol: Option<String>,
    hub_id: Option<String>,
    /// When the current connection (or the last one) was made.
    since: Option<String>,
    last_error: Option<String>,
    last_error_at: Option<String>,
    /// The last attempt found Cline's hub not running (not a fault of the setup: the tap
    /// connects when it starts).
    hub_down: bool,
    connections: u64,
}

#[derive(Debug, Default)]
pub struct Status {
    control: bool,
    inner: Mutex<Inner>,
}

impl Status {
    pub fn new(control: bool) -> Self {
        Status {
            control,
            inner: Mutex::default(),
        }
    }

    /// Whether the tap answers (`AEP_CLINE_HUB_CONTROL=1`): the policy's answers and the
    /// budgets' cancels of hub-hosted sessions go through the hub.
    pub fn control(&self) -> bool {
        self.control
    }

    pub fn connected(&self, url: &str, protocol: Option<&str>, hub_id: Option<&str>) {
        let mut s = self.inner.lock();
        s.connected = true;
        s.url = Some(url.to_string());
        s.protocol = protocol.map(str::to_string);
        s.hub_id = hub_id.map(str::to_string);
        s.since = Some(aep_core::id::now_rfc3339());
        s.connections += 1;
        s.hub_down = false;
        // An error from before this connection no longer says what the tap is doing.
        s.last_error = None;
        s.last_error_at = None;
    }

    /// The connection ended, or an attempt failed, for this reason; `hub_down` when no hub runs.
    pub fn failed(&self, why: &str, hub_down: bool) {
        let mut s = self.inner.lock();
        s.connected = false;
        s.hub_down = hub_down;
        s.last_error = Some(why.to_string());
        s.last_error_at = Some(aep_core::id::now_rfc3339());
    }

    pub fn json(&self) -> Value {
        let mut v = json!(self.inner.lock().clone());
        v["control"] = json!(self.control);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_clears_the_error_of_the_attempts_before_it() {
        let status = Status::new(false);
        status.failed("cannot connect to the hub at ws://127.0.0.1:9: refused", true);
        assert!(status.json()["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("refused")));
        assert_eq!(status.json()["hub_down"], true);
        status.connected("ws://127.0.0.1:9", Some("1"), None);
        let now = status.json();
        assert_eq!(now["connected"], true);
        assert!(now["last_error"].is_null() && now["last_error_at"].is_null(), "{now}");
        assert_eq!(now["hub_down"], false);
        status.failed("the hub closed the connection", false);
        assert_eq!(status.json()["last_error"], "the hub closed the connection");
    }
}
