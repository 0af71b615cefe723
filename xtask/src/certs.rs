//! `cargo xtask certs`: TLS for the two admission webhooks of a `deploy/`
//! install, as the Linkerd chart makes it at install time.
//!
//! For each webhook server (the sp-validator and the policy controller) it
//! makes sure the Secret its container mounts exists (`kubernetes.io/tls`:
//! `tls.crt`, `tls.key`, plus the issuing CA as `ca.crt`) with a certificate
//! for `<service>.<namespace>.svc` valid for at least [`MIN_REMAINING`],
//! and sets that CA as the `caBundle` of the webhook configuration. Valid
//! certificates are kept (run it after every apply; `--rotate` replaces
//! them). The running containers reload the files when the kubelet
//! refreshes the Secret volume; nothing restarts.

use std::{
    path::PathBuf,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use k8s_openapi::{
    ByteString, api::admissionregistration::v1::ValidatingWebhookConfiguration,
    api::core::v1::Secret,
};
use kube::api::{Api, Patch, PatchParams};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// What `linkerd check` wants left on a webhook certificate.
pub const MIN_REMAINING: Duration = Duration::from_secs(60 * 24 * 3600);

/// The two webhook servers: (Service, Secret, ValidatingWebhookConfiguration).
pub const WEBHOOKS: [(&str, &str, &str); 2] = [
    (
        "linkerd-sp-validator",
        "linkerd-sp-validator-k8s-tls",
        "linkerd-sp-validator-webhook-config",
    ),
    (
        "linkerd-policy-validator",
        "linkerd-policy-validator-k8s-tls",
        "linkerd-policy-validator-webhook-config",
    ),
];

const FIELD_MANAGER: &str = "meridian-xtask-certs";

#[derive(clap::Args)]
pub struct CertsArgs {
    /// Namespace of the install (where the Secrets and Services are).
    #[arg(long, default_value = "linkerd")]
    namespace: String,
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current one).
    #[arg(long)]
    context: Option<String>,
    /// Validity of new certificates, in days (at least 61).
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(61..))]
    days: u32,
    /// Replace the certificates even if they are still valid.
    #[arg(long)]
    rotate: bool,
}

/// A webhook server's certificate and the CA that issued it (all PEM).
#[derive(Clone, Debug)]
pub struct WebhookTls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A new CA (valid ten times as long) and a serving certificate for `dns_name`
/// valid from `now` for `days`.
pub fn generate(dns_name: &str, days: u32, now: SystemTime) -> anyhow::Result<WebhookTls> {
    let since_epoch = now
        .duration_since(UNIX_EPOCH)
        .context("clock before 1970")?;
    // rcgen's dates: the unix epoch, to which `SystemTime` offsets add.
    let epoch = || rcgen::date_time_ymd(1970, 1, 1);
    // An hour of slack for clocks a little behind ours.
    let not_before = epoch() + since_epoch.saturating_sub(Duration::from_secs(3600));
    let day = Duration::from_secs(24 * 3600);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.distinguished_name
        .push(DnType::CommonName, format!("{dns_name} CA"));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = not_before;
    ca.not_after = epoch() + since_epoch + day * days * 10;
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(Vec::<String>::new())?;
    leaf.distinguished_name.push(DnType::CommonName, dns_name);
    leaf.subject_alt_names = vec![SanType::DnsName(dns_name.try_into()?)];
    leaf.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf.not_before = not_before;
    leaf.not_after = epoch() + since_epoch + day * days;
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok(WebhookTls {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// How long `cert_pem` remains valid at `now` for `dns_name` (None: it is
/// not a certificate for that name, or is not valid now).
pub fn remaining(cert_pem: &str, dns_name: &str, now: SystemTime) -> Option<Duration> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let names_it = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .is_some_and(|san| {
            san.value.general_names.iter().any(
                |n| matches!(n, x509_parser::extensions::GeneralName::DNSName(d) if *d == dns_name),
            )
        });
    let now = i64::try_from(now.duration_since(UNIX_EPOCH).ok()?.as_secs()).ok()?;
    let validity = cert.validity();
    let (start, end) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    (names_it && start <= now && now < end)
        .then(|| Duration::from_secs(u64::try_from(end - now).unwrap_or_default()))
}

/// What [`apply`] did for one webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The Secret's certificate was valid; kept.
    Kept,
    /// A new certificate was written.
    Issued,
}

/// Makes sure both Secrets hold valid certificates in `namespace` and sets
/// the webhook configurations' caBundles. Every Secret is handled before a
/// missing webhook configuration is reported.
pub async fn apply(
    client: &kube::Client,
    namespace: &str,
    days: u32,
    rotate: bool,
) -> anyhow::Result<Vec<(String, Outcome)>> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let now = SystemTime::now();
    let mut outcomes = Vec::new();
    let mut missing = Vec::new();
    for (service, secret_name, hook_name) in WEBHOOKS {
        let dns_name = format!("{service}.{namespace}.svc");
        let existing = secrets
            .get_opt(secret_name)
            .await
            .with_context(|| format!("reading Secret {namespace}/{secret_name}"))?;
        let current = existing.as_ref().and_then(|s| {
            let data = s.data.as_ref()?;
            let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
            Some((text("ca.crt")?, text("tls.crt")?))
        });
        let (ca_pem, outcome) = match current {
            Some((ca, cert))
                if !rotate
                    && remaining(&cert, &dns_name, now).is_some_and(|r| r >= MIN_REMAINING) =>
            {
                (ca, Outcome::Kept)
            }
            _ => {
                if let Some(kind) = existing.as_ref().and_then(|s| s.type_.as_deref())
                    && kind != "kubernetes.io/tls"
                {
                    bail!(
                        "Secret {namespace}/{secret_name} has type {kind}; delete it and run again"
                    );
                }
                let tls = generate(&dns_name, days, now)?;
                let secret = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {
                        "name": secret_name,
                        "namespace": namespace,
                        "labels": {
                            k8s_api::labels::CONTROL_PLANE_COMPONENT: "destination",
                            k8s_api::labels::CONTROL_PLANE_NS: namespace,
                        },
                    },
                    "type": "kubernetes.io/tls",
                    "data": {
                        "tls.crt": ByteString(tls.cert_pem.into_bytes()),
                        "tls.key": ByteString(tls.key_pem.into_bytes()),
                        "ca.crt": ByteString(tls.ca_pem.clone().into_bytes()),
                    },
                });
                secrets
                    .patch(
                        secret_name,
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(&secret),
                    )
                    .await
                    .with_context(|| format!("writing Secret {namespace}/{secret_name}"))?;
                (tls.ca_pem, Outcome::Issued)
            }
        };
        outcomes.push((secret_name.to_string(), outcome));

        let Some(hook) = hooks
            .get_opt(hook_name)
            .await
            .with_context(|| format!("reading ValidatingWebhookConfiguration {hook_name}"))?
        else {
            missing.push(hook_name);
            continue;
        };
        // A replace at the version read: a concurrent edit fails it
        // rather than being overwritten.
        let mut hook = hook;
        for webhook in hook.webhooks.iter_mut().flatten() {
            webhook.client_config.ca_bundle = Some(ByteString(ca_pem.clone().into_bytes()));
        }
        hooks
            .replace(hook_name, &Default::default(), &hook)
            .await
            .with_context(|| format!("setting the caBundle of {hook_name}"))?;
    }
    if !missing.is_empty() {
        bail!(
            "the Secrets are ready, but {} {} not exist: apply deploy/ first (`kubectl apply -k deploy/`), then run this again",
            missing.join(" and "),
            if missing.len() == 1 { "does" } else { "do" }
        );
    }
    Ok(outcomes)
}

pub fn run(args: CertsArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let options = kube::config::KubeConfigOptions {
            context: args.context.clone(),
            ..Default::default()
        };
        let config = match &args.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            None => kube::Config::from_kubeconfig(&options).await?,
        };
        let client = kube::Client::try_from(config)?;
        for (secret, outcome) in apply(&client, &args.namespace, args.days, args.rotate).await? {
            let what = match outcome {
                Outcome::Kept => "still valid, kept",
                Outcome::Issued => "new certificate written",
            };
            println!("{}/{secret}: {what}", args.namespace);
        }
        println!("webhook caBundles set");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pem: &str) -> x509_parser::pem::Pem {
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .expect("PEM")
            .1
    }

    #[test]
    fn certificates_name_the_service_and_last() {
        let now = SystemTime::now();
        let name = "linkerd-sp-validator.linkerd.svc";
        let tls = generate(name, 365, now).expect("generate");
        let left = remaining(&tls.cert_pem, name, now).expect("valid for its name");
        assert!(left >= MIN_REMAINING, "{left:?}");
        assert!(left > Duration::from_secs(364 * 24 * 3600), "{left:?}");
        assert!(left <= Duration::from_secs(365 * 24 * 3600), "{left:?}");
        assert_eq!(
            remaining(&tls.cert_pem, "linkerd-policy-validator.linkerd.svc", now),
            None
        );
        let later = now + Duration::from_secs(366 * 24 * 3600);
        assert_eq!(remaining(&tls.cert_pem, name, later), None, "expired");
        assert_eq!(remaining("not a certificate", name, now), None);

        let leaf_pem = parse(&tls.cert_pem);
        let leaf = leaf_pem.parse_x509().expect("leaf");
        let ca_pem = parse(&tls.ca_pem);
        let ca = ca_pem.parse_x509().expect("ca");
        assert_eq!(
            leaf.subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok()),
            Some(name)
        );
        assert_eq!(leaf.issuer(), ca.subject());
        assert!(ca.is_ca() && !leaf.is_ca());
        leaf.verify_signature(Some(ca.public_key()))
            .expect("signed by the CA");
        assert!(tls.key_pem.contains("PRIVATE KEY"));
        assert!(
            ca.validity().not_after > leaf.validity().not_after,
            "the CA outlives the certificate"
        );
    }

    /// Against the test cluster: Secrets written, caBundles set, valid
    /// certificates kept, `--rotate` replaces them.
    #[tokio::test]
    async fn secrets_and_ca_bundles() {
        let env = test_support::TestEnv::new("certs").await;
        let cluster = env.cluster();
        // The two webhook configurations of deploy/ (and their Services),
        // as a user applies them.
        let (ok, out) = cluster.kubectl(&["create", "namespace", "linkerd"], None);
        assert!(ok || out.contains("AlreadyExists"), "namespace: {out}");
        for file in ["sp-validator-webhook.yaml", "policy-validator-webhook.yaml"] {
            let path = test_support::deploy::deploy_dir().join("base").join(file);
            let (ok, out) = cluster.kubectl(&["apply", "-f", &path.display().to_string()], None);
            assert!(ok, "{file}: {out}");
        }
        let client = env.client.clone();
        let first = apply(&client, &env.ns, 365, false).await.expect("certs");
        assert!(
            first.iter().all(|(_, o)| *o == Outcome::Issued),
            "{first:?}"
        );

        let secrets: Api<Secret> = Api::namespaced(client.clone(), &env.ns);
        let hooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        let bundle_of = |hook: &ValidatingWebhookConfiguration| {
            hook.webhooks.as_ref().expect("webhooks")[0]
                .client_config
                .ca_bundle
                .clone()
                .expect("caBundle")
                .0
        };
        let mut certs = Vec::new();
        for (service, secret_name, hook_name) in WEBHOOKS {
            let secret = secrets.get(secret_name).await.expect("secret");
            assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
            let data = secret.data.expect("data");
            let cert = String::from_utf8(data["tls.crt"].0.clone()).expect("pem");
            let name = format!("{service}.{}.svc", env.ns);
            assert!(remaining(&cert, &name, SystemTime::now()).is_some_and(|r| r >= MIN_REMAINING));
            let hook = hooks.get(hook_name).await.expect("webhook configuration");
            assert_eq!(bundle_of(&hook), data["ca.crt"].0, "{hook_name}");
            certs.push(cert);
        }

        let again = apply(&client, &env.ns, 365, false)
            .await
            .expect("certs again");
        assert!(again.iter().all(|(_, o)| *o == Outcome::Kept), "{again:?}");
        let rotated = apply(&client, &env.ns, 365, true).await.expect("rotate");
        assert!(rotated.iter().all(|(_, o)| *o == Outcome::Issued));
        let secret = secrets.get(WEBHOOKS[0].1).await.expect("secret");
        let cert = String::from_utf8(secret.data.expect("data")["tls.crt"].0.clone()).expect("pem");
        assert_ne!(cert, certs[0], "rotated");
        let hook = hooks
            .get(WEBHOOKS[0].2)
            .await
            .expect("webhook configuration");
        assert_eq!(
            bundle_of(&hook),
            secrets
                .get(WEBHOOKS[0].1)
                .await
                .expect("secret")
                .data
                .expect("data")["ca.crt"]
                .0
        );

        for (_, _, hook_name) in WEBHOOKS {
            let _ = hooks.delete(hook_name, &Default::default()).await;
        }
        let err = apply(&client, &env.ns, 365, false)
            .await
            .expect_err("no webhook configurations");
        assert!(err.to_string().contains("apply deploy/ first"), "{err}");
    }
}
