//! AdmissionReview parsing and answering for `admission.k8s.io/v1` and
//! `v1beta1` (both have the same JSON shape). A review is answered in the
//! version it came in, with the request's `uid`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The API group of AdmissionReviews.
pub const GROUP: &str = "admission.k8s.io";

/// The AdmissionReview versions we accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1beta1,
}

impl ReviewVersion {
    /// The `apiVersion` string, e.g. `admission.k8s.io/v1`.
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }

    fn parse(api_version: &str) -> Option<Self> {
        match api_version {
            "admission.k8s.io/v1" => Some(ReviewVersion::V1),
            "admission.k8s.io/v1beta1" => Some(ReviewVersion::V1beta1),
            _ => None,
        }
    }
}

/// Group, version and kind (or resource) of the object under review.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

/// Group, version and resource of the object under review.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

/// The `request` of an AdmissionReview. Fields a validator rarely needs are
/// kept as raw JSON.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest {
    /// Identifies this review; echoed in the response.
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub resource: GroupVersionResource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_resource: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_kind: Option<GroupVersionKind>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_resource: Option<GroupVersionResource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub user_info: Value,
    /// The object as it would be stored (absent on DELETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    /// The existing object (UPDATE and DELETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Value>,
}

/// A parsed AdmissionReview request.
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionReview {
    pub version: ReviewVersion,
    pub request: AdmissionRequest,
}

/// Why a request body is not a usable AdmissionReview. These become HTTP
/// 400 responses with the message as a plain-text body.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("empty request body: expected an AdmissionReview")]
    Empty,
    #[error("malformed AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error("malformed AdmissionReview: expected a JSON object")]
    NotAnObject,
    #[error(
        "unsupported AdmissionReview apiVersion {0:?}: expected admission.k8s.io/v1 or v1beta1"
    )]
    UnsupportedVersion(String),
    #[error("unexpected kind {0:?}: expected AdmissionReview")]
    WrongKind(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
    #[error("AdmissionReview request has no uid")]
    MissingUid,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    request: Option<AdmissionRequest>,
}

impl AdmissionReview {
    /// Parses a request body.
    pub fn parse(body: &[u8]) -> Result<Self, ReviewError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Err(ReviewError::Empty);
        }
        // One pass straight into the typed review (only the objects stay
        // `Value`s): parsing the whole body into a `Value` first, then
        // converting it, was most of a review's CPU time.
        let first = body.iter().find(|b| !b.is_ascii_whitespace());
        if first != Some(&b'{') {
            // Not an object: say why precisely if it is JSON at all.
            let _: Value = serde_json::from_slice(body)?;
            return Err(ReviewError::NotAnObject);
        }
        let incoming: IncomingReview = serde_json::from_slice(body)?;
        let version = ReviewVersion::parse(&incoming.api_version)
            .ok_or(ReviewError::UnsupportedVersion(incoming.api_version))?;
        if incoming.kind != "AdmissionReview" {
            return Err(ReviewError::WrongKind(incoming.kind));
        }
        let request = incoming.request.ok_or(ReviewError::MissingRequest)?;
        if request.uid.is_empty() {
            return Err(ReviewError::MissingUid);
        }
        Ok(Self { version, request })
    }

    /// The answer to this review.
    pub fn respond(&self, verdict: Result<(), String>) -> AdmissionResponse {
        match verdict {
            Ok(()) => AdmissionResponse::allow(&self.request.uid),
            Err(message) => AdmissionResponse::deny(&self.request.uid, message),
        }
    }

    /// The answer to this review, with warnings.
    pub fn respond_with(&self, verdict: crate::Verdict) -> AdmissionResponse {
        AdmissionResponse {
            warnings: verdict.warnings,
            ..self.respond(verdict.result)
        }
    }
}

/// The `response` of an AdmissionReview.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Shown to the client (`kubectl` prints `Warning: <text>`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The `metav1.Status` of a denial.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Status {
    pub code: u16,
    pub message: String,
}

/// The HTTP-like code of a denial: the object is invalid.
pub const DENIED_CODE: u16 = 400;

impl AdmissionResponse {
    /// Admits the object.
    pub fn allow(uid: &str) -> Self {
        Self {
            uid: uid.to_string(),
            allowed: true,
            status: None,
            warnings: Vec::new(),
        }
    }

    /// Rejects the object with code 400 and `message`, which `kubectl`
    /// prints after `admission webhook "<name>" denied the request: `.
    pub fn deny(uid: &str, message: impl Into<String>) -> Self {
        Self {
            uid: uid.to_string(),
            allowed: false,
            status: Some(Status {
                code: DENIED_CODE,
                message: message.into(),
            }),
            warnings: Vec::new(),
        }
    }

    /// The full AdmissionReview JSON carrying this response.
    pub fn to_review_json(&self, version: ReviewVersion) -> Value {
        serde_json::json!({
            "apiVersion": version.api_version(),
            "kind": "AdmissionReview",
            "response": self,
        })
    }

    /// The same AdmissionReview as [`Self::to_review_json`], serialized
    /// straight into its body (without building a `Value` first).
    pub fn to_review_body(&self, version: ReviewVersion) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct OutgoingReview<'a> {
            api_version: &'static str,
            kind: &'static str,
            response: &'a AdmissionResponse,
        }
        let review = OutgoingReview {
            api_version: version.api_version(),
            kind: "AdmissionReview",
            response: self,
        };
        // Serializing plain structs and strings into a Vec cannot fail.
        serde_json::to_vec(&review).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(api_version: &str) -> String {
        serde_json::json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "linkerd.io", "version": "v1alpha2", "kind": "ServiceProfile"},
                "resource": {"group": "linkerd.io", "version": "v1alpha2", "resource": "serviceprofiles"},
                "name": "web", "namespace": "ns", "operation": "CREATE",
                "userInfo": {"username": "admin"},
                "object": {"metadata": {"name": "web"}},
                "dryRun": false,
                "somethingNew": 1,
            },
        })
        .to_string()
    }

    #[test]
    fn parses_both_versions() {
        for (api_version, version) in [
            ("admission.k8s.io/v1", ReviewVersion::V1),
            ("admission.k8s.io/v1beta1", ReviewVersion::V1beta1),
        ] {
            let parsed = AdmissionReview::parse(review(api_version).as_bytes()).expect("parse");
            assert_eq!(parsed.version, version);
            assert_eq!(parsed.request.operation, "CREATE");
            assert_eq!(parsed.request.kind.kind, "ServiceProfile");
            assert_eq!(
                parsed.request.object.as_ref().expect("object")["metadata"]["name"],
                "web"
            );
        }
    }

    #[test]
    fn answers_in_the_request_version_with_its_uid() {
        let parsed =
            AdmissionReview::parse(review("admission.k8s.io/v1beta1").as_bytes()).expect("parse");
        let json = parsed
            .respond(Err("nope".into()))
            .to_review_json(parsed.version);
        assert_eq!(
            json,
            serde_json::json!({
                "apiVersion": "admission.k8s.io/v1beta1",
                "kind": "AdmissionReview",
                "response": {
                    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "allowed": false,
                    "status": {"code": 400, "message": "nope"},
                },
            })
        );
        let allowed = parsed.respond(Ok(())).to_review_json(ReviewVersion::V1);
        let body: Value = serde_json::from_slice(
            &parsed
                .respond(Err("no".into()))
                .to_review_body(ReviewVersion::V1),
        )
        .expect("JSON");
        assert_eq!(
            body,
            parsed
                .respond(Err("no".into()))
                .to_review_json(ReviewVersion::V1)
        );
        assert_eq!(allowed["response"]["allowed"], true);
        assert!(allowed["response"].get("status").is_none());
    }

    #[test]
    fn rejects_unusable_bodies() {
        let cases: &[(&[u8], &str)] = &[
            (b"", "empty request body"),
            (b"  \n", "empty request body"),
            (b"{", "malformed AdmissionReview"),
            (b"[]", "malformed AdmissionReview"),
            (b"\xff\xfe", "malformed AdmissionReview"),
            (br#"{"apiVersion":"v1","kind":"AdmissionReview"}"#, "unsupported AdmissionReview apiVersion \"v1\""),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}"#, "unexpected kind \"Pod\""),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#, "has no request"),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}"#, "has no uid"),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}"#, "malformed AdmissionReview"),
        ];
        for (body, want) in cases {
            let error = AdmissionReview::parse(body)
                .expect_err("must fail")
                .to_string();
            assert!(error.contains(want), "{body:?}: {error}");
        }
    }
}
