//! Asking one side: the call a proxy makes, its messages turned into the
//! state they describe (for `Get`, the endpoint set the adds, removes and
//! no-endpoints build; for the others, the newest message), the first
//! complete answer (the state once the stream has been quiet for the
//! settle time), and, with `--follow`, the two sides watched together.

use std::{collections::BTreeMap, pin::Pin, sync::Arc, time::Duration};

use futures::{Stream, StreamExt};
use linkerd2_proxy_api::{
    destination::{GetDestination, destination_client::DestinationClient, update},
    inbound::{PortSpec, inbound_server_policies_client::InboundServerPoliciesClient},
    outbound::{TrafficSpec, outbound_policies_client::OutboundPoliciesClient, traffic_spec},
};
use tokio::time::Instant;
use tonic::transport::Channel;

use super::{
    diff::Difference,
    question::{Answer, Api, Question, Request},
    tree::{Decoder, Node, names},
};

/// A side's two addresses, connected (lazily, each shared by every call).
#[derive(Clone)]
pub struct Conns {
    pub destination: Channel,
    pub policy: Channel,
}

/// Successive states of one call.
pub type States = Pin<Box<dyn Stream<Item = Result<Node, tonic::Status>> + Send>>;

/// How long to wait for answers.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// For the first message.
    pub wait: Duration,
    /// Quiet after the last message before an answer counts as complete.
    pub settle: Duration,
}

/// Opens the call of `question` on `conns`.
pub async fn open(
    conns: &Conns,
    decoder: Arc<Decoder>,
    question: &Question,
) -> Result<States, tonic::Status> {
    let decode = |name: &'static str| {
        let decoder = decoder.clone();
        move |message: &dyn DecodeAs| message.decode_with(&decoder, name)
    };
    match (&question.request, question.api) {
        (Request::Destination { path, token }, api) => {
            let mut client = DestinationClient::new(conns.destination.clone());
            let request = GetDestination {
                scheme: "k8s".into(),
                path: path.clone(),
                context_token: token.clone(),
            };
            if api == Api::Get {
                let stream = client.get(request).await?.into_inner();
                let mut state = GetState::default();
                return Ok(Box::pin(stream.map(move |update| {
                    let update = update?;
                    state.apply(&decoder, &update)?;
                    Ok(state.to_node())
                })));
            }
            let decode = decode(names::PROFILE);
            let stream = client.get_profile(request).await?.into_inner();
            Ok(Box::pin(stream.map(move |m| decode(&m?))))
        }
        (Request::Outbound { addr, workload }, _) => {
            let mut client = OutboundPoliciesClient::new(conns.policy.clone());
            let spec = TrafficSpec {
                source_workload: workload.clone(),
                target: Some(traffic_spec::Target::Addr((*addr).into())),
            };
            let decode = decode(names::OUTBOUND_POLICY);
            let stream = client.watch(spec).await?.into_inner();
            Ok(Box::pin(stream.map(move |m| decode(&m?))))
        }
        (Request::Inbound { workload, port }, _) => {
            let mut client = InboundServerPoliciesClient::new(conns.policy.clone());
            let spec = PortSpec {
                workload: workload.clone(),
                port: *port,
            };
            let decode = decode(names::SERVER);
            let stream = client.watch_port(spec).await?.into_inner();
            Ok(Box::pin(stream.map(move |m| decode(&m?))))
        }
    }
}

/// A message decoded into a tree (an error status if it cannot be).
trait DecodeAs {
    fn decode_with(&self, decoder: &Decoder, name: &str) -> Result<Node, tonic::Status>;
}

impl<M: prost::Message> DecodeAs for M {
    fn decode_with(&self, decoder: &Decoder, name: &str) -> Result<Node, tonic::Status> {
        decoder
            .decode(name, self)
            .map_err(|e| tonic::Status::internal(format!("compare could not decode: {e}")))
    }
}

/// The endpoint set a `Get` stream describes so far.
#[derive(Default)]
struct GetState {
    addrs: BTreeMap<String, Node>,
    labels: Option<Node>,
    no_endpoints: Option<bool>,
}

impl GetState {
    fn apply(
        &mut self,
        decoder: &Decoder,
        update: &linkerd2_proxy_api::destination::Update,
    ) -> Result<(), tonic::Status> {
        match &update.update {
            Some(update::Update::Add(set)) => {
                self.no_endpoints = None;
                self.labels = Some(Node::Map(
                    set.metric_labels
                        .iter()
                        .map(|(k, v)| (k.clone(), Node::Str(v.clone())))
                        .collect(),
                ));
                for addr in &set.addrs {
                    let Node::Fields(mut fields) =
                        addr.decode_with(decoder, names::WEIGHTED_ADDR)?
                    else {
                        continue;
                    };
                    let key = fields.remove("addr").map_or_else(String::new, text);
                    self.addrs.insert(key, Node::Fields(fields));
                }
            }
            Some(update::Update::Remove(set)) => {
                for addr in &set.addrs {
                    let key = text(addr.decode_with(decoder, names::TCP_ADDRESS)?);
                    self.addrs.remove(&key);
                }
            }
            Some(update::Update::NoEndpoints(none)) => {
                self.addrs.clear();
                self.labels = None;
                self.no_endpoints = Some(none.exists);
            }
            None => {}
        }
        Ok(())
    }

    /// `{addrs: {<ip:port>: WeightedAddr…}, metric_labels, no_endpoints: {exists}}`.
    fn to_node(&self) -> Node {
        let mut fields = BTreeMap::new();
        fields.insert("addrs".to_string(), Node::Set(self.addrs.clone()));
        if let Some(labels) = &self.labels {
            fields.insert("metric_labels".to_string(), labels.clone());
        }
        if let Some(exists) = self.no_endpoints {
            fields.insert(
                "no_endpoints".to_string(),
                Node::Fields([("exists".to_string(), Node::Bool(exists))].into()),
            );
        }
        Node::Fields(fields)
    }
}

/// The empty endpoint state: what a silent `Get` stream describes.
pub fn no_endpoints_sent() -> Node {
    GetState::default().to_node()
}

fn text(node: Node) -> String {
    match node {
        Node::Str(s) => s,
        other => other.to_string(),
    }
}

/// Whether a failed call never reached the server's answer (connection
/// refused or lost): a status the transport made up carries its cause.
fn transport_failure(status: &tonic::Status) -> bool {
    std::error::Error::source(status).is_some()
}

fn failed(status: tonic::Status) -> Answer {
    if transport_failure(&status) {
        let cause = std::error::Error::source(&status)
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        Answer::Unreachable(format!("{}{cause}", status.message()))
    } else {
        Answer::Status {
            code: status.code(),
            message: status.message().to_string(),
        }
    }
}

/// The call of `question`, opened when first polled: its first item is
/// the first message or why the call failed. Opening may itself be what
/// waits: the original answers a `Get` for a Service without ready
/// endpoints with no response headers at all until its first message.
fn opened(conns: &Conns, decoder: Arc<Decoder>, question: &Question) -> States {
    let (conns, question) = (conns.clone(), question.clone());
    let call = async move { open(&conns, decoder, &question).await };
    Box::pin(futures::stream::once(call).flat_map(|opened| match opened {
        Ok(states) => states,
        Err(status) => Box::pin(futures::stream::iter([Err(status)])) as States,
    }))
}

/// Asks `question`; returns the first complete answer and, if the stream
/// is still open, the stream (for `--follow`).
pub async fn first_answer(
    conns: &Conns,
    decoder: Arc<Decoder>,
    question: &Question,
    timing: Timing,
) -> (Answer, Option<States>) {
    let mut states = opened(conns, decoder, question);
    let first = match tokio::time::timeout(timing.wait, states.next()).await {
        Ok(Some(Ok(state))) => state,
        Ok(Some(Err(status))) => return (failed(status), None),
        Ok(None) => {
            let ended = Answer::Status {
                code: tonic::Code::Ok,
                message: "the stream ended before any message".into(),
            };
            return (ended, None);
        }
        // A `Get` stream sends nothing while there are no endpoints (the
        // original not even its response headers).
        Err(_) if question.api == Api::Get => {
            return (Answer::Value(no_endpoints_sent()), Some(states));
        }
        Err(_) => return (Answer::Silent(timing.wait), Some(states)),
    };
    let (state, states) = settle(first, states, timing).await;
    (state, states)
}

/// The newest state once `states` has been quiet for the settle time
/// (bounded by the wait).
async fn settle(mut state: Node, mut states: States, timing: Timing) -> (Answer, Option<States>) {
    let deadline = Instant::now() + timing.wait;
    loop {
        let quiet = Instant::now() + timing.settle;
        match tokio::time::timeout_at(quiet.min(deadline), states.next()).await {
            Ok(Some(Ok(next))) => state = next,
            Ok(Some(Err(status))) => return (failed(status), None),
            Ok(None) => return (Answer::Value(state), None),
            Err(_) => return (Answer::Value(state), Some(states)),
        }
        if Instant::now() >= deadline {
            return (Answer::Value(state), Some(states));
        }
    }
}

/// A time the two sides differed for longer than the grace period.
#[derive(Clone, Debug)]
pub struct Divergence {
    /// When it started, from the start of the follow window.
    pub after: Duration,
    /// How long it lasted (until the sides agreed, or the window ended).
    pub lasted: Duration,
    /// Both answers when the grace period ran out.
    pub a: Answer,
    pub b: Answer,
}

/// Watches both streams for `window`: returns the first time the sides
/// differed (as `differs` judges) for longer than `grace`.
pub async fn follow(
    streams: (Option<States>, Option<States>),
    answers: (Answer, Answer),
    window: Duration,
    grace: Duration,
    differs: impl Fn(&Answer, &Answer) -> Vec<Difference>,
) -> Option<Divergence> {
    let start = Instant::now();
    let end = start + window;
    let (mut a, mut b) = answers;
    let (mut sa, mut sb) = streams;
    let mut since: Option<Instant> = (!differs(&a, &b).is_empty()).then_some(start);
    // The divergence found, and whether it is still going on.
    let mut found: Option<(Divergence, bool)> = None;
    loop {
        // The next event: a message on either side, the grace period
        // running out, or the end of the window.
        let grace_end = since.filter(|_| found.is_none()).map(|s| s + grace);
        let wake = grace_end.map_or(end, |g| g.min(end));
        let next_a = async {
            match sa.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        let next_b = async {
            match sb.as_mut() {
                Some(s) => s.next().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            m = next_a => match m {
                Some(Ok(state)) => a = Answer::Value(state),
                Some(Err(status)) => { a = failed(status); sa = None; }
                None => sa = None,
            },
            m = next_b => match m {
                Some(Ok(state)) => b = Answer::Value(state),
                Some(Err(status)) => { b = failed(status); sb = None; }
                None => sb = None,
            },
            () = tokio::time::sleep_until(wake) => {}
        }
        let now = Instant::now();
        if differs(&a, &b).is_empty() {
            if let Some((d, ongoing)) = found.as_mut()
                && *ongoing
            {
                d.lasted = now.duration_since(start).saturating_sub(d.after);
                *ongoing = false;
            }
            since = None;
        } else if since.is_none() {
            since = Some(now);
        }
        if found.is_none()
            && let Some(s) = since
            && now.duration_since(s) > grace
        {
            let divergence = Divergence {
                after: s.duration_since(start),
                lasted: now.duration_since(s),
                a: a.clone(),
                b: b.clone(),
            };
            found = Some((divergence, true));
        }
        if now >= end {
            return found.map(|(mut d, ongoing)| {
                if ongoing {
                    d.lasted = window.saturating_sub(d.after);
                }
                d
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use linkerd2_proxy_api::destination::{
        AddrSet, NoEndpoints, Update, WeightedAddr, WeightedAddrSet,
    };

    use super::*;

    fn addr(last: u8) -> linkerd2_proxy_api::net::TcpAddress {
        std::net::SocketAddr::from(([10, 0, 0, last], 8080)).into()
    }

    fn add(lasts: &[u8]) -> Update {
        Update {
            update: Some(update::Update::Add(WeightedAddrSet {
                addrs: lasts
                    .iter()
                    .map(|l| WeightedAddr {
                        addr: Some(addr(*l)),
                        weight: 10000,
                        ..Default::default()
                    })
                    .collect(),
                metric_labels: [("service".to_string(), "web".to_string())].into(),
            })),
        }
    }

    /// The state a `Get` stream describes: adds in any batches, removes,
    /// and a NoEndpoints that clears it.
    #[test]
    fn get_state_follows_adds_removes_and_no_endpoints() {
        let decoder = Decoder::new().expect("descriptors");
        let mut one = GetState::default();
        for u in [add(&[1, 2]), add(&[3])] {
            one.apply(&decoder, &u).expect("apply");
        }
        let mut other = GetState::default();
        other.apply(&decoder, &add(&[3, 2, 1])).expect("apply");
        assert_eq!(one.to_node(), other.to_node(), "batches do not matter");
        assert_eq!(
            one.to_node().to_string(),
            "{addrs: [10.0.0.1:8080: {metric_labels: {}, weight: 10000}, \
             10.0.0.2:8080: {metric_labels: {}, weight: 10000}, \
             10.0.0.3:8080: {metric_labels: {}, weight: 10000}], \
             metric_labels: {\"service\": \"web\"}}"
        );
        let remove = Update {
            update: Some(update::Update::Remove(AddrSet {
                addrs: vec![addr(2)],
            })),
        };
        one.apply(&decoder, &remove).expect("apply");
        let Some(Node::Set(addrs)) = one.to_node().field("addrs").cloned() else {
            panic!("addrs");
        };
        assert_eq!(
            addrs.keys().collect::<Vec<_>>(),
            ["10.0.0.1:8080", "10.0.0.3:8080"]
        );
        let none = Update {
            update: Some(update::Update::NoEndpoints(NoEndpoints { exists: true })),
        };
        one.apply(&decoder, &none).expect("apply");
        assert_eq!(
            one.to_node().to_string(),
            "{addrs: [], no_endpoints: {exists: true}}"
        );
        assert_eq!(no_endpoints_sent().to_string(), "{addrs: []}");
    }

    /// A destination that, like Linkerd's Go server for a Service without
    /// ready endpoints, sends no response headers until its first message
    /// (here: never).
    struct Headerless;

    #[tonic::async_trait]
    impl linkerd2_proxy_api::destination::destination_server::Destination for Headerless {
        type GetStream = futures::stream::Pending<Result<Update, tonic::Status>>;
        type GetProfileStream = futures::stream::Pending<
            Result<linkerd2_proxy_api::destination::DestinationProfile, tonic::Status>,
        >;

        async fn get(
            &self,
            _: tonic::Request<linkerd2_proxy_api::destination::GetDestination>,
        ) -> Result<tonic::Response<Self::GetStream>, tonic::Status> {
            std::future::pending().await
        }

        async fn get_profile(
            &self,
            _: tonic::Request<linkerd2_proxy_api::destination::GetDestination>,
        ) -> Result<tonic::Response<Self::GetProfileStream>, tonic::Status> {
            std::future::pending().await
        }
    }

    /// Such a `Get` is the original's fail-fast difference (nothing sent
    /// while there are no endpoints), with its stream kept for `--follow`;
    /// a `GetProfile` that says nothing is silence.
    #[tokio::test]
    async fn a_get_without_response_headers_is_no_endpoints_sent_and_kept() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let at = listener.local_addr().expect("addr");
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(
                    linkerd2_proxy_api::destination::destination_server::DestinationServer::new(
                        Headerless,
                    ),
                )
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let channel = Channel::from_shared(format!("http://{at}"))
            .expect("uri")
            .connect_lazy();
        let conns = Conns {
            destination: channel.clone(),
            policy: channel,
        };
        let decoder = Arc::new(Decoder::new().expect("descriptors"));
        let timing = Timing {
            wait: Duration::from_millis(300),
            settle: Duration::from_millis(50),
        };
        let question = |api| Question {
            api,
            target: "web.ns.svc.cluster.local:80".into(),
            request: Request::Destination {
                path: "web.ns.svc.cluster.local:80".into(),
                token: String::new(),
            },
            client: "ns/client".into(),
            age: None,
        };
        let (answer, stream) =
            first_answer(&conns, decoder.clone(), &question(Api::Get), timing).await;
        assert!(
            matches!(&answer, Answer::Value(node) if *node == no_endpoints_sent()),
            "{answer:?}"
        );
        assert!(stream.is_some(), "the Get stream is kept for --follow");
        let (answer, _) = first_answer(&conns, decoder, &question(Api::GetProfile), timing).await;
        assert!(matches!(answer, Answer::Silent(_)), "{answer:?}");
        server.abort();
    }
}
