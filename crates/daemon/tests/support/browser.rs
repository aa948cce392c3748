//! A real browser for the dashboard tests: Debian's headless Chromium driven through
//! chromedriver (WebDriver) by `fantoccini`. Both come from Debian's `chromium` and
//! `chromium-driver` packages (`.ci/run` installs them). The tests FAIL when they are missing,
//! never skip: a green run must mean a browser really clicked the buttons.
//!
//! `AEP_CLINE_TEST_CHROMEDRIVER` and `AEP_CLINE_TEST_CHROMIUM` name other binaries.

use super::free_port;
use super::wait::{wait_until_async, wait_until_seen_every_async};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn binary(env: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(env)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    assert!(
        path.is_file(),
        "{} is not there ({env}): install Debian's chromium and chromium-driver packages \
         (`apt-get install chromium chromium-driver`, as .ci/run does). Browser tests never skip.",
        path.display()
    );
    path
}

/// chromedriver and one headless Chromium session; both end when this is dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        let driver_bin = binary("AEP_CLINE_TEST_CHROMEDRIVER", "/usr/bin/chromedriver");
        let chromium = binary("AEP_CLINE_TEST_CHROMIUM", "/usr/bin/chromium");
        let port = free_port();
        // Its own process group, which the browser it starts joins: ending the group ends every
        // Chromium process too, whatever state the test left them in.
        let driver = Command::new(driver_bin)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromedriver");
        wait_until_async(
            &format!("chromedriver to listen on {port}"),
            Duration::from_secs(20),
            async || std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(drop),
        )
        .await;
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", "--no-first-run", "--disable-extensions",
                         format!("--user-data-dir={}", profile.path().display())],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a WebDriver session with headless Chromium");
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    /// Evaluates `script` (a function body; `arguments` are `args`) in the page.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.expect("script ran")
    }

    /// Waits (up to `secs`) until `script` returns a truthy value; panics naming `what`.
    /// Each look that fails also reads the page's text (what the panic shows): every 100 ms.
    pub async fn until(&self, what: &str, secs: u64, script: &str) -> Value {
        wait_until_seen_every_async(
            what,
            Duration::from_secs(secs),
            Duration::from_millis(100),
            async || {
                let v = self.client.execute(script, vec![]).await.unwrap_or(Value::Null);
                let truthy = !matches!(&v, Value::Null | Value::Bool(false)) && v != json!("") && v != json!(0);
                if truthy {
                    return Ok(v);
                }
                let body = self
                    .client
                    .execute("return document.body ? document.body.innerText : ''", vec![])
                    .await
                    .unwrap_or_default();
                Err(format!("the page shows:\n{}", body.as_str().unwrap_or_default()))
            },
        )
        .await
    }

    /// Clicks the first element matching the CSS selector (found again if the page redrew it
    /// between the find and the click).
    pub async fn click(&self, css: &str) {
        let mut tries = 0;
        loop {
            tries += 1;
            let found = self.client.find(Locator::Css(css)).await;
            let clicked = match found {
                Ok(element) => element.click().await,
                Err(e) => Err(e),
            };
            match clicked {
                Ok(()) => return,
                Err(e) if tries >= 5 => panic!("cannot click {css}: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Saves a screenshot of the page: into `docs/` when AEP_CLINE_UPDATE_SCREENSHOTS=1 (to be
    /// committed), else under the target folder.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = if std::env::var_os("AEP_CLINE_UPDATE_SCREENSHOTS").is_some_and(|v| v == "1") {
            root.join("docs")
        } else {
            root.join("target/screenshots")
        };
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap();
        path
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
        // Drop ends the rest.
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver and every Chromium process it started (std has no killpg).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.wait();
    }
}
