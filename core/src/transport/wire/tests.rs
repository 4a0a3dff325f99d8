//! The wire client's unit tests: scrambles, packets, greetings, binary values, and
//! handshakes against a scripted peer.

use sha1::{Digest, Sha1};

use super::auth::*;
use super::binary::*;
use super::*;

/// How long a scripted peer may keep a test's connection waiting.
const BOUND: Duration = Duration::from_secs(5);

#[test]
fn native_password_matches_the_servers_stored_hash() {
    // The server stores '*' + hex(SHA1(SHA1(password))) (PASSWORD('secret') =
    // *14E65567ABDB5135D0CFD9A70B3032C179A49EE7) and checks
    // SHA1(response XOR SHA1(scramble + stored)) == stored.
    let scramble = b"abcdefghij0123456789";
    let response = native_password("secret", scramble);
    let stored = Sha1::digest(Sha1::digest(b"secret"));
    let mut salted = Sha1::new();
    salted.update(scramble);
    salted.update(stored);
    let once: Vec<u8> = response.iter().zip(salted.finalize()).map(|(a, b)| a ^ b).collect();
    assert_eq!(Sha1::digest(&once), stored);
    let hex: String = stored.iter().map(|b| format!("{b:02X}")).collect();
    assert_eq!(hex, "14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
    assert!(native_password("", scramble).is_empty());
}

#[test]
fn sha2_password_matches_an_independent_computation() {
    // python3 -c "import hashlib; h = lambda b: hashlib.sha256(b).digest(); x = h(b'secret');
    //   print(bytes(a ^ b for a, b in zip(x, h(h(x) + b'abcdefghij0123456789'))).hex())"
    let response = sha2_password("secret", b"abcdefghij0123456789");
    let hex: String = response.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "bd7d89fc1c297010da753d08822e9e48d3eafbb6e68e1f9b403be12dc5687a40");
    assert!(sha2_password("", b"abcdefghij0123456789").is_empty());
}

/// A 2048-bit RSA public key (`openssl genrsa 2048 | openssl rsa -pubout`), as MySQL
/// sends its own.
const PUBLIC_KEY: &[u8] = b"-----BEGIN PUBLIC KEY-----\n\
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA8rxrlQ4Sm+e+DBXggPRE\n\
oASF8q1A9/AcCIE2PNR+WkecQ3RsN9EJTzMb3pFjLIvo70guAEygRHNgjX9QTGrj\n\
WCdcBw71aVCUoHCjjbnoudeOScFIB7iZ56XWwodFmf47v1d11P7p9swWw+fCp5Ng\n\
C2sxYYuimhSyW+bJ+zrWhLs8u7d62G/X6P55GDIKX1ih4uX1CIizt5dOsANBF2c5\n\
rwbu0nHplGWeG3IICIjFIpDZ5Ms6T+Csn/ugMT5jKU/OHGXLGfPED2l9RNBrNJpk\n\
27wRWbMYZVDYxi/F/nfPH8lyFofUcStwpXz/cRedeTSqyUoTIPEoRRruhCu+FIHQ\n\
eQIDAQAB\n\
-----END PUBLIC KEY-----";

#[test]
fn rsa_encryption_fits_the_key_or_says_why_not() {
    let sealed = rsa_encrypt(PUBLIC_KEY, b"secret\0").unwrap();
    assert_eq!(sealed.len(), 256, "one block of the modulus' size");
    assert_ne!(rsa_encrypt(PUBLIC_KEY, b"secret\0").unwrap(), sealed, "OAEP draws a fresh seed each time");
    // OAEP with SHA-1 carries 256 - 42 bytes in a 2048-bit block.
    assert!(rsa_encrypt(PUBLIC_KEY, &[b'x'; 214]).is_ok());
    let e = rsa_encrypt(PUBLIC_KEY, &[b'x'; 215]).unwrap_err();
    assert!(e.contains("214 bytes is too long for the server's 2048-bit RSA key (at most 213)"), "{e}");
    let e = rsa_encrypt(b"-----BEGIN PUBLIC KEY-----\n!!\n-----END PUBLIC KEY-----", b"x\0").unwrap_err();
    assert!(e.contains("cannot read"), "{e}");
}

#[test]
fn a_payload_filling_a_packet_is_followed_by_an_empty_one() {
    let mut out = Vec::new();
    let next = frame(&mut out, &vec![7u8; MAX_PAYLOAD], 3);
    assert_eq!(next, 5);
    assert_eq!(out.len(), MAX_PAYLOAD + 8);
    assert_eq!(&out[MAX_PAYLOAD + 4..], &[0, 0, 0, 4]);
}

#[test]
fn length_encoded_integers_of_every_width_are_read() {
    let mut c = Cursor::new(&[0xFA, 0xFC, 0x34, 0x12, 0xFD, 1, 2, 3, 0xFE, 1, 0, 0, 0, 0, 0, 0, 0x80]);
    assert_eq!(c.lenenc(), Some(0xFA));
    assert_eq!(c.lenenc(), Some(0x1234));
    assert_eq!(c.lenenc(), Some(0x030201));
    assert_eq!(c.lenenc(), Some(0x8000_0000_0000_0001));
    assert_eq!(c.lenenc(), None);
}

#[test]
fn text_rows_keep_nulls_empty_strings_and_binary_bytes() {
    let packet = [0xFB, 0x00, 0x02, b'4', b'2', 0x01, 0xFF];
    let (utf8mb4, binary) = (text_column(45), text_column(63));
    let columns = [text_column(45), text_column(45), text_column(45), text_column(63), text_column(45)];
    let row = parse_text_row(&packet, &columns[..4]).unwrap();
    assert_eq!(row, vec![Value::Null, Value::Text(String::new()), Value::Text("42".into()), Value::Bytes(vec![0xFF])]);
    assert!(parse_text_row(&packet, &columns).is_none(), "a short row must not read past its packet");
    assert!(parse_text_row(&packet, &columns[..3]).is_none(), "a row with a value more than its columns");
    assert!(parse_text_row(&[0x01, 0xFF], &[utf8mb4]).is_none(), "not UTF-8 in a utf8mb4 column");
    assert_eq!(parse_text_row(&[0x01, 0xFF], &[binary]), Some(vec![Value::Bytes(vec![0xFF])]));
}

/// A protocol-10 greeting as servers send it (scramble "abcdefgh" + "ijklmnopqrst").
fn greeting_packet(version: &[u8], id: u32, caps: u32, plugin: &[u8]) -> Vec<u8> {
    let mut p = vec![10];
    p.extend_from_slice(version);
    p.push(0);
    p.extend_from_slice(&id.to_le_bytes());
    p.extend_from_slice(b"abcdefgh\0");
    p.extend_from_slice(&(caps as u16).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&2u16.to_le_bytes());
    p.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    p.push(21);
    p.extend_from_slice(&[0; 10]);
    p.extend_from_slice(b"ijklmnopqrst\0");
    p.extend_from_slice(plugin);
    p
}

#[test]
fn a_mariadb_greeting_gives_its_version_id_scramble_and_plugin() {
    let caps = CLIENT_WANTS | CLIENT_CONNECT_WITH_DB;
    let g = parse_greeting(&greeting_packet(b"5.5.5-10.11.19-MariaDB", 77, caps, b"mysql_native_password\0")).unwrap();
    assert_eq!(
        (g.version.as_str(), g.connection_id, g.plugin.as_str()),
        ("5.5.5-10.11.19-MariaDB", 77, NATIVE_PASSWORD)
    );
    assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
    assert_eq!(g.capabilities, caps);
}

/// A connection past its handshake, talking to a hand-driven peer.
fn connected(authenticated: bool) -> (Connection, UnixStream) {
    let (ours, peer) = UnixStream::pair().unwrap();
    // A test that waits for the end of the connection fails instead of hanging.
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let greeting = Greeting {
        version: "test".into(),
        connection_id: 1,
        capabilities: 0,
        scramble: Vec::new(),
        plugin: String::new(),
    };
    let conn = Connection {
        stream: Stream { socket: Socket::new(Plain::Unix(ours), BOUND), tls: None },
        inbox: Inbox::new(),
        greeting,
        seq: 0,
        broken: false,
        authenticated,
        login: Login::Native,
        peer: "test".into(),
        read_timeout: BOUND,
        write_timeout: BOUND,
    };
    (conn, peer)
}

#[test]
fn a_packet_out_of_sequence_loses_the_connection_and_closes_it() {
    let (mut conn, mut peer) = connected(true);
    // The answer to a query must be packet 1; this OK claims to be packet 5.
    peer.write_all(&[7, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0]).unwrap();
    let e = conn.query("SELECT 1", conn.bound(Deadline::now())).unwrap_err();
    assert!(e.lost && e.message.contains("arrived where 1 was due"), "{e:?}");
    assert!(conn.query("SELECT 1", conn.bound(Deadline::now())).unwrap_err().lost);
    // The peer sees the query, then the end of the connection (no goodbye either).
    let mut seen = Vec::new();
    peer.read_to_end(&mut seen).unwrap();
    assert_eq!(&seen[..5], &[9, 0, 0, 0, COM_QUERY]);
    assert_eq!(seen.len(), 4 + 9, "nothing after the query: {seen:?}");
}

#[test]
fn an_in_sequence_answer_is_read_and_the_goodbye_follows() {
    let (mut conn, mut peer) = connected(true);
    peer.write_all(&[7, 0, 0, 1, 0, 3, 9, 2, 0, 0, 0]).unwrap();
    let outcomes = conn.query("DELETE FROM t", conn.bound(Deadline::now())).unwrap();
    assert_eq!((outcomes[0].affected_rows, outcomes[0].last_insert_id), (3, 9));
    drop(conn);
    let mut seen = Vec::new();
    peer.read_to_end(&mut seen).unwrap();
    assert_eq!(&seen[seen.len() - 5..], &[1, 0, 0, 0, COM_QUIT]);
}

#[test]
fn a_packet_of_16_mib_or_more_is_reassembled_from_its_pieces() {
    let (mut conn, peer) = connected(true);
    conn.seq = 1;
    let writer = std::thread::spawn(move || {
        let mut peer = peer;
        let mut bytes = Vec::new();
        let mut payload = vec![b'x'; MAX_PAYLOAD + 3];
        payload[MAX_PAYLOAD] = b'y';
        frame(&mut bytes, &payload, 1);
        peer.write_all(&bytes).unwrap();
        peer
    });
    let bound = conn.bound(Deadline::now());
    let packet = conn.exchange(bound).read_packet().unwrap();
    assert_eq!(packet.len(), MAX_PAYLOAD + 3);
    assert_eq!(&packet[MAX_PAYLOAD - 1..], b"xyxx");
    assert_eq!(conn.seq, 3, "two packets were read");
    drop(writer.join().unwrap());
}

#[test]
fn a_connection_dropped_during_its_handshake_sends_no_goodbye() {
    let (conn, mut peer) = connected(false);
    drop(conn);
    let mut seen = Vec::new();
    peer.read_to_end(&mut seen).unwrap();
    assert!(seen.is_empty(), "the server would read {seen:?} as a handshake answer");
}

/// One packet from a hand-driven peer's side: its sequence number and payload.
fn read_from_client(peer: &mut UnixStream) -> (u8, Vec<u8>) {
    let mut header = [0u8; 4];
    peer.read_exact(&mut header).unwrap();
    let mut payload = vec![0u8; usize::from(header[0]) | usize::from(header[1]) << 8];
    peer.read_exact(&mut payload).unwrap();
    (header[3], payload)
}

/// Logs in with `password` to a hand-driven server that greets with `sha256_password`
/// (MySQL 8.0 with `default_authentication_plugin=sha256_password`; MySQL 9.7 always
/// greets with caching_sha2_password, even with `authentication_policy` naming
/// sha256_password first: tried) and sends its public key when asked. Returns the
/// login and the client's answers: the handshake response's, then any packet after.
fn log_in_to_a_sha256_greeting(password: Option<&str>) -> (Login, Vec<Vec<u8>>) {
    let path =
        std::env::temp_dir().join(format!("mysqllock-wire-sha256-{}-{}.sock", std::process::id(), password.is_some()));
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let server = std::thread::spawn(move || {
        let (mut peer, _) = listener.accept().unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let send = |peer: &mut UnixStream, payload: &[u8], seq: u8| {
            let mut bytes = Vec::new();
            frame(&mut bytes, payload, seq);
            peer.write_all(&bytes).unwrap();
        };
        send(&mut peer, &greeting_packet(b"8.0.36", 5, CLIENT_WANTS, b"sha256_password\0"), 0);
        let (seq, response) = read_from_client(&mut peer);
        assert_eq!(seq, 1);
        // Past the fixed fields and the user name: the answer, length first, then the
        // plugin it answers for (no database: the greeting did not offer it).
        let user_end = 32 + response[32..].iter().position(|&b| b == 0).unwrap();
        let (len, rest) = response[user_end + 1..].split_first().unwrap();
        let (answer, plugin) = rest.split_at(usize::from(*len));
        assert_eq!(plugin, b"sha256_password\0", "the response names the greeting's plugin");
        let mut answers = vec![answer.to_vec()];
        let mut seq = 2;
        if answers[0] == [SHA256_REQUEST_PUBLIC_KEY] {
            send(&mut peer, &[&[0x01][..], PUBLIC_KEY].concat(), seq);
            let (next, sealed) = read_from_client(&mut peer);
            assert_eq!(next, seq + 1);
            answers.push(sealed);
            seq += 2;
        }
        send(&mut peer, &[0x00, 0, 0, 2, 0, 0, 0], seq);
        answers
    });
    let config = Config {
        socket: Some(path.to_string_lossy().into_owned()),
        user: "u".into(),
        password: password.map(str::to_owned),
        database: None,
        ..Config::default()
    };
    let bound = Bound::connect(config.connect_deadline(), config.read_timeout, config.write_timeout);
    let login = Connection::open(&config, bound, None).map(|(conn, _)| conn.login());
    let answers = server.join().unwrap();
    let _ = std::fs::remove_file(&path);
    (login.unwrap_or_else(|e| panic!("{e:?}")), answers)
}

#[test]
fn a_sha256_password_greeting_is_answered_with_a_key_request_then_the_encrypted_password() {
    let (login, answers) = log_in_to_a_sha256_greeting(Some("secret"));
    assert_eq!(login, Login::Sha256);
    assert_eq!(answers[0], [SHA256_REQUEST_PUBLIC_KEY], "no scramble: the key is asked for at once");
    assert_eq!(answers[1].len(), 256, "one RSA block of the 2048-bit key, over the Unix socket too");
    assert_eq!(answers.len(), 2);
}

#[test]
fn a_sha256_password_greeting_is_answered_with_no_password_as_a_nul() {
    let (login, answers) = log_in_to_a_sha256_greeting(None);
    assert_eq!(login, Login::Sha256);
    assert_eq!(answers, [[SHA256_NO_PASSWORD]], "no key asked for, nothing more sent");
}

/// The next client of `listener`, its reads bounded by [`BOUND`]; polled, so that a client
/// that never connects fails the test instead of hanging it. Leaves `listener`
/// non-blocking.
fn accept_within(listener: &std::os::unix::net::UnixListener) -> UnixStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + BOUND;
    let peer = loop {
        match listener.accept() {
            Ok((peer, _)) => break peer,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => panic!("no client connected within {BOUND:?}: {e}"),
        }
    };
    peer.set_nonblocking(false).unwrap();
    peer.set_read_timeout(Some(BOUND)).unwrap();
    peer
}

#[test]
fn an_account_on_a_plugin_this_client_does_not_speak_ends_the_connect_saying_so() {
    // A scripted MySQL that greets with caching_sha2_password and then asks to switch to
    // PAM's `dialog`.
    let path = std::env::temp_dir().join(format!("mysqllock-wire-dialog-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let first = listener.try_clone().unwrap();
    let server = std::thread::spawn(move || {
        let mut peer = accept_within(&first);
        let mut bytes = Vec::new();
        frame(&mut bytes, &greeting_packet(b"8.0.36", 5, CLIENT_WANTS, b"caching_sha2_password\0"), 0);
        peer.write_all(&bytes).unwrap();
        let (seq, _) = read_from_client(&mut peer);
        let mut switch = Vec::new();
        frame(&mut switch, b"\xFEdialog\0\x04Password: \0", seq + 1);
        peer.write_all(&switch).unwrap();
        peer
    });
    let config = Config {
        socket: Some(path.to_string_lossy().into_owned()),
        user: "u".into(),
        password: Some("p".into()),
        database: None,
        ..Config::default()
    };
    let e = crate::MysqlSession::connect(&config).err().expect("connected to a server asking for dialog");
    drop(server.join().unwrap());
    // The connect is over: a second client's attempt would wait in the backlog now.
    let again = listener.accept().map(|_| ());
    let _ = std::fs::remove_file(&path);
    let text = e.to_string();
    assert!(e.is_connection(), "{text}");
    assert!(
        text.contains("the account uses dialog") && text.contains("mysqllock logs in with mysql_native_password"),
        "{text}"
    );
    assert!(matches!(&again, Err(w) if w.kind() == io::ErrorKind::WouldBlock), "connected again: {again:?}");
}

/// What [`Connection::open`] makes of `greeting` from a scripted peer that sends it and
/// then reads whatever comes until the client hangs up.
fn open_on_greeting(greeting: Vec<u8>, name: &str) -> Result<Login, OpenError> {
    let path = std::env::temp_dir().join(format!("mysqllock-wire-{name}-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let config = Config { socket: Some(path.to_string_lossy().into_owned()), ..Config::default() };
    let bound = Bound::connect(config.connect_deadline(), config.read_timeout, config.write_timeout);
    let client = std::thread::spawn(move || Connection::open(&config, bound, None).map(|(conn, _)| conn.login()));
    let mut peer = accept_within(&listener);
    let mut bytes = Vec::new();
    frame(&mut bytes, &greeting, 0);
    peer.write_all(&bytes).unwrap();
    let opened = client.join().unwrap();
    let mut rest = Vec::new();
    let _ = peer.read_to_end(&mut rest);
    let _ = std::fs::remove_file(&path);
    assert!(rest.is_empty() || opened.is_ok(), "a refused greeting was answered with {rest:?}");
    opened
}

#[test]
fn a_server_before_pluggable_authentication_is_refused_before_a_byte_is_sent() {
    let caps = CLIENT_WANTS & !CLIENT_PLUGIN_AUTH;
    let opened = open_on_greeting(greeting_packet(b"5.1.73", 3, caps, b""), "no-plugin-auth");
    assert!(
        matches!(&opened, Err(OpenError::Unsupported(why)) if why == "server 5.1.73 names no authentication plugin"),
        "{opened:?}"
    );
}

#[test]
fn a_server_without_the_4_1_protocol_is_refused_before_a_byte_is_sent() {
    let caps = CLIENT_WANTS & !CLIENT_PROTOCOL_41;
    let opened = open_on_greeting(greeting_packet(b"4.0.30", 3, caps, b"mysql_native_password\0"), "pre-4-1");
    assert!(
        matches!(&opened, Err(OpenError::Unsupported(why)) if why == "server 4.0.30 lacks the 4.1 protocol"),
        "{opened:?}"
    );
}

#[test]
fn a_mysql_8_greeting_names_its_plugin_and_a_plugin_name_may_lack_its_nul() {
    let greeting = |plugin: &[u8]| parse_greeting(&greeting_packet(b"8.0.36", 9, CLIENT_WANTS, plugin)).unwrap();
    let g = greeting(b"caching_sha2_password\0");
    assert_eq!((g.version.as_str(), g.plugin.as_str()), ("8.0.36", "caching_sha2_password"));
    assert_eq!(g.scramble, b"abcdefghijklmnopqrst");
    assert_eq!(greeting(b"mysql_native_password").plugin, NATIVE_PASSWORD);
}

#[test]
fn temporal_values_show_the_columns_fractional_digits() {
    assert_eq!(fraction(500_000, 3), ".500");
    assert_eq!(fraction(0, 6), ".000000");
    assert_eq!(fraction(0, 0), "");
    assert_eq!(fraction(7, 31), ".000007");
    assert_eq!(fraction(0, 31), "");
}

#[test]
fn an_error_packet_gives_code_and_message_without_the_sql_state() {
    let e = server_error(b"\xff\x7a\x04#42S02Table 'x.y' doesn't exist");
    assert_eq!(e.code, Some(1146));
    assert_eq!(e.message, "Table 'x.y' doesn't exist");
    assert!(!e.lost);
}
