//! A real S3 API server for the tests: `moto_server` (PyPI's `moto[server]`), from the
//! Python environment `scripts/python-env` creates, on a free loopback port. It is
//! started per test, ready once it answers an HTTP request, and killed on drop.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The credentials the tests give the S3 client (moto accepts any).
pub const ACCESS_KEY: &str = "blackbox-test";
/// The secret that goes with [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "blackbox-test-secret";
/// The region the tests use.
pub const REGION: &str = "us-east-1";

/// A running `moto_server`; killed when dropped.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    port: u16,
}

/// The `moto_server` of the tests' Python environment (created on first use;
/// `BLACKBOX_PYTHON` names another interpreter whose environment has it).
pub fn moto_server() -> &'static Path {
    static SERVER: OnceLock<PathBuf> = OnceLock::new();
    SERVER.get_or_init(|| {
        let python = match std::env::var_os("BLACKBOX_PYTHON") {
            Some(python) => PathBuf::from(python),
            None => {
                let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python-env");
                let out = Command::new(&script)
                    .output()
                    .unwrap_or_else(|e| panic!("run {}: {e}", script.display()));
                assert!(
                    out.status.success(),
                    "{} failed (it needs python3 with venv, and PyPI): {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            }
        };
        let server = python.with_file_name("moto_server");
        assert!(
            server.exists(),
            "{} is missing: scripts/python-requirements.txt installs moto[server]",
            server.display()
        );
        server
    })
}

impl Moto {
    /// Starts a server on a free loopback port and waits until it answers (on another
    /// port if the one chosen was taken before the server could bind it).
    pub fn start() -> Moto {
        let mut attempt = 1;
        loop {
            match Moto::start_once() {
                Ok(moto) => return moto,
                Err(why) if attempt < 5 => {
                    eprintln!("moto_server: {why}; trying another port");
                    attempt += 1;
                }
                Err(why) => panic!("moto_server: {why}"),
            }
        }
    }

    fn start_once() -> Result<Moto, String> {
        // A port the OS just handed out and took back: free unless another process
        // takes it in between, and then the server exits without answering.
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new(moto_server())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            // Multipart tests use parts smaller than S3's 5 MiB.
            .env("S3_UPLOAD_PART_MIN_SIZE", "1024")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", moto_server().display()));
        let mut moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            port,
        };
        moto.wait_ready()?;
        Ok(moto)
    }

    /// Polls the server with an HTTP request until it answers one (bounded: a server
    /// that exits or never answers fails the test).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "it exited before it answered on port {}: {status}",
                    self.port
                ));
            }
            if let Ok(status) = self.request("GET", "/moto-api/", &[]) {
                assert!(status > 0, "moto_server answered without a status line");
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "moto_server on port {} did not answer within 120 s",
                self.port
            );
            // Between two polls: the condition waited for is the server's answer.
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Creates a bucket.
    pub fn create_bucket(&self, bucket: &str) {
        let status = self
            .request("PUT", &format!("/{bucket}"), &[])
            .expect("create a bucket");
        assert_eq!(status, 200, "moto_server refused to create bucket {bucket}");
    }

    /// One HTTP/1.1 request; returns the response's status code.
    fn request(&self, method: &str, path: &str, body: &[u8]) -> std::io::Result<u16> {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )?;
        stream.write_all(body)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        let head = String::from_utf8_lossy(&response);
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other("no HTTP status line"))?;
        Ok(status)
    }

    /// The environment an AWS tool (and `blackbox ship`) reads to reach this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
        ]
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
