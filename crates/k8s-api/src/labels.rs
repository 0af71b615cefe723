//! Linkerd's label names on Kubernetes objects, defined once.

/// On control-plane objects and meshed pods: the control plane's namespace.
pub const CONTROL_PLANE_NS: &str = "linkerd.io/control-plane-ns";

/// On control-plane objects: which component they belong to (`destination`).
pub const CONTROL_PLANE_COMPONENT: &str = "linkerd.io/control-plane-component";
