//! TLS for the own wire client ([`super::wire`]): the rustls client configuration a
//! connection's [`Tls`] settings call for, and messages that say why a handshake failed.
//!
//! rustls with ring as its crypto provider: no OpenSSL (none to install, none to match
//! versions with), and no cmake, which aws-lc-rs would need. The system's CA store
//! (`/etc/ssl/certs`, or `SSL_CERT_FILE`/`SSL_CERT_DIR`) is read through
//! rustls-native-certs when `ssl-ca` names none.
//!
//! A configuration is built once per distinct setting and kept for the process: reading
//! the system's store parses some 150 certificates (a millisecond or more), and a kept
//! configuration keeps rustls's session cache, so a process's later connections to the
//! same server resume their TLS session instead of a full handshake.

use std::sync::Arc;

use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::{SslMode, Tls};

/// Configurations built in this process, by the settings that shaped them.
static CONFIGS: Mutex<Vec<(Tls, Arc<ClientConfig>)>> = Mutex::new(Vec::new());

/// The rustls configuration for `tls` (built on first use, then shared).
pub(crate) fn client_config(tls: &Tls) -> Result<Arc<ClientConfig>, String> {
    let key = Tls { mode: Some(tls.mode()), ..tls.clone() };
    if let Some((_, config)) = CONFIGS.lock().iter().find(|(k, _)| *k == key) {
        return Ok(config.clone());
    }
    let config = Arc::new(build(&key)?);
    CONFIGS.lock().push((key, config.clone()));
    Ok(config)
}

/// The name the certificate is checked against: the host connected to (over a Unix
/// socket, the configured host, `localhost` unless set).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is not a host name TLS can check a certificate against"))
}

fn build(tls: &Tls) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    let chain = match tls.verifies_chain() {
        false => None,
        true => Some(
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots(tls.ca.as_deref())?), provider.clone())
                .build()
                .map_err(|e| format!("TLS setup failed: {e}"))?,
        ),
    };
    let verifier = Arc::new(Verifier {
        chain,
        check_name: tls.mode() == SslMode::VerifyIdentity,
        algorithms: provider.signature_verification_algorithms,
    });
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read the client certificate ssl-cert={cert}: {e}"))?;
            if chain.is_empty() {
                return Err(format!("ssl-cert={cert} holds no PEM certificate"));
            }
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| format!("cannot read the client key ssl-key={key}: {e}"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("ssl-cert and ssl-key do not make a usable client certificate: {e}"))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// The CAs to trust: the certificates of `ssl-ca` only, or the system's store.
fn roots(ca: Option<&str>) -> Result<RootCertStore, String> {
    let mut store = RootCertStore::empty();
    match ca {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read ssl-ca={path}: {e}"))?;
            let (added, _) = store.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("ssl-ca={path} holds no usable PEM certificate"));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                return Err(
                    "the system's CA store is empty or unreadable (install ca-certificates, or name the CA with ssl-ca)"
                        .into(),
                );
            }
        }
    }
    Ok(store)
}

/// Why a TLS handshake failed, in the user's terms: which setting to look at. `e` is
/// the I/O error rustls's handshake ended with; `tls` and `host` what was asked.
pub(crate) fn handshake_failure(e: &std::io::Error, tls: &Tls, host: &str) -> String {
    let trusted = match &tls.ca {
        Some(path) => format!("the CA in ssl-ca={path}"),
        None => "a CA of the system's store (name the server's CA with ssl-ca)".to_owned(),
    };
    let rustls_error = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::InvalidCertificate(why)) => match why {
            CertificateError::UnknownIssuer | CertificateError::BadSignature => {
                format!("TLS: the server's certificate is not signed by {trusted}")
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
                "TLS: the server's certificate is not for {host} (ssl-mode=VERIFY_IDENTITY checks the host name: \
                 connect by a name the certificate lists, or use VERIFY_CA)"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "TLS: the server's certificate has expired".to_owned()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "TLS: the server's certificate is not valid yet (is the clock right?)".to_owned()
            }
            other => format!("TLS: the server's certificate was refused: {other:?}"),
        },
        Some(rustls::Error::AlertReceived(alert)) if tls.cert.is_none() => format!(
            "TLS: the server ended the handshake ({alert:?}); if it wants a client certificate, set ssl-cert and ssl-key"
        ),
        Some(other) => format!("TLS handshake with the server failed: {other}"),
        None => format!("TLS handshake with the server failed: {e}"),
    }
}

/// How the server's certificate is judged. The handshake's signatures are verified
/// in every mode, so the session's keys belong to the certificate shown.
/// - `PREFERRED` and `REQUIRED` without `ssl-ca` (`chain` is `None`): the certificate is
///   not checked, as the `mysql` client does in these modes.
/// - `VERIFY_CA` and `VERIFY_IDENTITY` (and any mode given `ssl-ca`): the chain must lead
///   to a trusted CA; the host name is checked only for `VERIFY_IDENTITY`. rustls's
///   verifier checks the chain first and the name after, so a name error means the chain
///   passed: that one error is what `VERIFY_CA` lets through.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_ca_file_is_named() {
        let tls = Tls { ca: Some("/nonexistent/ca.pem".into()), ..Tls::default() };
        let e = client_config(&tls).expect_err("a missing CA file was accepted");
        assert!(e.contains("ssl-ca=/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn a_certificate_without_its_key_file_is_named() {
        let tls = Tls {
            mode: Some(SslMode::Required),
            cert: Some("/nonexistent/c.pem".into()),
            key: Some("/nonexistent/k.pem".into()),
            ..Tls::default()
        };
        let e = client_config(&tls).expect_err("a missing client certificate was accepted");
        assert!(e.contains("ssl-cert=/nonexistent/c.pem"), "{e}");
    }

    #[test]
    fn one_configuration_per_setting() {
        let tls = Tls { mode: Some(SslMode::Required), ..Tls::default() };
        let (a, b) = (client_config(&tls).unwrap(), client_config(&tls).unwrap());
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn ip_addresses_and_names_are_checkable() {
        assert!(server_name("127.0.0.1").is_ok());
        assert!(server_name("db.example").is_ok());
        assert!(server_name("not a host").is_err());
    }
}
