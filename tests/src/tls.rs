//! A throw-away TLS identity for the scripted upstream: a self-signed certificate for `127.0.0.1`
//! and `localhost`, made at test time (rcgen, ring), written as PEM to a temp file for the bridge's
//! `--ca-cert`, and a rustls server configuration (ring provider; no aws-lc anywhere).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

use crate::err;
use crate::tempdir::TempDir;

/// A self-signed server certificate and its key; the PEM file is removed on drop.
#[derive(Debug)]
pub struct TestCert {
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
    pem_path: PathBuf,
    _dir: TempDir,
}

impl TestCert {
    /// Generate a certificate valid for `127.0.0.1` and `localhost` and write it to `cert.pem` in a
    /// fresh temp directory.
    pub fn generate() -> crate::Result<Self> {
        let rcgen::CertifiedKey { cert, signing_key } = rcgen::generate_simple_self_signed(vec![
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
        ])
        .map_err(|e| err(format!("cannot generate a test certificate: {e}")))?;
        let dir = TempDir::new("tls")?;
        let pem_path = dir.path().join("cert.pem");
        let cert_pem = cert.pem();
        std::fs::write(&pem_path, &cert_pem)?;
        Ok(Self {
            cert_pem,
            cert_der: cert.der().clone(),
            key_der: signing_key.serialize_der(),
            pem_path,
            _dir: dir,
        })
    }

    /// The certificate as PEM (it is its own CA).
    pub fn pem(&self) -> &str {
        &self.cert_pem
    }

    /// The PEM file to pass as `--ca-cert`.
    pub fn pem_path(&self) -> &Path {
        &self.pem_path
    }

    /// A TLS acceptor serving this certificate (ring provider, TLS 1.2 and 1.3, HTTP/1.1 only).
    pub fn acceptor(&self) -> crate::Result<TlsAcceptor> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }
}
