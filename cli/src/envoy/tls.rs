//! TLS on the gRPC port, as envoyproxy/ratelimit serves it: `GRPC_SERVER_USE_TLS=true` with
//! `GRPC_SERVER_TLS_CERT`/`GRPC_SERVER_TLS_KEY` (PEM files, picked up again when they change on
//! disk: a renewed pair is served within [`RELOAD_EVERY`]); with `GRPC_CLIENT_TLS_CACERT`,
//! mutual TLS (a client certificate chaining to that CA is required), and with
//! `GRPC_CLIENT_TLS_SAN`, that certificate must also be valid for that name.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ParsedCertificate, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DistinguishedName, RootCertStore, ServerConfig, SignatureScheme};
use tokio::net::TcpListener;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::settings::{GrpcServerTls, SettingError};

/// How often the certificate files are looked at for a change.
pub const RELOAD_EVERY: Duration = Duration::from_secs(1);

/// The crypto the service's TLS uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of `path` (PEM), named by `variable` in errors.
pub fn read_certificates(
    variable: &str,
    path: &str,
) -> Result<Vec<CertificateDer<'static>>, SettingError> {
    let certificates = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| SettingError(format!("{variable}={path:?}: {e}")))?;
    if certificates.is_empty() {
        return Err(SettingError(format!("{variable}={path:?}: no PEM certificate in the file")));
    }
    Ok(certificates)
}

/// A certificate and its key, ready to serve.
fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, SettingError> {
    let chain = read_certificates("GRPC_SERVER_TLS_CERT", &cert.display().to_string())?;
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| SettingError(format!("GRPC_SERVER_TLS_KEY={:?}: {e}", key.display())))?;
    CertifiedKey::from_der(chain, key_der, &provider()).map_err(|e| {
        SettingError(format!(
            "GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY ({}, {}): {e}",
            cert.display(),
            key.display()
        ))
    })
}

/// What identifies a file's version: modification time, size and inode (a rename over it
/// changes the inode even within one mtime tick).
fn stamp(path: &Path) -> Option<(SystemTime, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}

/// The served certificate, swapped when its files change.
#[derive(Debug)]
struct ReloadingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().map_or_else(|p| p.into_inner().clone(), |c| c.clone()))
    }
}

impl ReloadingCert {
    /// Every [`RELOAD_EVERY`], reloads the pair when either file changed; a pair that does
    /// not load (half written, mismatched) is logged and the one in use stays.
    fn watch(self: Arc<Self>, cert: PathBuf, key: PathBuf) {
        tokio::spawn(async move {
            let mut seen = (stamp(&cert), stamp(&key));
            loop {
                tokio::time::sleep(RELOAD_EVERY).await;
                let now = (stamp(&cert), stamp(&key));
                if now == seen {
                    continue;
                }
                match load_pair(&cert, &key) {
                    Ok(pair) => {
                        let pair = Arc::new(pair);
                        match self.current.write() {
                            Ok(mut current) => *current = pair,
                            Err(poisoned) => *poisoned.into_inner() = pair,
                        }
                        tracing::warn!(cert = %cert.display(), "gRPC server certificate reloaded");
                        seen = now;
                    }
                    Err(e) => tracing::error!("gRPC server certificate not reloaded: {e}"),
                }
            }
        });
    }
}

/// Client certificates checked against the CA, then (`GRPC_CLIENT_TLS_SAN`) for one name.
#[derive(Debug)]
struct SanVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    name: ServerName<'static>,
}

impl ClientCertVerifier for SanVerifier {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.inner.verify_client_cert(end_entity, intermediates, now)?;
        let parsed = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, &self.name)?;
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The gRPC port's TLS: the acceptor (its certificate reloaded as the files change; call
/// from within the runtime).
pub fn acceptor(tls: &GrpcServerTls) -> Result<TlsAcceptor, SettingError> {
    let (cert, key) = (PathBuf::from(&tls.cert), PathBuf::from(&tls.key));
    let resolver =
        Arc::new(ReloadingCert { current: RwLock::new(Arc::new(load_pair(&cert, &key)?)) });
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| SettingError(format!("GRPC_SERVER_USE_TLS: {e}")))?;
    let builder = if tls.client_ca.is_empty() {
        builder.with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        for certificate in read_certificates("GRPC_CLIENT_TLS_CACERT", &tls.client_ca)? {
            roots.add(certificate).map_err(|e| {
                SettingError(format!("GRPC_CLIENT_TLS_CACERT={:?}: {e}", tls.client_ca))
            })?;
        }
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .build()
            .map_err(|e| {
                SettingError(format!("GRPC_CLIENT_TLS_CACERT={:?}: {e}", tls.client_ca))
            })?;
        if tls.client_san.is_empty() {
            builder.with_client_cert_verifier(verifier)
        } else {
            let name = ServerName::try_from(tls.client_san.clone()).map_err(|e| {
                SettingError(format!("GRPC_CLIENT_TLS_SAN={:?}: {e}", tls.client_san))
            })?;
            builder.with_client_cert_verifier(Arc::new(SanVerifier { inner: verifier, name }))
        }
    };
    let mut config = builder.with_cert_resolver(resolver.clone());
    config.alpn_protocols = vec![b"h2".to_vec()];
    resolver.watch(cert, key);
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The TLS connections accepted on `listener`, each handshake in its own task (a slow or
/// failed one holds up nobody), `TCP_NODELAY` on every socket.
pub fn incoming(
    listener: TcpListener,
    acceptor: TlsAcceptor,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<TlsStream<tokio::net::TcpStream>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            let (socket, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("gRPC accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            let (acceptor, sender) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(socket)).await {
                    Ok(Ok(stream)) => {
                        let _ = sender.send(Ok(stream)).await;
                    }
                    Ok(Err(e)) => tracing::warn!(%peer, "gRPC TLS handshake failed: {e}"),
                    Err(_) => tracing::warn!(%peer, "gRPC TLS handshake timed out"),
                }
            });
            if tx.is_closed() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}
