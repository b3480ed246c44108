//! A certificate for `localhost` and `127.0.0.1` and the TLS acceptor that serves it, shared by
//! the fetch and egress tests.

use std::sync::Arc;

/// An acceptor with a fresh self-signed certificate, and the certificate (to trust as a root).
pub(crate) fn tls_material() -> (tokio_rustls::TlsAcceptor, Vec<u8>) {
    tls_material_with(rustls::crypto::ring::default_provider())
}

/// [`tls_material`] with the cryptography of `provider` (its key exchange groups, say).
#[allow(dead_code, reason = "the egress tests use it, the fetch tests do not")]
pub(crate) fn tls_material_with(
    provider: rustls::crypto::CryptoProvider,
) -> (tokio_rustls::TlsAcceptor, Vec<u8>) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    let der = cert.cert.der().to_vec();
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
    let provider = Arc::new(provider);
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(der.clone())],
            key,
        )
        .unwrap();
    (tokio_rustls::TlsAcceptor::from(Arc::new(config)), der)
}
