//! A real `redis-server` for the tests, started on a free loopback port and stopped on drop.
#![allow(dead_code, unreachable_pub, clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// Starts `redis-server`; panics with the fix when it is not installed (`.ci/run` installs it).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts `redis-server` with `extra` arguments after the test's own (`--requirepass …`).
    pub fn start_with(extra: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start redis-server ({e}); install it with `apt-get install -y redis-server` (.ci/run does)"));
        let server = Self {
            child,
            url: format!("redis://127.0.0.1:{port}/"),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 16];
                // A server that wants a password answers `-NOAUTH`: it is up all the same.
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read(&mut buf).is_ok_and(|n| {
                        buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH")
                    })
                {
                    return server;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING on port {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
