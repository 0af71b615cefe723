//! Meridian swapped into an installed Linkerd 2.20 (`docs/swap.md`), tried
//! against a real kube-apiserver and kube-controller-manager on
//! Deployments shaped as the Linkerd 2.20 chart renders them
//! (`deploy/swap/testdata/linkerd-2.20.yaml`: `linkerd-destination`, and
//! `linkerd-identity` on the same controller image), never on our own
//! `deploy/` manifests:
//!
//! - `deploy/swap/deployment-patch.yaml` and `kubectl set image` (server-side
//!   dry run) change the three controller images and nothing else;
//! - the Helm post-renderer (`deploy/swap/helm-post-renderer`) changes them
//!   with a registry-qualified image or a digest, leaves identity's image,
//!   and its output passes a server-side dry-run apply;
//! - `kubectl rollout undo` after the swap returns Linkerd's images.

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::Value;
use test_support::{SharedCluster, TestEnv, eventually};

const CONTROLLERS: [&str; 3] = ["destination", "sp-validator", "policy"];

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy")
}

/// The fixture's objects, in namespace `ns`.
fn fixture(ns: &str) -> Vec<Value> {
    let path = deploy_dir().join("swap/testdata/linkerd-2.20.yaml");
    let text = std::fs::read_to_string(&path).expect("fixture");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| {
            let mut o: Value = serde::Deserialize::deserialize(doc).expect("fixture YAML");
            o["metadata"]["namespace"] = ns.into();
            o
        })
        .collect()
}

fn yaml_stream(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| serde_yaml::to_string(o).expect("yaml"))
        .collect::<Vec<_>>()
        .join("---\n")
}

fn kubectl_json(cluster: &SharedCluster, args: &[&str], stdin: Option<&str>) -> Value {
    let (ok, out) = cluster.kubectl(args, stdin);
    assert!(ok, "kubectl {args:?}: {out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {out}"))
}

/// The objects kubectl printed as JSON: one object, several in a row, or
/// a `List`.
fn kubectl_objects(cluster: &SharedCluster, args: &[&str], stdin: Option<&str>) -> Vec<Value> {
    let (ok, out) = cluster.kubectl(args, stdin);
    assert!(ok, "kubectl {args:?}: {out}");
    // (kubectl's output here has its warnings on stderr mixed in.)
    let out: String = out
        .lines()
        .filter(|l| !l.starts_with("Warning: "))
        .map(|l| format!("{l}\n"))
        .collect();
    serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .map(|v| v.unwrap_or_else(|e| panic!("kubectl {args:?}: {e}: {out}")))
        .flat_map(|v| match v["items"].as_array() {
            Some(items) if v["kind"] == "List" => items.clone(),
            _ => vec![v],
        })
        .collect()
}

fn named<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {objects:?}"))
}

fn pod(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]
}

fn image<'a>(deployment: &'a Value, container: &str) -> &'a str {
    let pod = pod(deployment);
    pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(pod["initContainers"].as_array().into_iter().flatten())
        .find(|c| c["name"] == container)
        .and_then(|c| c["image"].as_str())
        .unwrap_or_else(|| panic!("no container {container}"))
}

/// The pod template with the three controllers' images blanked: what must
/// not change.
fn without_controller_images(deployment: &Value) -> Value {
    let mut template = deployment["spec"]["template"].clone();
    for c in template["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
    {
        if CONTROLLERS.iter().any(|n| c["name"] == *n) {
            c["image"] = Value::Null;
        }
    }
    template
}

fn assert_swapped(before: &Value, after: &Value, meridian: &str) {
    for name in CONTROLLERS {
        assert_eq!(image(after, name), meridian, "{name}");
    }
    assert_eq!(
        without_controller_images(after),
        without_controller_images(before),
        "only the three controller images change"
    );
}

/// Runs the post-renderer on `input` with `MERIDIAN_IMAGE=image`.
fn post_render(
    cluster: &SharedCluster,
    input: &str,
    image: Option<&str>,
) -> (bool, String, String) {
    let mut cmd = Command::new(deploy_dir().join("swap/helm-post-renderer"));
    cmd.env("KUBECTL", cluster.kubectl_path())
        .env_remove("MERIDIAN_IMAGE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(image) = image {
        cmd.env("MERIDIAN_IMAGE", image);
    }
    let mut child = cmd.spawn().expect("running the post-renderer");
    // (A refusal exits before reading: the pipe may close under us.)
    let _ = child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes());
    let out = child.wait_with_output().expect("post-renderer output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The live `linkerd-destination` of namespace `ns`.
fn destination(cluster: &SharedCluster, ns: &str) -> Value {
    kubectl_json(
        cluster,
        &[
            "get",
            "deployment",
            "linkerd-destination",
            "-n",
            ns,
            "-o",
            "json",
        ],
        None,
    )
}

fn revision(cluster: &SharedCluster, ns: &str) -> Option<String> {
    let d = destination(cluster, ns);
    d["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        .as_str()
        .map(str::to_string)
}

/// A kube-controller-manager running only the Deployment controller (the
/// shared control plane runs none): it keeps the ReplicaSets, one per
/// revision, that `kubectl rollout undo` goes back to. No ReplicaSet
/// controller runs, so no pod is created. Killed when dropped.
struct DeploymentController(std::process::Child);

impl DeploymentController {
    fn start(cluster: &SharedCluster, log: &Path) -> Self {
        let program = cluster
            .kubectl_path()
            .with_file_name("kube-controller-manager");
        let log = std::fs::File::create(log).expect("log file");
        let child = Command::new(program)
            .args([
                format!("--kubeconfig={}", cluster.kubeconfig().display()),
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
                "--use-service-account-credentials=false".into(),
                "--controllers=deployment-controller".into(),
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .expect("starting kube-controller-manager");
        Self(child)
    }
}

impl Drop for DeploymentController {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_revision(cluster: &SharedCluster, ns: &str, want: &str) {
    eventually(
        &format!("deployment revision {want}"),
        Duration::from_secs(60),
        || async {
            match revision(cluster, ns) {
                Some(r) if r == want => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn the_swap_changes_three_images_and_rolls_back() {
    let env = TestEnv::new("swap").await;
    let cluster = env.cluster();
    let ns = env.ns.as_str();
    let objects = fixture(ns);
    let linkerd_image = image(&objects[0], "destination").to_string();
    assert!(linkerd_image.starts_with("cr.l5d.io/linkerd/controller:"));
    assert_eq!(image(&objects[1], "identity"), linkerd_image);
    let created = kubectl_objects(
        cluster,
        &["create", "--save-config", "-o", "json", "-f", "-"],
        Some(&yaml_stream(&objects)),
    );
    let live = named(&created, "linkerd-destination").clone();

    // The patch file (its image as committed) and `kubectl set image`.
    let patch = deploy_dir().join("swap/deployment-patch.yaml");
    let patched = kubectl_json(
        cluster,
        &[
            "patch",
            "deployment",
            "linkerd-destination",
            "-n",
            ns,
            "--patch-file",
            &patch.display().to_string(),
            "--dry-run=server",
            "-o",
            "json",
        ],
        None,
    );
    assert_swapped(&live, &patched, "meridian/controller:dev");
    let meridian = "registry.example.com/meridian/controller:v0.1.0";
    let set: Vec<String> = CONTROLLERS
        .iter()
        .map(|c| format!("{c}={meridian}"))
        .collect();
    let mut args = vec![
        "set",
        "image",
        "deployment/linkerd-destination",
        "-n",
        ns,
        "--dry-run=server",
        "-o",
        "json",
    ];
    args.extend(set.iter().map(String::as_str));
    assert_swapped(&live, &kubectl_json(cluster, &args, None), meridian);

    // The post-renderer, on what Helm would render: a tag and a digest.
    let digest = format!(
        "registry.example.com/meridian/controller@sha256:{}",
        "ab".repeat(32)
    );
    for wanted in [meridian, digest.as_str()] {
        let (ok, out, err) = post_render(cluster, &yaml_stream(&objects), Some(wanted));
        assert!(ok, "post-renderer: {err}");
        let rendered: Vec<Value> = serde_yaml::Deserializer::from_str(&out)
            .map(|doc| serde::Deserialize::deserialize(doc).expect("rendered YAML"))
            .collect();
        assert_eq!(rendered.len(), objects.len(), "{out}");
        let find = |name: &str| {
            rendered
                .iter()
                .find(|o| o["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("no {name} in {out}"))
        };
        assert_swapped(&objects[0], find("linkerd-destination"), wanted);
        assert_eq!(find("linkerd-identity"), &objects[1], "identity untouched");
        let applied = kubectl_objects(
            cluster,
            &["apply", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(&out),
        );
        assert_swapped(&live, named(&applied, "linkerd-destination"), wanted);
        assert_eq!(
            image(named(&applied, "linkerd-identity"), "identity"),
            linkerd_image
        );
    }
    // Without an image it refuses, naming what to set.
    let (ok, _, err) = post_render(cluster, &yaml_stream(&objects), None);
    assert!(!ok && err.contains("set MERIDIAN_IMAGE"), "{err}");

    // For real, then `kubectl rollout undo`: Linkerd's images again.
    let logs = tempfile::tempdir().expect("tempdir");
    let _controller = DeploymentController::start(cluster, &logs.path().join("kcm.log"));
    wait_revision(cluster, ns, "1").await;
    let (ok, out) = cluster.kubectl(
        &[
            &args[..5],
            &set.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ]
        .concat(),
        None,
    );
    assert!(ok, "set image: {out}");
    wait_revision(cluster, ns, "2").await;
    let (ok, out) = cluster.kubectl(
        &[
            "rollout",
            "undo",
            "deployment/linkerd-destination",
            "-n",
            ns,
        ],
        None,
    );
    assert!(ok, "rollout undo: {out}");
    let undone = destination(cluster, ns);
    for name in CONTROLLERS {
        assert_eq!(image(&undone, name), linkerd_image, "{name}");
    }
    assert_eq!(
        without_controller_images(&undone)["spec"],
        without_controller_images(&live)["spec"]
    );
}
