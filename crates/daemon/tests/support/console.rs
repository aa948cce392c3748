//! `aep-cline fleet serve`, the fleet console, run as a child on a loopback port of its own, and
//! its signed-in API read as the page reads it.

use super::daemon::BIN;
use super::endpoint::request;
use super::wait::wait_until_seen;
use serde_json::Value;
use std::time::Duration;

/// `aep-cline fleet serve` against `url` on a free loopback port, stopped when dropped.
pub struct Console {
    child: std::process::Child,
    pub addr: String,
    pub link: String,
}

impl Console {
    /// Starts it and waits for the sign-in link it prints once it has caught up.
    pub fn start(url: &str) -> Console {
        Console::start_with(url, &[], std::process::Stdio::inherit())
    }

    /// [`Console::start`] with more of the environment (a NATS user) and its stderr to `stderr`.
    pub fn start_with(url: &str, env: &[(&str, &str)], stderr: std::process::Stdio) -> Console {
        Console::start_bin(std::path::Path::new(BIN), url, env, stderr)
    }

    /// [`Console::start_with`] running `bin` (a benchmark's release build).
    pub fn start_bin(bin: &std::path::Path, url: &str, env: &[(&str, &str)], stderr: std::process::Stdio) -> Console {
        use std::io::BufRead;
        let addr = format!(
            "127.0.0.1:{}",
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        );
        let mut child = std::process::Command::new(bin)
            .args(["fleet", "serve", "--listen", &addr])
            .env("AEP_NATS_URL", url)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Read on to the end: the console never meets a closed or full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx
            .recv_timeout(Duration::from_secs(180))
            .expect("the console prints its link");
        let link = line.trim().to_string();
        assert!(link.starts_with(&format!("http://{addr}/login?code=")), "{link:?}");
        Console { child, addr, link }
    }

    pub fn get(&self, path: &str, cookie: &str) -> (u16, String, String) {
        request(&self.addr, "GET", path, &[("Cookie", cookie)], b"")
    }

    /// Follows the one-time link; the cookie it sets.
    pub fn sign_in(&self) -> String {
        let (status, head, _) = self.get(self.link.trim_start_matches(&format!("http://{}", self.addr)), "");
        assert_eq!(status, 303, "{head}");
        let set = head.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap();
        set.split(';').next().unwrap().to_string()
    }

    pub fn api(&self, path: &str, cookie: &str) -> Value {
        let (status, _, body) = self.get(path, cookie);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Reads `path` until `done` holds (the console follows the stream and the records).
    pub fn wait_for(&self, path: &str, cookie: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_until_seen(&format!("{path} to show it"), Duration::from_secs(60), || {
            let v = self.api(path, cookie);
            if done(&v) {
                Ok(v)
            } else {
                Err(format!("it shows {v:#}"))
            }
        })
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
