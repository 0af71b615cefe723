//! End to end against the real local kube-apiserver: the `sp-validator`
//! binary runs as a child process on 127.0.0.1, is registered with a
//! ValidatingWebhookConfiguration (`clientConfig.url` + `caBundle`), and
//! `kubectl apply` of valid and invalid ServiceProfiles shows what users
//! see. The serving certificate is then replaced by one from a new CA
//! while the webhook runs.

use std::{
    io::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use test_support::{LocalCa, TestEnv, eventually, free_addr};

const WEBHOOK: &str = "linkerd-sp-validator.linkerd.io";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// Kills the webhook process when the test ends, even on panic.
struct Webhook {
    child: std::process::Child,
    addr: SocketAddr,
    admin: SocketAddr,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Output {
    ok: bool,
    text: String,
}

/// kubectl of the cluster's version (the kubeconfig selects the cluster).
fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let kubectl = test_support::SharedCluster::get().kubectl_path();
    let (ok, text) =
        local_cluster::kubectl::run(kubectl, kubeconfig, args, stdin).expect("running kubectl");
    Output { ok, text }
}

/// Writes a file by rename, as a Secret volume update does.
fn replace_file(path: &Path, contents: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, contents).expect("writing a temp file");
    std::fs::rename(&tmp, path).expect("renaming into place");
}

fn http_get(addr: SocketAddr, path: &str) -> Result<String, String> {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    Ok(response)
}

fn start_webhook(dir: &Path) -> Webhook {
    let addr = free_addr();
    let admin = free_addr();
    let child = Command::new(env!("CARGO_BIN_EXE_sp-validator"))
        .args([
            "--addr",
            &addr.to_string(),
            "--admin-addr",
            &admin.to_string(),
        ])
        .arg("--tls-cert")
        .arg(dir.join("tls.crt"))
        .arg("--tls-key")
        .arg(dir.join("tls.key"))
        .args(["--log-level", "info"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting sp-validator");
    Webhook { child, addr, admin }
}

fn profile(ns: &str, name: &str, version: &str, spec: &str) -> String {
    format!(
        "apiVersion: linkerd.io/{version}\nkind: ServiceProfile\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}"
    )
}

const VALID_SPEC: &str = r#"  routes:
    - name: GET /books/{id}
      condition:
        method: GET
        pathRegex: /books/[^/]*
        not:
          pathRegex: /books/secret
      responseClasses:
        - condition:
            status: {min: 500, max: 599}
          isFailure: true
        - condition:
            not:
              status: {min: 200, max: 299}
      isRetryable: true
      timeout: 300ms
  retryBudget:
    retryRatio: 0.2
    minRetriesPerSecond: 10
    ttl: 10s
  dstOverrides:
    - authority: books-v2.ns.svc.cluster.local:8080
      weight: 500m
"#;

/// (spec, what kubectl must print after "denied the request: ")
fn invalid_cases(name: &str) -> Vec<(&'static str, String)> {
    let sp = format!("ServiceProfile \"{name}\"");
    vec![
        (
            "  routes:\n    - name: \"\"\n      condition: {method: GET}\n",
            format!("{sp} has a route with no name"),
        ),
        (
            "  routes:\n    - name: r\n      condition: {}\n",
            format!("{sp} has a route with an invalid condition: A request match must have a field set"),
        ),
        (
            "  routes:\n    - name: r\n      condition: {method: GET}\n      timeout: \"10\"\n",
            format!("{sp} has a route with an invalid timeout: time: missing unit in duration \"10\""),
        ),
        (
            "  routes:\n    - name: r\n      condition: {method: GET}\n      responseClasses:\n        - condition: {status: {min: 99}}\n",
            format!("{sp} has a response class with an invalid condition: Range minimum must be between 100 and 599, inclusive"),
        ),
        (
            "  routes:\n    - name: r\n      condition:\n        all:\n          - methd: GET\n",
            "failed to validate ServiceProfile: error unmarshaling JSON: while decoding JSON: json: unknown field \"methd\"".to_string(),
        ),
        (
            "  retryBudget: {retryRatio: -0.2, minRetriesPerSecond: 1, ttl: 10s}\n",
            format!("{sp} RetryBudget RetryRatio must be non-negative: -0.200000"),
        ),
        (
            "  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 1, ttl: foo}\n",
            format!("{sp} RetryBudget: time: invalid duration \"foo\""),
        ),
        (
            "  routes:\n    - name: books\n      condition: {pathRegex: \"/books/(\"}\n",
            format!("{sp} has a route \"books\" with an invalid pathRegex \"/books/(\": unclosed group"),
        ),
        (
            "  dstOverrides:\n    - authority: \"books:http\"\n      weight: 1\n",
            format!("{sp} has a dstOverride with an invalid authority \"books:http\": port \"http\" is not a number from 1 to 65535"),
        ),
        (
            "  dstOverrides:\n    - authority: books\n      weight: \"-1\"\n",
            format!("{sp} has a dstOverride with a negative weight \"-1\""),
        ),
    ]
}

fn apply(kubeconfig: &Path, manifest: &str) -> Output {
    kubectl(kubeconfig, &["apply", "-f", "-"], Some(manifest))
}

/// A server-side dry run goes through admission without storing anything.
fn dry_run(kubeconfig: &Path, manifest: &str) -> Output {
    kubectl(
        kubeconfig,
        &["apply", "--dry-run=server", "-f", "-"],
        Some(manifest),
    )
}

/// POSTs a file; HTTP/1.1 because curl reports an HTTP/2 stream reset
/// (sent when the server answers before reading a huge body) as an error.
fn curl_status(ca_file: &Path, addr: SocketAddr, body: &Path) -> String {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--http1.1",
            "-o",
            "-",
            "-w",
            " HTTP=%{http_code}",
            "--cacert",
        ])
        .arg(ca_file)
        .args(["-H", "Content-Type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("https://127.0.0.1:{}/", addr.port()))
        .output()
        .expect("running curl");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_the_webhook_and_certificates_rotate() {
    let env = TestEnv::new("spv").await;
    let kubeconfig = env.cluster().kubeconfig().to_path_buf();
    let ns = env.ns.clone();

    // The CRD, as deployed.
    let crd = repo_root().join("deploy/crds/serviceprofiles.yaml");
    let out = kubectl(
        &kubeconfig,
        &["apply", "-f", crd.to_str().expect("utf-8 path")],
        None,
    );
    assert!(out.ok, "applying the CRD: {}", out.text);
    let out = kubectl(
        &kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "crd/serviceprofiles.linkerd.io",
            "--timeout=60s",
        ],
        None,
    );
    assert!(out.ok, "waiting for the CRD: {}", out.text);

    // Certificates and the webhook process.
    let dir = tempfile::tempdir().expect("tempdir");
    let ca1 = LocalCa::new("sp-validator-test-ca-1").expect("CA 1");
    let cert1 = ca1
        .issue_serving_cert(&["linkerd-sp-validator.linkerd.svc"])
        .expect("cert 1");
    replace_file(&dir.path().join("tls.crt"), &cert1.cert_pem);
    replace_file(&dir.path().join("tls.key"), &cert1.key_pem);
    let webhook = start_webhook(dir.path());
    let admin = webhook.admin;
    eventually(
        "sp-validator to be ready",
        Duration::from_secs(30),
        || async move {
            match http_get(admin, "/ready") {
                Ok(r) if r.starts_with("HTTP/1.0 200") || r.starts_with("HTTP/1.1 200") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // Malformed, empty and oversized bodies straight to the server.
    let ca1_file = dir.path().join("ca1.pem");
    std::fs::write(&ca1_file, ca1.cert_pem()).expect("write CA");
    let body = dir.path().join("body");
    for (contents, want) in [
        (b"".to_vec(), "empty request body"),
        (b"{\"apiVersion\":".to_vec(), "malformed AdmissionReview"),
        (vec![b' '; 11 * 1024 * 1024], "HTTP=413"),
    ] {
        std::fs::write(&body, &contents).expect("write body");
        let out = curl_status(&ca1_file, webhook.addr, &body);
        assert!(out.contains(want), "{want}: {out}");
        assert!(out.contains("HTTP=4"), "{want}: {out}");
    }

    // Register the webhook for this namespace only.
    let url = format!("https://127.0.0.1:{}/", webhook.addr.port());
    let registered = env.register_webhook("sp-validator-webhook.yaml", &url, ca1.cert_pem());

    // The apiserver picks the configuration up asynchronously.
    let probe = profile(
        &ns,
        "probe",
        "v1alpha2",
        "  routes:\n    - name: \"\"\n      condition: {method: GET}\n",
    );
    let kc = kubeconfig.clone();
    eventually("the webhook to be called", Duration::from_secs(30), || {
        let out = dry_run(&kc, &probe);
        async move {
            if !out.ok && out.text.contains("has a route with no name") {
                Ok(())
            } else {
                Err(out.text)
            }
        }
    })
    .await;

    // Valid profiles are admitted, in both versions, with a route-level `not`.
    for (name, version) in [
        ("books.ns.svc.cluster.local", "v1alpha2"),
        ("books-v1", "v1alpha1"),
    ] {
        let out = apply(&kubeconfig, &profile(&ns, name, version, VALID_SPEC));
        assert!(out.ok, "applying a valid {version} profile: {}", out.text);
        assert!(
            out.text
                .contains(&format!("serviceprofile.linkerd.io/{name} created")),
            "{}",
            out.text
        );
    }
    // An UPDATE is reviewed too.
    let out = apply(
        &kubeconfig,
        &profile(
            &ns,
            "books-v1",
            "v1alpha1",
            "  routes:\n    - name: r\n      condition: {}\n",
        ),
    );
    assert!(!out.ok, "an invalid update must fail: {}", out.text);
    assert!(
        out.text.contains("has a route with an invalid condition"),
        "{}",
        out.text
    );

    // Invalid ones are denied with the message users see.
    for (i, (spec, message)) in invalid_cases("bad").into_iter().enumerate() {
        let out = apply(&kubeconfig, &profile(&ns, "bad", "v1alpha2", spec));
        assert!(!out.ok, "case {i} must be denied: {}", out.text);
        let want = format!("admission webhook \"{WEBHOOK}\" denied the request: {message}");
        assert!(
            out.text.contains(&want),
            "case {i}:\nwant: {want}\ngot:  {}",
            out.text
        );
    }

    // Rotate: the files now hold a certificate from another CA.
    let ca2 = LocalCa::new("sp-validator-test-ca-2").expect("CA 2");
    let cert2 = ca2
        .issue_serving_cert(&["linkerd-sp-validator.linkerd.svc"])
        .expect("cert 2");
    replace_file(&dir.path().join("tls.key"), &cert2.key_pem);
    replace_file(&dir.path().join("tls.crt"), &cert2.cert_pem);

    // The apiserver, still trusting CA 1 only, now fails to call the webhook:
    // proof that the running server picked up the new certificate.
    let valid = profile(&ns, "after-rotation", "v1alpha2", VALID_SPEC);
    let kc = kubeconfig.clone();
    let seen = eventually(
        "the new certificate to be served",
        Duration::from_secs(30),
        || {
            let out = dry_run(&kc, &valid);
            async move {
                if !out.ok && out.text.contains("failed calling webhook") {
                    Ok(out.text)
                } else {
                    Err(out.text)
                }
            }
        },
    )
    .await;
    assert!(seen.contains("certificate"), "{seen}");

    // Trust CA 2: reviews work again, through the new certificate.
    registered.set_ca(ca2.cert_pem());
    let bad = profile(&ns, "bad", "v1alpha2", invalid_cases("bad")[0].0);
    let kc = kubeconfig.clone();
    eventually(
        "reviews with the new certificate",
        Duration::from_secs(30),
        || {
            let out = dry_run(&kc, &bad);
            async move {
                if !out.ok
                    && out.text.contains(
                        "denied the request: ServiceProfile \"bad\" has a route with no name",
                    )
                {
                    Ok(())
                } else {
                    Err(out.text)
                }
            }
        },
    )
    .await;
    let out = apply(&kubeconfig, &valid);
    assert!(out.ok, "a valid profile after rotation: {}", out.text);

    // The counters saw both outcomes.
    let metrics = http_get(webhook.admin, "/metrics").expect("metrics");
    assert!(
        metrics.contains("sp_validator_admission_reviews_total{result=\"allowed\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sp_validator_admission_reviews_total{result=\"denied\"}"),
        "{metrics}"
    );
    assert!(
        metrics.contains("sp_validator_admission_reviews_total{result=\"invalid\"} 3"),
        "{metrics}"
    );

    drop(registered);
    drop(webhook);
}
