//! Kubernetes client flags and client creation.
//!
//! The flags are those of Linkerd's policy controller (kubert's client
//! flags: `--kubeconfig`, `--context`, `--cluster`, `--user`, `--as`,
//! `--as-group`), with the same meaning, so a chart or a habit that passes
//! them keeps working; `--kube-context` is Meridian's older spelling of
//! `--context`. Without any of them the usual inference applies:
//! `$KUBECONFIG`, then `~/.kube/config`, then the in-cluster service
//! account. Given any, the kubeconfig must load: a typo never falls back to
//! another cluster's credentials.

use std::path::PathBuf;

use clap::Args;

/// Flags that select the cluster to talk to.
#[derive(Clone, Debug, Default, Args)]
pub struct KubeClientArgs {
    /// Path to a kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// The name of the kubeconfig context to use (default: the current
    /// context).
    #[arg(long = "context", visible_alias = "kube-context")]
    pub context: Option<String>,

    /// The name of the kubeconfig cluster to use (default: the context's).
    #[arg(long)]
    pub cluster: Option<String>,

    /// The name of the kubeconfig user to use (default: the context's).
    #[arg(long)]
    pub user: Option<String>,

    /// Username to impersonate for Kubernetes operations.
    #[arg(long = "as")]
    pub impersonate_user: Option<String>,

    /// Group to impersonate for Kubernetes operations.
    #[arg(long = "as-group")]
    pub impersonate_group: Option<String>,
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
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        };
        // An empty path means "not given", as the original's `-kubeconfig=""`.
        let kubeconfig = self
            .kubeconfig
            .as_ref()
            .filter(|path| !path.as_os_str().is_empty());
        let named = self.context.is_some() || self.cluster.is_some() || self.user.is_some();
        let mut config = match kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                    KubeClientError::Kubeconfig {
                        path: path.clone(),
                        source,
                    }
                })?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            None if named => kube::Config::from_kubeconfig(&options).await?,
            None => kube::Config::infer().await?,
        };
        self.impersonate(&mut config);
        match metrics {
            None => Ok(kube::Client::try_from(config)?),
            Some(metrics) => Ok(kube::client::ClientBuilder::try_from(config)?
                .with_layer(&metrics.layer())
                .build()),
        }
    }

    /// Sets `--as` and `--as-group` on `config` (sent as the
    /// `Impersonate-User` and `Impersonate-Group` headers).
    fn impersonate(&self, config: &mut kube::Config) {
        if let Some(user) = &self.impersonate_user {
            config.auth_info.impersonate = Some(user.clone());
        }
        if let Some(group) = &self.impersonate_group {
            config.auth_info.impersonate_groups = Some(vec![group.clone()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        kube: KubeClientArgs,
    }

    /// kubert's flags parse under their own names, and the older
    /// `--kube-context` still names the context.
    #[test]
    fn kuberts_flags_parse() {
        let cli = Cli::parse_from([
            "x",
            "--kubeconfig=/k",
            "--context=c",
            "--cluster=k",
            "--user=u",
            "--as=someone",
            "--as-group=devs",
        ]);
        let k = cli.kube;
        assert_eq!(k.kubeconfig.as_deref(), Some(std::path::Path::new("/k")));
        assert_eq!(k.context.as_deref(), Some("c"));
        assert_eq!(k.cluster.as_deref(), Some("k"));
        assert_eq!(k.user.as_deref(), Some("u"));
        assert_eq!(k.impersonate_user.as_deref(), Some("someone"));
        assert_eq!(k.impersonate_group.as_deref(), Some("devs"));
        let old = Cli::parse_from(["x", "--kube-context", "old"]);
        assert_eq!(old.kube.context.as_deref(), Some("old"));
    }

    /// A kubeconfig with two clusters and users: `--cluster` and `--user`
    /// pick other entries than the context's, and `--as` impersonates.
    #[tokio::test]
    async fn flags_select_the_kubeconfig_entries() {
        let dir = std::env::temp_dir().join(format!("kube-client-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("config");
        std::fs::write(
            &path,
            r#"apiVersion: v1
kind: Config
current-context: a
contexts:
- name: a
  context: {cluster: one, user: alice}
clusters:
- name: one
  cluster: {server: "https://127.0.0.1:6443"}
- name: two
  cluster: {server: "https://127.0.0.2:7443"}
users:
- name: alice
  user: {username: alice, password: a}
- name: bob
  user: {username: bob, password: b}
"#,
        )
        .expect("write kubeconfig");
        let args = KubeClientArgs {
            kubeconfig: Some(path.clone()),
            cluster: Some("two".into()),
            user: Some("bob".into()),
            impersonate_user: Some("carol".into()),
            ..Default::default()
        };
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("read");
        let options = kube::config::KubeConfigOptions {
            context: None,
            cluster: args.cluster.clone(),
            user: args.user.clone(),
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .expect("config");
        args.impersonate(&mut config);
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.2:7443/");
        assert_eq!(config.auth_info.impersonate.as_deref(), Some("carol"));
        assert_eq!(config.auth_info.username.as_deref(), Some("bob"));
        // An unknown cluster name is an error, never the context's cluster.
        let bad = KubeClientArgs {
            kubeconfig: Some(path),
            cluster: Some("nowhere".into()),
            ..Default::default()
        };
        assert!(bad.client().await.is_err());
        let _ = std::fs::remove_dir_all(dir);
    }
}
