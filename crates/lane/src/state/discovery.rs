//! The discovery file: how the shim (and any local tool) finds the running daemon. It holds
//! the daemon's URL, its Unix socket and a random token, so it is written owner-only (0600):
//! whoever can read it can post hooks.
//!
//! The shim and the commands talk to the daemon over its Unix socket only, and only once the
//! kernel says the socket's listener runs as their own user ([`Discovery::connect`]): after the
//! daemon dies, any program may bind its TCP port, but none can take over a socket in the
//! owner-only state folder, so the token and hook content never reach a stranger.

use serde::{Deserialize, Serialize};

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const FILE_NAME: &str = "daemon.json";
/// The daemon's Unix socket, beside the discovery file.
pub const SOCKET_NAME: &str = "daemon.sock";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Discovery {
    /// `http://127.0.0.1:8789`
    pub url: String,
    pub token: String,
    pub pid: u32,
    pub version: String,
    /// `<state>/daemon.sock`: where the shim and the commands connect. Absent when written by a
    /// daemon older than the socket (the shim then spools; the commands say to restart it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// A policy or budgets decide the tool calls Cline waits on: a shim gives the daemon up to
    /// [`GUARDED_WAIT`] to answer one (a decision comes before speed), where it gives any other
    /// hook its 200 ms.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub guards: bool,
}

/// How long a shim waits for the daemon's answer to a tool call a guard decides, before it
/// follows `AEP_CLINE_ENFORCE` (and spools the firing): long enough for a loaded machine, far
/// within Cline's own deadline for the hook.
pub const GUARDED_WAIT: Duration = Duration::from_secs(3);

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// The file beside the discovery file that keeps the token across restarts.
pub const TOKEN_FILE: &str = "token";

/// The daemon's bearer token: the one kept in the state folder, or a fresh random one (256
/// bits, hex) written there owner-only. It outlives restarts, so a shim that read the discovery
/// file before a restart is still let in after it instead of spooling every hook.
pub fn token(state_dir: &Path) -> std::io::Result<String> {
    let path = state_dir.join(TOKEN_FILE);
    if let Ok(kept) = std::fs::read_to_string(&path) {
        let kept = kept.trim();
        if kept.len() == 64 && kept.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(kept.to_string());
        }
    }
    let fresh = crate::secret::try_key()
        .map(hex::encode)
        .map_err(|e| std::io::Error::other(format!("cannot draw a token: {e}")))?;
    super::write_owner_only(state_dir, TOKEN_FILE, &[fresh.as_bytes()], true)?;
    Ok(fresh)
}

impl Discovery {
    /// Writes the file atomically (temp file then rename), mode 0600 from its creation.
    pub fn write(&self, state_dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("serializable");
        super::write_owner_only(state_dir, FILE_NAME, &[text.as_bytes()], true).map(drop)
    }

    pub fn read(state_dir: &Path) -> Option<Discovery> {
        let text = std::fs::read(path(state_dir)).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// The daemon's `Host`: the authority of its URL (`127.0.0.1:8789`), which the socket's
    /// requests carry as the TCP listener's do.
    pub fn host(&self) -> &str {
        let url = self.url.strip_prefix("http://").unwrap_or(&self.url);
        url.split('/').next().unwrap_or_default()
    }

    /// A connection to the daemon's socket, made within `within` and only to a listener that
    /// runs as this user (checked with `SO_PEERCRED` before anything is sent).
    pub fn connect(&self, within: Duration) -> std::io::Result<UnixStream> {
        let Some(socket) = &self.socket else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "the discovery file names no socket (a daemon older than this command wrote it): restart the daemon",
            ));
        };
        connect_as_us(socket, within)
    }

    /// Removes the file if it is still ours (a newer daemon may have replaced it).
    pub fn remove_if_ours(&self, state_dir: &Path) {
        if Discovery::read(state_dir).as_ref() == Some(self) {
            let _ = std::fs::remove_file(path(state_dir));
        }
    }
}

/// Connects to `path`, waiting at most `within` (a hung daemon's full backlog must not block
/// the shim), and refuses a listener of another user.
pub fn connect_as_us(path: &Path, within: Duration) -> std::io::Result<UnixStream> {
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    // A Unix socket's connect waits for room in the backlog up to the send timeout.
    socket.set_write_timeout(Some(within.max(Duration::from_millis(1))))?;
    socket.connect(&socket2::SockAddr::unix(path)?)?;
    let stream: UnixStream = socket.into();
    check_peer(&stream, path, current_uid())?;
    Ok(stream)
}

#[allow(unsafe_code)] // getuid: see the SAFETY note inside
pub(crate) fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The uid of the process that listens behind `stream`, as the kernel recorded it.
#[allow(unsafe_code)] // getsockopt(SO_PEERCRED): see the SAFETY note inside
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes and `len` is `cred`'s size.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Refuses a socket whose listener is not `uid`: it is not our daemon, whoever it is.
fn check_peer(stream: &UnixStream, path: &Path, uid: u32) -> std::io::Result<()> {
    let peer = peer_uid(stream)?;
    if peer != uid {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "the socket {} is held by uid {peer}, not by this user (uid {uid}): it is not our daemon, nothing was sent",
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_of_another_user_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SOCKET_NAME);
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let ours = connect_as_us(&path, Duration::from_secs(1)).expect("our own listener");
        assert_eq!(peer_uid(&ours).unwrap(), current_uid());
        let other = current_uid().wrapping_add(1);
        let refused = check_peer(&ours, &path, other).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(refused.to_string().contains("not our daemon"), "{refused}");
    }

    #[test]
    fn no_socket_is_said_and_a_dead_one_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let old = Discovery {
            url: "http://127.0.0.1:9".into(),
            token: "t".into(),
            pid: 1,
            version: "0".into(),
            socket: None,
            guards: false,
        };
        assert_eq!(old.host(), "127.0.0.1:9");
        let e = old.connect(Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("restart the daemon"), "{e}");
        let path = dir.path().join(SOCKET_NAME);
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let dead = Discovery {
            socket: Some(path),
            ..old
        };
        let e = dead.connect(Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    }
}
