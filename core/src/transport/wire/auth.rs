//! The handshake: the greeting, TLS, the handshake response and each plugin's steps.
//!
//! `caching_sha2_password`'s full authentication (the server's cache does not know the
//! account: the first login after a start, a `FLUSH PRIVILEGES` or a password change)
//! sends the password itself: in clear inside TLS or over a Unix socket, which the
//! server counts as secure, and over plain TCP encrypted with the server's RSA key
//! (OAEP), the one place this client uses RSA. Three ways to get there were weighed:
//! - handing such a connection to the `mysql` crate (which can do it, and was the
//!   fallback then): refused, because the connection abandoned at the server's request
//!   for the password counts as a failed login (measured on MySQL 9.7.4: an account with
//!   `FAILED_LOGIN_ATTEMPTS 1` is blocked by one such hang-up, error 3955), and it would
//!   cost every first login a second connection;
//! - the `rsa` crate (0.9; 0.10 needs Rust 1.87): 18 more crates (num-bigint-dig, rand
//!   0.8, a second getrandom, pkcs1/pkcs8/spki/der, zerocopy...) for one encryption. A
//!   clean `cargo build --release -p mysqllock-core` took 126 s of CPU with it against
//!   102 s without (user + sys, medians of three builds each, 2 cores shared with other
//!   builds, so wall times were not comparable), about a quarter more;
//! - the RSA code the `mysql` crate's own full authentication calls, in `mysql_common`
//!   (the crate it is built on, and already a dependency for ed25519). It panics on a key
//!   it cannot parse and on a message too long for the key; the length is checked first
//!   and the key is read by the core itself ([`super::rsa_key`]). Taken.
//!
//! `sha256_password` has no scramble and no cache: every login sends the password, RSA-
//! encrypted the same way ([`Connection::send_sealed`]), over the Unix socket too. Unlike
//! `caching_sha2_password`, its server side takes the password in clear only over TLS
//! (MySQL's `sha256_password_authenticate` asks `my_vio_is_encrypted`, where
//! `caching_sha2_password` asks `my_vio_is_secure`); a clear password over the socket is
//! refused as a wrong one (tried on MySQL 9.7.4).

use sha1::{Digest, Sha1};
use sha2::Sha256;

use super::rsa_key::read_public_key;
use super::*;

pub(super) const NATIVE_PASSWORD: &str = "mysql_native_password";
pub(super) const CACHING_SHA2: &str = "caching_sha2_password";
pub(super) const SHA256_PASSWORD: &str = "sha256_password";
/// MariaDB's ed25519 plugin: the client signs the server's 32-byte nonce with a key
/// derived from the password (the password never travels).
pub(super) const ED25519: &str = "client_ed25519";
/// `caching_sha2_password`'s steps after the scramble (AuthMoreData, 0x01, then one byte).
pub(super) const SHA2_FAST_AUTH_SUCCESS: u8 = 0x03;
pub(super) const SHA2_PERFORM_FULL_AUTH: u8 = 0x04;
/// The client's request for the server's RSA public key during full authentication.
pub(super) const SHA2_REQUEST_PUBLIC_KEY: u8 = 0x02;
/// `sha256_password`'s first answers: the request for the server's RSA public key, and
/// "no password".
pub(super) const SHA256_REQUEST_PUBLIC_KEY: u8 = 0x01;
pub(super) const SHA256_NO_PASSWORD: u8 = 0x00;

impl Connection {
    /// A login the server refused, with what TLS may have to do with it: MariaDB
    /// answers a plain connection to a server with `require_secure_transport` (or to an
    /// account created `REQUIRE SSL`) with the same "Access denied" as a wrong password,
    /// and an `X509` account without a client certificate too. The usual advice for an
    /// access denied comes first: it is still the likelier cause.
    pub(super) fn explain_refusal(&self, mut e: SessionError, config: &Config, offered: bool) -> SessionError {
        let hint = match e.code {
            // MySQL's ER_SECURE_TRANSPORT_REQUIRED
            Some(3159) => format!(
                "; TLS: the server requires it: connect with ssl-mode=REQUIRED or VERIFY_IDENTITY (now {})",
                config.tls.mode().name()
            ),
            Some(1045) if !self.encrypted() && offered => format!(
                " (check the user name and password); TLS: this connection did not use TLS \
                 (ssl-mode={}{}), and a server with require_secure_transport or an account created \
                 REQUIRE SSL refuses such logins so: if the password is right, connect with \
                 ssl-mode=REQUIRED or VERIFY_IDENTITY",
                config.tls.mode().name(),
                if config.socket.is_some() { ", over a Unix socket" } else { "" }
            ),
            Some(1045) if self.encrypted() && config.tls.cert.is_none() => {
                " (check the user name and password); TLS: if the account was created REQUIRE X509 \
                 (or SUBJECT/ISSUER), it needs a client certificate: set ssl-cert and ssl-key"
                    .to_owned()
            }
            _ => return e,
        };
        e.message.push_str(&hint);
        e
    }

    /// The capabilities this client asks the server for (the SSL request adds `CLIENT_SSL`).
    pub(super) fn capabilities(&self, config: &Config) -> u32 {
        let g = &self.greeting;
        let mut caps = CLIENT_WANTS & (g.capabilities | CLIENT_LONG_PASSWORD);
        if config.database.is_some() {
            caps |= CLIENT_CONNECT_WITH_DB & g.capabilities;
        }
        if self.encrypted() {
            caps |= CLIENT_SSL;
        }
        caps
    }
}

impl Exchange<'_> {
    /// The SSL request (the handshake response's first fields with `CLIENT_SSL`), then
    /// the TLS handshake on the socket, under the exchange's bound; the authentication
    /// continues inside TLS.
    pub(super) fn start_tls(&mut self, config: &Config) -> Result<(), OpenError> {
        let failed = |why: String| OpenError::Failed(SessionError::lost(why));
        let settings = super::super::tls::client_config(&config.tls).map_err(failed)?;
        let name = super::super::tls::server_name(&config.host).map_err(failed)?;
        let caps = self.capabilities(config) | CLIENT_SSL;
        let mut body = Vec::with_capacity(32);
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&CLIENT_MAX_PACKET.to_le_bytes());
        body.push(HANDSHAKE_COLLATION);
        body.extend_from_slice(&[0; 23]);
        let mut request = Vec::with_capacity(36);
        self.append_packets(&mut request, &body);
        self.send(&request).map_err(OpenError::Failed)?;
        if !self.inbox.is_empty() {
            return Err(OpenError::Failed(self.malformed("data before the TLS handshake")));
        }
        if self.encrypted() {
            return Err(OpenError::Failed(self.fail(SessionError::lost("TLS started twice"))));
        }
        let mut tls =
            rustls::ClientConnection::new(settings, name).map_err(|e| failed(format!("TLS setup failed: {e}")))?;
        let bound = self.bound;
        while tls.is_handshaking() {
            if let Err(e) = tls.complete_io(&mut self.conn.stream.socket.bounded(bound)) {
                if timed_out(&e) {
                    let stalled = stalled(&self.peer, bound.limit(false), bound.during());
                    return Err(OpenError::Failed(self.fail(stalled)));
                }
                let why = super::super::tls::handshake_failure(&e, &config.tls, &config.host);
                return Err(OpenError::Failed(self.fail(SessionError::lost(why))));
            }
        }
        self.conn.stream.tls = Some(Box::new(tls));
        Ok(())
    }

    pub(super) fn read_greeting(&mut self) -> Result<Greeting, OpenError> {
        let packet = self.read_packet().map_err(OpenError::Failed)?;
        if packet.first() == Some(&0xFF) {
            return Err(OpenError::Failed(server_error(&packet)));
        }
        parse_greeting(&packet).ok_or_else(|| OpenError::Unsupported("a greeting this client cannot read".into()))
    }

    /// The handshake response, answering the greeting's nonce for `plugin`.
    pub(super) fn handshake_response(&mut self, config: &Config, plugin: &str) -> Vec<u8> {
        let caps = self.capabilities(config);
        let g = &self.greeting;
        let mut body = Vec::with_capacity(128);
        body.extend_from_slice(&caps.to_le_bytes());
        body.extend_from_slice(&CLIENT_MAX_PACKET.to_le_bytes());
        body.push(HANDSHAKE_COLLATION);
        body.extend_from_slice(&[0; 23]);
        body.extend_from_slice(config.user.as_bytes());
        body.push(0);
        let auth = scramble(plugin, config.password.as_deref().unwrap_or(""), &g.scramble, self.encrypted());
        body.push(auth.len() as u8); // 0, 1, 20 or 32, or a password over TLS
        body.extend_from_slice(&auth);
        if caps & CLIENT_CONNECT_WITH_DB != 0 {
            body.extend_from_slice(config.database.as_deref().unwrap_or("").as_bytes());
            body.push(0);
        }
        if caps & CLIENT_PLUGIN_AUTH != 0 {
            body.extend_from_slice(plugin.as_bytes());
            body.push(0);
        }
        let mut request = Vec::with_capacity(body.len() + 4);
        self.append_packets(&mut request, &body);
        request
    }

    /// Reads the server's verdict on the handshake response, taking the steps it asks
    /// for: a switch to one of the three plugins (answered for the switch's fresh nonce),
    /// `caching_sha2_password`'s full authentication, and `sha256_password`'s public key
    /// (which the first answer asked for).
    pub(super) fn finish_auth(
        &mut self,
        config: &Config,
        mut plugin: &'static str,
        pipelined: bool,
    ) -> Result<Login, OpenError> {
        let password = config.password.as_deref().unwrap_or("");
        let mut nonce = self.greeting.scramble.clone();
        let mut login = login_of(plugin);
        // sha256_password: the first answer asked for the server's key, not answered yet.
        // Over TLS the password went in clear instead.
        let secure = self.encrypted();
        let mut key_asked = plugin == SHA256_PASSWORD && !password.is_empty() && !secure;
        loop {
            let packet = self.read_packet().map_err(OpenError::Failed)?;
            match packet.first() {
                Some(0x00) => return Ok(login),
                Some(0xFF) => return Err(OpenError::Failed(server_error(&packet))),
                Some(0xFE) if packet.len() > 1 => {
                    let mut c = Cursor::new(&packet[1..]);
                    let name = c.nul_str().unwrap_or_default();
                    plugin = match name.as_str() {
                        NATIVE_PASSWORD => NATIVE_PASSWORD,
                        CACHING_SHA2 => CACHING_SHA2,
                        SHA256_PASSWORD => SHA256_PASSWORD,
                        ED25519 => ED25519,
                        _ => return Err(OpenError::Unsupported(format!("the account uses {name}"))),
                    };
                    if pipelined {
                        return Err(OpenError::Switched);
                    }
                    login = login_of(plugin);
                    key_asked = plugin == SHA256_PASSWORD && !password.is_empty() && !secure;
                    let data = c.rest();
                    // The scrambles end in a NUL; ed25519's nonce is 32 bytes of any value.
                    nonce = match plugin {
                        ED25519 => data.to_vec(),
                        _ => data.strip_suffix(&[0]).unwrap_or(data).to_vec(),
                    };
                    self.send_auth(&scramble(plugin, password, &nonce, secure))?;
                }
                // AuthMoreData, the verdict on the scramble: fast success (the OK follows)
                // or the full authentication.
                Some(0x01) if plugin == CACHING_SHA2 => match packet[1..] {
                    [SHA2_FAST_AUTH_SUCCESS] => {}
                    [SHA2_PERFORM_FULL_AUTH] => {
                        self.full_auth(password, &nonce)?;
                        login = Login::Sha2Full;
                    }
                    _ => return Err(OpenError::Failed(self.malformed("a caching_sha2_password step"))),
                },
                // AuthMoreData, the public key the first answer asked for.
                Some(0x01) if plugin == SHA256_PASSWORD && key_asked => {
                    key_asked = false;
                    self.send_sealed(&packet[1..], password, &nonce)?;
                }
                Some(0x01) if plugin == SHA256_PASSWORD => {
                    return Err(OpenError::Failed(self.malformed("a sha256_password step")))
                }
                _ if pipelined => return Err(OpenError::Switched),
                _ => {
                    return Err(OpenError::Unsupported(
                        "the server asked for an authentication step this client does not take".into(),
                    ))
                }
            }
        }
    }

    /// `caching_sha2_password`'s full authentication: the password and a NUL, in clear
    /// over TLS or a Unix socket (which the server counts as secure), over plain TCP XORed
    /// with the nonce and encrypted with the server's RSA public key, asked for first (a
    /// round trip more; the key is not kept, as full authentications are rare: one per
    /// account after a server start or a `FLUSH PRIVILEGES`).
    pub(super) fn full_auth(&mut self, password: &str, nonce: &[u8]) -> Result<(), OpenError> {
        if self.encrypted() || self.stream.socket.is_unix() {
            return self.send_auth(&with_nul(password));
        }
        self.send_auth(&[SHA2_REQUEST_PUBLIC_KEY])?;
        let packet = self.read_packet().map_err(OpenError::Failed)?;
        let key = match packet.split_first() {
            Some((0x01, key)) => key,
            Some((0xFF, _)) => return Err(OpenError::Failed(server_error(&packet))),
            _ => return Err(OpenError::Failed(self.malformed("a public key"))),
        };
        self.send_sealed(key, password, nonce)
    }

    /// The password and a NUL, XORed with the nonce (repeated) and encrypted with the
    /// server's RSA public key `pem`: how `caching_sha2_password`'s full authentication
    /// and `sha256_password` send the password where the server wants it encrypted.
    pub(super) fn send_sealed(&mut self, pem: &[u8], password: &str, nonce: &[u8]) -> Result<(), OpenError> {
        let mut clear = with_nul(password);
        for (byte, n) in clear.iter_mut().zip(nonce.iter().cycle()) {
            *byte ^= n;
        }
        match rsa_encrypt(pem, &clear) {
            Ok(sealed) => self.send_auth(&sealed),
            Err(why) => Err(OpenError::Failed(self.fail(SessionError::lost(why)))),
        }
    }

    /// Sends one answer of the authentication exchange, continuing its sequence.
    pub(super) fn send_auth(&mut self, payload: &[u8]) -> Result<(), OpenError> {
        let mut packet = Vec::with_capacity(payload.len() + 4);
        self.append_packets(&mut packet, payload);
        self.send(&packet).map_err(OpenError::Failed)
    }
}

pub(super) fn parse_greeting(packet: &[u8]) -> Option<Greeting> {
    let mut c = Cursor::new(packet);
    if c.u8()? != 10 {
        return None;
    }
    let version = c.nul_str()?;
    let connection_id = c.u32()?;
    let mut scramble = c.bytes(8)?.to_vec();
    c.u8()?; // filler
    let low = u32::from(c.u16()?);
    let mut capabilities = low;
    let mut plugin = String::new();
    if let (Some(_charset), Some(_status), Some(high)) = (c.u8(), c.u16(), c.u16()) {
        capabilities |= u32::from(high) << 16;
        let auth_len = usize::from(c.u8()?);
        c.bytes(10)?; // reserved (MariaDB keeps its extended capabilities here)
        if capabilities & CLIENT_SECURE_CONNECTION != 0 {
            let part = c.bytes(auth_len.saturating_sub(8).max(13))?;
            let part = part.strip_suffix(&[0]).unwrap_or(part);
            scramble.extend_from_slice(part);
        }
        if capabilities & CLIENT_PLUGIN_AUTH != 0 {
            plugin = c.nul_str().unwrap_or_else(|| String::from_utf8_lossy(c.rest()).into_owned());
        }
    }
    Some(Greeting { version, connection_id, capabilities, scramble, plugin })
}

/// The first answer to the server for `plugin`, one of the four this client speaks: a
/// scramble of the nonce, an ed25519 signature of it, or for `sha256_password` (which
/// has neither) the password in clear over TLS (`secure`), else the request for the
/// server's public key, or "no password" (a NUL, as MySQL's own client sends it; the
/// server also takes nothing at all).
pub(super) fn scramble(plugin: &str, password: &str, nonce: &[u8], secure: bool) -> Vec<u8> {
    match plugin {
        CACHING_SHA2 => sha2_password(password, nonce),
        SHA256_PASSWORD if password.is_empty() => vec![SHA256_NO_PASSWORD],
        SHA256_PASSWORD if secure => with_nul(password),
        SHA256_PASSWORD => vec![SHA256_REQUEST_PUBLIC_KEY],
        ED25519 => mysql_common::scramble::create_response_for_ed25519(password.as_bytes(), nonce).to_vec(),
        _ => native_password(password, nonce),
    }
}

/// What a login with `plugin` is, before the server has said more.
pub(super) fn login_of(plugin: &str) -> Login {
    match plugin {
        CACHING_SHA2 => Login::Sha2Fast,
        SHA256_PASSWORD => Login::Sha256,
        ED25519 => Login::Ed25519,
        _ => Login::Native,
    }
}

/// The password as the plugins send it itself: its bytes and a NUL.
pub(super) fn with_nul(password: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(password.len() + 1);
    bytes.extend_from_slice(password.as_bytes());
    bytes.push(0);
    bytes
}

/// `caching_sha2_password`'s scramble: SHA256(password) XOR
/// SHA256(SHA256(SHA256(password)) + nonce), the stored hash before the nonce (as
/// mysql_common has it; MariaDB's protocol page writes the nonce first, and MySQL 9.7.4
/// does not take that: its cache misses and it asks for the full authentication, tried).
/// The password never travels; an empty one is sent as nothing.
pub(super) fn sha2_password(password: &str, nonce: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let once = Sha256::digest(password.as_bytes());
    let twice = Sha256::digest(once);
    let mut salted = Sha256::new();
    salted.update(twice);
    salted.update(nonce.get(..20).unwrap_or(nonce));
    once.iter().zip(salted.finalize()).map(|(a, b)| a ^ b).collect()
}

/// RSA encryption (OAEP, SHA-1) of `message` with the PEM public key the server sent,
/// read by [`read_public_key`] (checked, bounded in size) and encrypted by the RSA code
/// the `mysql` crate's own full authentication uses (see the module documentation),
/// which panics on a message too long for the key: checked here first.
pub(super) fn rsa_encrypt(pem: &[u8], message: &[u8]) -> Result<Vec<u8>, String> {
    use mysql_common::crypto::rsa::{GetRandom, Pkcs1OaepPadding, PublicKey};
    use mysql_common::num_bigint::BigUint;
    let (modulus, exponent) = read_public_key(pem)?;
    let key = PublicKey::new(BigUint::from_bytes_be(&modulus), BigUint::from_bytes_be(&exponent));
    // OAEP with SHA-1 carries at most k - 2 * 20 - 2 bytes for a k-byte modulus.
    let room = key.num_octets().saturating_sub(42);
    if message.len() > room {
        return Err(format!(
            "a password of {} bytes is too long for the server's {}-bit RSA key (at most {})",
            message.len().saturating_sub(1),
            key.modulus().bits(),
            room.saturating_sub(1)
        ));
    }
    Ok(key.encrypt_block(message, Pkcs1OaepPadding::new(GetRandom)))
}

/// `mysql_native_password`: SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password))).
/// The password never travels; an empty one is sent as nothing.
pub(super) fn native_password(password: &str, scramble: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let once = Sha1::digest(password.as_bytes());
    let twice = Sha1::digest(once);
    let mut salted = Sha1::new();
    salted.update(scramble.get(..20).unwrap_or(scramble));
    salted.update(twice);
    once.iter().zip(salted.finalize()).map(|(a, b)| a ^ b).collect()
}
