//! Test and local-run certificates made with rcgen: a CA, serving
//! certificates for loopback servers (kube-apiserver, webhooks) and the
//! service-account signing key.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Errors from generating certificates.
#[derive(Debug, thiserror::Error)]
#[error("certificate generation failed: {0}")]
pub struct CertError(#[from] rcgen::Error);

/// A certificate authority that can issue serving certificates.
pub struct LocalCa {
    cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A PEM certificate chain and its PEM private key.
#[derive(Clone, Debug)]
pub struct ServingCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl LocalCa {
    /// A new self-signed CA with the given common name.
    pub fn new(common_name: &str) -> Result<Self, CertError> {
        let key = KeyPair::generate()?;
        let params = ca_params(common_name, BasicConstraints::Unconstrained)?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM encoded (a webhook's `caBundle`, a kubeconfig's CA).
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// Issues a serving certificate for the given DNS names, always valid for
    /// `localhost` and `127.0.0.1` as well.
    pub fn issue_serving_cert(&self, dns_names: &[&str]) -> Result<ServingCert, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let common_name = dns_names.first().copied().unwrap_or("localhost");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let mut sans = vec![
            SanType::DnsName("localhost".try_into()?),
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        ];
        for name in dns_names {
            sans.push(SanType::DnsName((*name).try_into()?));
        }
        params.subject_alt_names = sans;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues a serving certificate for exactly these DNS names and IP
    /// addresses (the first DNS name is the common name).
    pub fn issue_serving_cert_for(
        &self,
        dns_names: &[&str],
        ips: &[IpAddr],
    ) -> Result<ServingCert, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let common_name = dns_names.first().copied().unwrap_or("localhost");
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let mut sans = Vec::new();
        for name in dns_names {
            sans.push(SanType::DnsName((*name).try_into()?));
        }
        sans.extend(ips.iter().copied().map(SanType::IpAddress));
        params.subject_alt_names = sans;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues an intermediate CA under this one (path length 0): the
    /// issuer of a mesh identity service, e.g. Linkerd's
    /// `identity.linkerd.cluster.local` under its trust anchor.
    pub fn issue_intermediate_ca(&self, common_name: &str) -> Result<ServingCert, CertError> {
        let key = KeyPair::generate()?;
        let params = ca_params(common_name, BasicConstraints::Constrained(0))?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues a client certificate: Kubernetes reads the user from the
    /// common name and the groups from the organizations
    /// (`system:node:<name>` in `system:nodes` for a kubelet).
    pub fn issue_client_cert(
        &self,
        common_name: &str,
        organizations: &[&str],
    ) -> Result<ServingCert, CertError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        for organization in organizations {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *organization);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The parameters of a CA certificate: its name, its path length and the
/// key usages of a CA.
fn ca_params(
    common_name: &str,
    constraints: BasicConstraints,
) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(constraints);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

/// A fresh key pair (ECDSA P-256) as (PKCS#8 private key PEM, public key
/// PEM), e.g. for signing service-account tokens.
pub fn key_pair_pem() -> Result<(String, String), CertError> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issues_pem_certificates() {
        let ca = LocalCa::new("test-ca").expect("ca");
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        let cert = ca
            .issue_serving_cert(&["webhook.default.svc"])
            .expect("serving cert");
        assert!(cert.cert_pem.contains("BEGIN CERTIFICATE"));
        assert!(cert.key_pem.contains("PRIVATE KEY"));
        let (private, public) = key_pair_pem().expect("key");
        assert!(private.contains("PRIVATE KEY"));
        assert!(public.contains("PUBLIC KEY"));
    }
}
