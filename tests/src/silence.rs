//! A silent network and a stalled server, for the tests that prove every wait has a
//! bound.
//!
//! [`FreezeProxy`] sits between a client and the real server and passes bytes both ways
//! until it is frozen: from then on it neither reads nor writes nor closes anything, so
//! the client sees what a dropped route, a dead NAT entry or a frozen VM looks like:
//! no RST, no FIN, just silence. Bytes already read are held and passed on after a
//! thaw. New connections are accepted by the kernel meanwhile, and served after a thaw.
//!
//! [`StalledServer`] is a fake server that accepts and then says nothing, or sends a
//! greeting and then nothing, or accepts the login and then answers nothing more (the
//! session setup the client sends next, or its first statement, goes unanswered), or
//! greets with what the core's client cannot read (issue 35's junk greeting).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// Whether the proxy passes bytes; pumps wait on the condition variable while frozen.
#[derive(Default)]
struct Gate {
    frozen: Mutex<bool>,
    changed: Condvar,
    /// Freeze once the client has sent these bytes (and they have reached the server).
    trigger: Mutex<Option<Vec<u8>>>,
}

impl Gate {
    /// After `sent` went from the client to the server: freezes if it holds the trigger
    /// (taken: it fires once).
    fn sent(&self, sent: &[u8]) {
        let mut trigger = self.trigger.lock().unwrap_or_else(|e| e.into_inner());
        let fired = trigger.as_ref().is_some_and(|t| sent.windows(t.len()).any(|w| w == t.as_slice()));
        if fired {
            *trigger = None;
            self.set(true);
        }
    }

    fn set(&self, frozen: bool) {
        *self.frozen.lock().unwrap_or_else(|e| e.into_inner()) = frozen;
        self.changed.notify_all();
    }

    /// Returns once the proxy is not frozen.
    fn pass(&self) {
        let mut frozen = self.frozen.lock().unwrap_or_else(|e| e.into_inner());
        while *frozen {
            frozen = self.changed.wait(frozen).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// What the proxy and the fake server keep to end their threads when dropped.
#[derive(Default)]
struct Sockets {
    closing: AtomicBool,
    open: Mutex<Vec<TcpStream>>,
}

impl Sockets {
    fn keep(&self, stream: &TcpStream) {
        if let Ok(clone) = stream.try_clone() {
            self.open.lock().unwrap_or_else(|e| e.into_inner()).push(clone);
        }
    }

    /// Ends every connection and the accepting thread (woken by a connection of its own).
    fn close(&self, port: u16) {
        self.closing.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        let _ = TcpStream::connect(("127.0.0.1", port));
    }
}

/// A TCP proxy on 127.0.0.1 that can be frozen (see the module's documentation).
pub struct FreezeProxy {
    port: u16,
    gate: Arc<Gate>,
    sockets: Arc<Sockets>,
}

impl FreezeProxy {
    /// A proxy to `server` (`host:port`), passing bytes.
    pub fn to(server: &str) -> FreezeProxy {
        let upstream = server.to_socket_addrs().expect("resolving the server").next().expect("an address");
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let port = listener.local_addr().expect("the proxy's port").port();
        let gate = Arc::new(Gate::default());
        let sockets = Arc::new(Sockets::default());
        let (g, s) = (gate.clone(), sockets.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                if s.closing.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                // Served once the proxy is not frozen: until then the client's connect
                // has succeeded (the kernel's doing) and nothing more happens.
                g.pass();
                let Ok(server) = TcpStream::connect(upstream) else { continue };
                s.keep(&client);
                s.keep(&server);
                pump(&client, &server, g.clone(), true);
                pump(&server, &client, g.clone(), false);
            }
        });
        FreezeProxy { port, gate, sockets }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// From now on nothing passes either way, and nothing is closed.
    pub fn freeze(&self) {
        self.gate.set(true);
    }

    /// Bytes pass again, those held first.
    pub fn thaw(&self) {
        self.gate.set(false);
    }

    /// Freezes the moment the client has sent `text` (a statement's distinctive words),
    /// right after passing those bytes on to the server: a wait the statement starts on
    /// the server is then silenced mid-way, without racing the client.
    pub fn freeze_on(&self, text: &str) {
        *self.gate.trigger.lock().unwrap_or_else(|e| e.into_inner()) = Some(text.as_bytes().to_vec());
    }

    /// Whether the proxy is frozen now.
    pub fn is_frozen(&self) -> bool {
        *self.gate.frozen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `dsn` (a `mysql://` URL) pointed at the proxy, with `extra` (`key=value&...`)
    /// added to its query.
    pub fn dsn(&self, dsn: &str, extra: &str) -> String {
        through(dsn, self.port, extra)
    }
}

impl Drop for FreezeProxy {
    fn drop(&mut self) {
        self.thaw();
        self.sockets.close(self.port);
    }
}

/// Copies `from` to `to` in a thread, holding what it read while the gate is closed;
/// `upstream`: from the client to the server, where the trigger is looked for.
fn pump(from: &TcpStream, to: &TcpStream, gate: Arc<Gate>, upstream: bool) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else { return };
    thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            gate.pass();
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            gate.pass();
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
            if upstream {
                gate.sent(&buf[..n]);
            }
        }
        gate.pass();
        // The end of one direction is passed on as such (a FIN), once not frozen.
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// How far a [`StalledServer`] goes before it falls silent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// Accepts the connection and says nothing.
    BeforeGreeting,
    /// Sends a greeting (MariaDB, `mysql_native_password`), then nothing.
    AfterGreeting,
    /// Greets, answers the login with OK, then nothing: the session's setup (sent with
    /// the login) or the first statement goes unanswered.
    AfterLogin,
    /// Greets naming an authentication plugin nobody speaks, with an auth data length
    /// of 0xEE (a few bytes of a real greeting altered): the core's client cannot read
    /// that greeting and refuses it. The `mysql` crate reads the length as signed and
    /// can; when it was the core's fallback, the core logged in through it. Every packet
    /// of a login is answered with OK, then nothing: the session's setup goes unanswered.
    UnknownPlugin,
}

/// A fake server on 127.0.0.1 that stalls (see [`Stall`]); it reads whatever the client
/// sends and never closes a connection while it lives.
pub struct StalledServer {
    port: u16,
    sockets: Arc<Sockets>,
}

impl StalledServer {
    pub fn start(stall: Stall) -> StalledServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the fake server");
        let port = listener.local_addr().expect("the fake server's port").port();
        let sockets = Arc::new(Sockets::default());
        let s = sockets.clone();
        thread::spawn(move || {
            for (id, client) in listener.incoming().enumerate() {
                if s.closing.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                s.keep(&client);
                thread::spawn(move || serve(client, stall, id as u32 + 1));
            }
        });
        StalledServer { port, sockets }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for this server (user `u`, password `p`, database `db`) with `extra`
    /// (`key=value&...`) as its query.
    pub fn dsn(&self, extra: &str) -> String {
        format!("mysql://u:p@127.0.0.1:{}/db?{extra}", self.port)
    }
}

impl Drop for StalledServer {
    fn drop(&mut self) {
        self.sockets.close(self.port);
    }
}

fn serve(mut client: TcpStream, stall: Stall, connection_id: u32) {
    match stall {
        Stall::BeforeGreeting => {}
        Stall::AfterGreeting => drop(client.write_all(&packet(0, &greeting(connection_id)))),
        Stall::AfterLogin => {
            let _ = client.write_all(&packet(0, &greeting(connection_id)));
            if read_packet(&mut client).is_some() {
                let _ = client.write_all(&packet(2, &OK));
            }
        }
        Stall::UnknownPlugin => {
            let _ = client.write_all(&packet(0, &unknown_plugin_greeting(connection_id)));
            // Each packet of the login (a handshake response, an answer to a step) gets
            // its OK; the first command (packet 0 of a new exchange) gets nothing.
            while let Some((seq, _)) = read_packet_seq(&mut client) {
                if seq == 0 || client.write_all(&packet(seq.wrapping_add(1), &OK)).is_err() {
                    break;
                }
            }
        }
    }
    // Silence: read and drop whatever comes, until the client or the test ends it.
    let mut sink = [0u8; 4096];
    while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
}

/// OK: no rows affected, no insert id, autocommit, no warnings.
const OK: [u8; 7] = [0, 0, 0, 2, 0, 0, 0];

/// [`greeting`] with an auth data length of 0xEE and a plugin nobody speaks.
fn unknown_plugin_greeting(connection_id: u32) -> Vec<u8> {
    let mut g = greeting(connection_id);
    let plugin = g.len() - b"mysql_native_password\0".len();
    g.truncate(plugin);
    g.extend_from_slice(b"mysql_na\xA8ive_pa\xF3sword\0");
    // The auth data length: after the version, id, scramble, capabilities, charset and status.
    let at = 1 + b"5.5.5-10.11.6-MariaDB\0".len() + 4 + 9 + 2 + 1 + 2 + 2;
    g[at] = 0xEE;
    g
}

/// A protocol-10 greeting as MariaDB 10.11 sends it, naming `mysql_native_password`.
fn greeting(connection_id: u32) -> Vec<u8> {
    // LONG_PASSWORD, LONG_FLAG, CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS,
    // SECURE_CONNECTION, MULTI_STATEMENTS, MULTI_RESULTS, PS_MULTI_RESULTS, PLUGIN_AUTH.
    let caps: u32 = 0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x1_0000 | 0x2_0000 | 0x4_0000 | 0x8_0000;
    let mut g = vec![10];
    g.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
    g.extend_from_slice(&connection_id.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(45);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0");
    g.extend_from_slice(b"mysql_native_password\0");
    g
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    out.push(seq);
    out.extend_from_slice(payload);
    out
}

fn read_packet(stream: &mut TcpStream) -> Option<Vec<u8>> {
    read_packet_seq(stream).map(|(_, payload)| payload)
}

/// One packet from the client: its sequence number and payload.
fn read_packet_seq(stream: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).ok()?;
    let len = usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).ok()?;
    Some((header[3], payload))
}

/// `dsn` with its host and port replaced by `127.0.0.1:port`, and `extra` added to its
/// query. Only the plain `mysql://user:password@host:port/db?query` form the test
/// servers' env files write.
pub fn through(dsn: &str, port: u16, extra: &str) -> String {
    let rest = dsn.strip_prefix("mysql://").expect("a mysql:// URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let userinfo = authority.rsplit_once('@').map(|(u, _)| format!("{u}@")).unwrap_or_default();
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let query: Vec<&str> = [query, extra].into_iter().filter(|q| !q.is_empty()).collect();
    let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
    format!("mysql://{userinfo}127.0.0.1:{port}/{path}{query}")
}

/// `host:port` of a `mysql://` URL.
pub fn server_of(dsn: &str) -> String {
    let rest = dsn.strip_prefix("mysql://").expect("a mysql:// URL");
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    authority.rsplit_once('@').map_or(authority, |(_, hostport)| hostport).to_owned()
}

/// Every packet to and from a port on the loopback interface dropped by the kernel
/// (iptables rules on INPUT, removed when dropped): a network gone silent below the
/// sockets, where [`FreezeProxy`] only stops an application. The peer's kernel answers
/// nothing, keepalive probes included, so this is what shows whether a socket's own
/// keepalive notices a silent peer. Needs root and iptables (scripts/install-deps.sh).
pub struct Blackhole {
    rules: [Vec<String>; 2],
}

impl Blackhole {
    /// Drops everything sent to or from `port` on 127.0.0.1 from now on.
    pub fn on(port: u16) -> Result<Blackhole, String> {
        let rule = |direction: &str| {
            ["INPUT", "-i", "lo", "-p", "tcp", direction, &port.to_string(), "-j", "DROP"].map(String::from).to_vec()
        };
        let hole = Blackhole { rules: [rule("--dport"), rule("--sport")] };
        for rule in &hole.rules {
            iptables("-I", rule)?;
        }
        Ok(hole)
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        for rule in &self.rules {
            let _ = iptables("-D", rule);
        }
    }
}

/// `iptables -w ACTION RULE...`, waiting for the tables' lock (other suites use it too).
fn iptables(action: &str, rule: &[String]) -> Result<(), String> {
    let out = std::process::Command::new("iptables")
        .arg("-w")
        .arg(action)
        .args(rule)
        .output()
        .map_err(|e| format!("running iptables (root and scripts/install-deps.sh needed): {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!("iptables {action} {}: {}", rule.join(" "), String::from_utf8_lossy(&out.stderr).trim())),
    }
}

/// How many TCP connections to 127.0.0.1:`port` this machine's kernel holds open
/// (ESTABLISHED, from /proc/net/tcp): a connection the kernel gave up on has left it.
pub fn established_to(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("reading /proc/net/tcp");
    let remote = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.get(2) == Some(&remote.as_str()) && fields.get(3) == Some(&"01")
        })
        .count()
}
