//! A real `nats-server -js` (Debian's package; `.ci/run` installs it) on a free loopback port
//! with its store in a temporary folder, killed when dropped: for the NATS sink's, the fleet's
//! and the end-to-end suites.

pub use super::free_port;
use super::wait::wait_until;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One `nats-server -js`, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    store: PathBuf,
    args: Vec<String>,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("js");
        let port = free_port();
        let mut server = Server::spawn(port, store, args.iter().map(|a| a.to_string()).collect());
        server._dir = Some(dir);
        server
    }

    pub fn spawn(port: u16, store: PathBuf, args: Vec<String>) -> Server {
        let child = spawn_server(port, &store, &args);
        Server {
            child,
            port,
            store,
            args,
            _dir: None,
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Killed at once (SIGKILL: no clean shutdown), the store kept.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The same server again: same port, same store.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// Stopped as an operator stops it (SIGTERM: the server shuts down cleanly), the store kept.
    pub fn terminate(&mut self) {
        // SAFETY: a plain kill(2) of our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }

    /// Started again on the same port and store after [`Server::kill`] or [`Server::terminate`].
    pub fn start_again(&mut self) {
        self.child = spawn_server(self.port, &self.store, &self.args);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `nats-server -js` on `port` with its store in `store`, once it listens.
fn spawn_server(port: u16, store: &std::path::Path, args: &[String]) -> Child {
    let child = Command::new("nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(store)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nats-server is installed (apt-get install nats-server; .ci/run does it)");
    wait_until(
        &format!("nats-server to listen on {port}"),
        Duration::from_secs(10),
        || std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(drop),
    );
    child
}

/// The fleet's users and permissions, verbatim from docs/fleet.md (the block between its
/// `<!-- fleet.conf -->` markers), so the page cannot say other than what is tested.
pub fn fleet_conf() -> String {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/fleet.md")).unwrap();
    let block = page
        .split_once("<!-- fleet.conf -->\n```\n")
        .and_then(|(_, rest)| rest.split_once("```\n<!-- /fleet.conf -->"))
        .expect("docs/fleet.md holds the configuration between <!-- fleet.conf --> markers");
    block.0.to_string()
}

/// [`fleet_conf`] as a file in `dir`, for `nats-server -c`.
pub fn fleet_conf_file(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("fleet.conf");
    std::fs::write(&path, fleet_conf()).unwrap();
    path
}

/// A current-thread runtime for the official client.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
