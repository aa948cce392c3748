//! A webhook receiver on 127.0.0.1 for the notification tests (`AEP_CLINE_NOTIFY`): a port of
//! its own, every POST answered 200 and handed to the test.

use serde_json::Value;
use std::time::Duration;

/// A webhook receiver on 127.0.0.1: every POST's path and JSON body, in order.
pub struct Receiver {
    pub url: String,
    bodies: std::sync::mpsc::Receiver<(String, Value)>,
}

impl Receiver {
    pub fn start() -> Receiver {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("a receiver port");
        let url = format!("http://{}", server.server_addr().to_ip().unwrap());
        let (tx, bodies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for mut request in server.incoming_requests() {
                let mut body = String::new();
                let _ = std::io::Read::read_to_string(request.as_reader(), &mut body);
                let path = request.url().to_string();
                let _ = request.respond(tiny_http::Response::empty(200));
                let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                if tx.send((path, body)).is_err() {
                    return;
                }
            }
        });
        Receiver { url, bodies }
    }

    pub fn next(&self, what: &str) -> (String, Value) {
        self.bodies
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no notification for {what} within 60 s"))
    }
}
