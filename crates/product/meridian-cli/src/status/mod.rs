//! `meridian-cli status`: which implementation runs in each controller
//! container of the destination Deployment's pods, asked through the API
//! server only (no port-forward): the pod template's and each pod's
//! images, and each container's `meridian_build_info` read from its admin
//! `/metrics` through the pods/proxy subresource. The decisions are
//! [`verdict`]'s.

pub mod verdict;

use std::time::Duration;

use anyhow::Context;
use k8s_api::labels::{CONTROL_PLANE_COMPONENT, DESTINATION_COMPONENT, DESTINATION_CONTAINERS};
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::{Api, Client, api::ListParams};

use self::verdict::{ContainerStatus, PodStatus, Running};

/// How long one `/metrics` read through the API server may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct StatusArgs {
    /// The control plane's namespace.
    #[arg(short = 'n', long, default_value = "linkerd")]
    pub namespace: String,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

/// Prints the status; returns the exit status (0 every pod runs Meridian,
/// 1 an original runs or the swap was reverted, 2 a container could not be
/// told). An error is "could not ask" (2).
pub async fn run(args: StatusArgs) -> anyhow::Result<i32> {
    let kube = crate::kube_client(args.context.as_deref()).await?;
    let ns = &args.namespace;
    let (name, deployment) = crate::destination_deployment(&kube, ns).await?;
    let selector = format!("{CONTROL_PLANE_COMPONENT}={DESTINATION_COMPONENT}");
    let template = controller_images(
        deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .map(|s| s.containers.as_slice())
            .unwrap_or_default(),
    );
    println!("DEPLOYMENT {name} (pod template)");
    for (container, image) in &template {
        let whose = if verdict::is_linkerd_image(image) {
            "Linkerd's image"
        } else {
            "not Linkerd's image"
        };
        println!("  {container:<13} {image}  {whose}");
    }

    let mut pods = Api::<Pod>::namespaced(kube.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await
        .with_context(|| format!("listing the pods labelled {selector} in {ns}"))?
        .items;
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut statuses = Vec::new();
    for pod in &pods {
        let status = pod_status(&kube, ns, pod).await;
        println!("POD {} ({})", status.name, status.phase);
        for c in &status.containers {
            let what = match &c.running {
                Running::Meridian(info) => info.to_string(),
                Running::Original(why) | Running::Unknown(why) => why.clone(),
            };
            println!("  {:<13} {}  {what}", c.container, c.image);
        }
        statuses.push(status);
    }
    let verdict = verdict::verdict(&name, &template, &statuses);
    for line in &verdict.lines {
        println!("{line}");
    }
    Ok(verdict.code)
}

/// The controller containers (`destination`, `sp-validator`, `policy`) and
/// their images, in the pod's order.
fn controller_images(containers: &[Container]) -> Vec<(String, String)> {
    containers
        .iter()
        .filter(|c| DESTINATION_CONTAINERS.contains(&c.name.as_str()))
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect()
}

/// The admin port of a controller container: its port named `*-admin`
/// (the chart's `dest-admin`, `spval-admin`, `policy-admin`), else the
/// chart's number.
fn admin_port(container: &Container) -> u16 {
    let named = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref().is_some_and(|n| n.ends_with("admin")))
        .and_then(|p| u16::try_from(p.container_port).ok());
    named.unwrap_or(match container.name.as_str() {
        "destination" => 9996,
        "sp-validator" => 9997,
        _ => 9990,
    })
}

async fn pod_status(kube: &Client, ns: &str, pod: &Pod) -> PodStatus {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Unknown".into());
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    // The containers' scrapes at once: an unreachable pod costs one timeout.
    let out = futures::future::join_all(
        containers
            .iter()
            .filter(|c| DESTINATION_CONTAINERS.contains(&c.name.as_str()))
            .map(|container| async {
                let image = container.image.clone().unwrap_or_default();
                let scrape = if phase == "Running" {
                    scrape(kube, ns, &name, admin_port(container)).await
                } else {
                    Err(format!("the pod is {phase}"))
                };
                let running = verdict::running(&image, scrape.as_deref().map_err(String::as_str));
                ContainerStatus {
                    container: container.name.clone(),
                    image,
                    running,
                }
            }),
    )
    .await;
    PodStatus {
        name,
        phase,
        containers: out,
    }
}

/// The pod's `/metrics` on `port`, through the API server's pods/proxy
/// subresource.
async fn scrape(kube: &Client, ns: &str, pod: &str, port: u16) -> Result<String, String> {
    let path = format!("/api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/metrics");
    let request = http::Request::get(&path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(SCRAPE_TIMEOUT, kube.request_text(request)).await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(error)) => Err(format!("GET {path}: {error}")),
        Err(_) => Err(format!("GET {path}: no answer in {SCRAPE_TIMEOUT:?}")),
    }
}
