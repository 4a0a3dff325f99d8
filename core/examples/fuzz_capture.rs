//! Records the server's side of the fuzz conversation ([`mysqllock_core::fuzzing`]) with
//! a real server, for the fuzz targets' seed corpus: a relay between the conversation
//! and the server (on a Unix socket to the server's socket when the DSN names one, on
//! TCP otherwise, then without TLS), keeping what the server sent on the last
//! connection (the one that got furthest).
//!
//!   cargo run -p mysqllock-core --features fuzzing --example fuzz_capture -- \
//!       'mysql://USER:PASSWORD@localhost/DB?socket=/path/to/mysqld.sock' OUT

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use mysqllock_core::fuzzing::{converse, Reached};
use mysqllock_core::{Config, SslMode};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, out] = &args[..] else {
        eprintln!("usage: fuzz_capture DSN-WITH-SOCKET OUT");
        std::process::exit(2);
    };
    let mut config = Config::from_url(url).unwrap_or_else(|e| fail(&format!("{e}")));
    let (recordings, recorded) = mpsc::channel();
    let accepted = Arc::new(AtomicUsize::new(0));
    let relay_path = std::env::temp_dir().join(format!("mysqllock-capture-{}.sock", std::process::id()));
    match config.socket.clone() {
        Some(server_socket) => {
            let _ = std::fs::remove_file(&relay_path);
            let listener = UnixListener::bind(&relay_path).unwrap_or_else(|e| fail(&format!("{e}")));
            let accepted = Arc::clone(&accepted);
            std::thread::spawn(move || {
                while let Ok((client, _)) = listener.accept() {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let Ok(server) = UnixStream::connect(&server_socket) else { return };
                    let recordings = recordings.clone();
                    std::thread::spawn(move || recordings.send(relay(client, server)));
                }
            });
            config.socket = Some(relay_path.to_string_lossy().into_owned());
        }
        None => {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| fail(&format!("{e}")));
            let server = format!("{}:{}", config.host, config.port);
            config.host = "127.0.0.1".into();
            config.port = listener.local_addr().unwrap_or_else(|e| fail(&format!("{e}"))).port();
            // The protocol's bytes, not TLS records.
            config.tls.mode = Some(SslMode::Disabled);
            let accepted = Arc::clone(&accepted);
            std::thread::spawn(move || {
                while let Ok((client, _)) = listener.accept() {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    let Ok(server) = TcpStream::connect(&server) else { return };
                    let recordings = recordings.clone();
                    std::thread::spawn(move || recordings.send(relay(client, server)));
                }
            });
        }
    }
    let (reached, error) = converse(&config, Duration::from_secs(10));
    let _ = std::fs::remove_file(&relay_path);
    // Every connection was accepted before its server spoke; each recording arrives
    // once both directions of its connection ended.
    let mut bytes = Vec::new();
    for _ in 0..accepted.load(Ordering::SeqCst) {
        match recorded.recv_timeout(Duration::from_secs(10)) {
            Ok(one) => bytes = one,
            Err(e) => fail(&format!("a relayed connection did not end: {e}")),
        }
    }
    if reached != Reached::Done {
        fail(&format!("the conversation ended at {reached:?}: {error:?}"));
    }
    std::fs::write(out, &bytes).unwrap_or_else(|e| fail(&format!("{out}: {e}")));
    println!("{out}: {} bytes from the server", bytes.len());
}

/// A connected socket of either kind.
trait Socket: Read + Write + Send + Sized + 'static {
    fn duplicate(&self) -> Self;
    fn close(&self, how: Shutdown);
}

impl Socket for UnixStream {
    fn duplicate(&self) -> Self {
        self.try_clone().expect("a socket's clone")
    }
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

impl Socket for TcpStream {
    fn duplicate(&self) -> Self {
        self.try_clone().expect("a socket's clone")
    }
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

/// Passes bytes both ways until either side closes; returns what the server sent.
fn relay<S: Socket>(mut client: S, server: S) -> Vec<u8> {
    let mut to_server = server.duplicate();
    let mut from_client = client.duplicate();
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_server);
        to_server.close(Shutdown::Write);
    });
    let mut recorded = Vec::new();
    let mut server = server;
    let mut buf = [0u8; 16 * 1024];
    loop {
        match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                recorded.extend_from_slice(&buf[..n]);
                if client.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    client.close(Shutdown::Both);
    let _ = upstream.join();
    recorded
}

fn fail(why: &str) -> ! {
    eprintln!("fuzz_capture: {why}");
    std::process::exit(1);
}
