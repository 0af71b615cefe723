//! Kubernetes client flags (`--kubeconfig`, `--context`) and client creation.
//!
//! Without `--kubeconfig`, the usual inference applies: `$KUBECONFIG`, then
//! `~/.kube/config`, then the in-cluster service account.

use std::path::PathBuf;

use clap::Args;

/// Flags that select the cluster to talk to.
#[derive(Clone, Debug, Default, Args)]
pub struct KubeClientArgs {
    /// Path to a kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use (default: the current context).
    #[arg(long = "kube-context")]
    pub context: Option<String>,
}

/// Errors from building a client.
#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    #[error("failed to read kubeconfig {path}: {source}")]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("failed to infer a Kubernetes configuration: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("failed to build a Kubernetes configuration: {0}")]
    Config(#[from] kube::config::KubeconfigError),
    #[error("failed to build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

impl KubeClientArgs {
    /// Builds a client from the flags.
    pub async fn client(&self) -> Result<kube::Client, KubeClientError> {
        self.instrumented_client(None).await
    }

    /// Builds a client from the flags whose requests `metrics` counts.
    pub async fn instrumented_client(
        &self,
        metrics: Option<&crate::http_client_metrics::HttpClientMetrics>,
    ) -> Result<kube::Client, KubeClientError> {
        let options = kube::config::KubeConfigOptions {
            context: self.context.clone(),
            ..Default::default()
        };
        // An empty path means "not given", as the original's `-kubeconfig=""`.
        let kubeconfig = self
            .kubeconfig
            .as_ref()
            .filter(|path| !path.as_os_str().is_empty());
        let config = match kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                    KubeClientError::Kubeconfig {
                        path: path.clone(),
                        source,
                    }
                })?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            None if self.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await?,
        };
        match metrics {
            None => Ok(kube::Client::try_from(config)?),
            Some(metrics) => Ok(kube::client::ClientBuilder::try_from(config)?
                .with_layer(&metrics.layer())
                .build()),
        }
    }
}
