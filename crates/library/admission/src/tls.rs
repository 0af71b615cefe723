//! The serving certificate, read from PEM files and reloaded when they
//! change. Kubernetes Secret volumes rotate by swapping a `..data` symlink,
//! so the files are compared by content (read through the symlinks), which
//! catches every kind of replacement. A half-written or mismatched pair is
//! logged and ignored until a consistent pair appears; the previous
//! certificate keeps serving meanwhile.
//!
//! A reload bumps a generation number that servers watch: they close their
//! open connections gracefully, so that clients (the apiserver keeps
//! connections alive) handshake again and see the new certificate on
//! their next review.

use std::{
    fmt,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
    time::Duration,
};

use rustls::{
    ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};

/// How often the files are checked for changes.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// Errors reading or using a certificate and key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("failed to read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} contains no PEM certificate")]
    NoCertificate { path: PathBuf },
    #[error("failed to parse certificates in {path}: {source}")]
    Certificate {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("failed to parse the private key in {path}: {source}")]
    Key {
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("unsupported private key in {path}: {source}")]
    UnsupportedKey {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error("the private key does not match the certificate: {0}")]
    Mismatch(rustls::Error),
    #[error("failed to build the TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// Where the certificate chain and its key are read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsPaths {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The ring crypto provider, the only one this project builds.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parses a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or
/// SEC1) into a key rustls can serve, checking that they belong together.
pub fn parse_certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    paths: &TlsPaths,
) -> Result<CertifiedKey, TlsError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Certificate {
            path: paths.cert.clone(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: paths.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|source| TlsError::Key {
        path: paths.key.clone(),
        source,
    })?;
    let signing_key = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|source| TlsError::UnsupportedKey {
            path: paths.key.clone(),
            source,
        })?;
    let certified = CertifiedKey::new(certs, signing_key);
    certified.keys_match().map_err(TlsError::Mismatch)?;
    Ok(certified)
}

/// The current serving certificate, shared by every TLS handshake.
pub struct CertStore {
    paths: TlsPaths,
    state: RwLock<Loaded>,
    generation: tokio::sync::watch::Sender<u64>,
}

struct Loaded {
    key: Arc<CertifiedKey>,
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

impl CertStore {
    /// Reads the files; fails if they are missing or unusable.
    pub fn load(paths: TlsPaths) -> Result<Arc<Self>, TlsError> {
        let cert_pem = read(&paths.cert)?;
        let key_pem = read(&paths.key)?;
        let key = Arc::new(parse_certified_key(&cert_pem, &key_pem, &paths)?);
        Ok(Arc::new(Self {
            paths,
            state: RwLock::new(Loaded {
                key,
                cert_pem,
                key_pem,
            }),
            generation: tokio::sync::watch::Sender::new(0),
        }))
    }

    /// Loads the files, retrying every second while they are missing or
    /// unusable (a Secret may be mounted after the process starts); `None`
    /// if `stop` resolves first.
    pub async fn load_when_available(
        paths: TlsPaths,
        stop: impl Future<Output = ()>,
    ) -> Option<Arc<Self>> {
        tokio::pin!(stop);
        loop {
            match Self::load(paths.clone()) {
                Ok(certs) => return Some(certs),
                Err(error) => {
                    tracing::warn!(%error, "waiting for a usable certificate");
                    tokio::select! {
                        () = &mut stop => return None,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }
        }
    }

    /// Changes each time a new certificate is loaded.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The files this store reads.
    pub fn paths(&self) -> &TlsPaths {
        &self.paths
    }

    /// The certificate chain currently served, PEM encoded.
    pub fn cert_pem(&self) -> Vec<u8> {
        self.read_state(|s| s.cert_pem.clone())
    }

    /// Re-reads the files and swaps the certificate if they changed.
    /// Returns whether a new certificate is now served.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let cert_pem = read(&self.paths.cert)?;
        let key_pem = read(&self.paths.key)?;
        if self.read_state(|s| s.cert_pem == cert_pem && s.key_pem == key_pem) {
            return Ok(false);
        }
        let key = Arc::new(parse_certified_key(&cert_pem, &key_pem, &self.paths)?);
        let mut state = self
            .state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *state = Loaded {
            key,
            cert_pem,
            key_pem,
        };
        drop(state);
        self.generation.send_modify(|generation| *generation += 1);
        Ok(true)
    }

    /// Polls the files every [`RELOAD_INTERVAL`] until `stop` resolves.
    pub async fn watch(self: Arc<Self>, stop: impl Future<Output = ()>) {
        let mut ticks = tokio::time::interval(RELOAD_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = ticks.tick() => {}
            }
            let store = self.clone();
            let result = tokio::task::spawn_blocking(move || store.reload_if_changed()).await;
            match result {
                Ok(Ok(true)) => {
                    tracing::info!(cert = %self.paths.cert.display(), "serving certificate reloaded");
                    last_error = None;
                }
                Ok(Ok(false)) => last_error = None,
                Ok(Err(error)) => {
                    // Rotation writes two files; an inconsistent pair is
                    // normal for a moment. Log each distinct error once.
                    let text = error.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(%error, "keeping the current certificate");
                        last_error = Some(text);
                    }
                }
                Err(error) => tracing::error!(%error, "certificate reload task failed"),
            }
        }
    }

    /// A TLS 1.3 server configuration (ALPN h2 and http/1.1) serving the
    /// current certificate of this store.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }

    fn read_state<T>(&self, f: impl FnOnce(&Loaded) -> T) -> T {
        let state = self
            .state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&state)
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.read_state(|s| s.key.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(name: &str) -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_string()]).expect("cert");
        (cert.cert.pem(), cert.signing_key.serialize_pem())
    }

    fn write(dir: &Path, cert: &str, key: &str) -> TlsPaths {
        let paths = TlsPaths {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        };
        std::fs::write(&paths.cert, cert).expect("write cert");
        std::fs::write(&paths.key, key).expect("write key");
        paths
    }

    #[test]
    fn loads_and_reloads_on_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert1, key1) = self_signed("one.example");
        let paths = write(dir.path(), &cert1, &key1);
        let store = CertStore::load(paths).expect("load");
        assert!(!store.reload_if_changed().expect("unchanged"));
        assert_eq!(store.cert_pem(), cert1.as_bytes());
        let generation = store.subscribe();

        // A half-rotated pair is refused and the old certificate stays.
        let (cert2, key2) = self_signed("two.example");
        std::fs::write(dir.path().join("tls.crt"), &cert2).expect("write");
        let error = store.reload_if_changed().expect_err("mismatch");
        assert!(matches!(error, TlsError::Mismatch(_)), "{error}");
        assert_eq!(store.cert_pem(), cert1.as_bytes());

        std::fs::write(dir.path().join("tls.key"), &key2).expect("write");
        assert!(!generation.has_changed().expect("open"));
        assert!(store.reload_if_changed().expect("reload"));
        assert_eq!(store.cert_pem(), cert2.as_bytes());
        assert!(generation.has_changed().expect("open"), "servers are told");
    }

    #[cfg(unix)]
    #[test]
    fn follows_a_swapped_data_symlink() {
        // The layout of a Secret volume: tls.crt -> ..data/tls.crt,
        // ..data -> ..<timestamp>/.
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path();
        let (cert1, key1) = self_signed("one.example");
        std::fs::create_dir(base.join("..v1")).expect("mkdir");
        write(&base.join("..v1"), &cert1, &key1);
        std::os::unix::fs::symlink("..v1", base.join("..data")).expect("symlink");
        for file in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{file}"), base.join(file)).expect("link");
        }
        let store = CertStore::load(TlsPaths {
            cert: base.join("tls.crt"),
            key: base.join("tls.key"),
        })
        .expect("load");

        let (cert2, key2) = self_signed("two.example");
        std::fs::create_dir(base.join("..v2")).expect("mkdir");
        write(&base.join("..v2"), &cert2, &key2);
        std::os::unix::fs::symlink("..v2", base.join("..data_tmp")).expect("symlink");
        std::fs::rename(base.join("..data_tmp"), base.join("..data")).expect("swap");
        assert!(store.reload_if_changed().expect("reload"));
        assert_eq!(store.cert_pem(), cert2.as_bytes());
    }

    #[test]
    fn reports_unusable_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = TlsPaths {
            cert: dir.path().join("nope.crt"),
            key: dir.path().join("nope.key"),
        };
        assert!(matches!(
            CertStore::load(missing).expect_err("missing"),
            TlsError::Read { .. }
        ));
        let (cert, key) = self_signed("x.example");
        let paths = write(dir.path(), "not pem", &key);
        assert!(matches!(
            CertStore::load(paths.clone()).expect_err("no cert"),
            TlsError::NoCertificate { .. }
        ));
        std::fs::write(&paths.cert, &cert).expect("write");
        std::fs::write(&paths.key, "garbage").expect("write");
        assert!(matches!(
            CertStore::load(paths).expect_err("no key"),
            TlsError::Key { .. }
        ));
    }

    #[test]
    fn builds_a_tls13_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = self_signed("x.example");
        let store = CertStore::load(write(dir.path(), &cert, &key)).expect("load");
        let config = store.server_config().expect("config");
        assert_eq!(config.alpn_protocols.len(), 2);
    }
}
