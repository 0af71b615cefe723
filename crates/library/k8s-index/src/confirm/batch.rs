//! Which misses share one request, and what that request asks.
//!
//! Misses of one kind that wait for a request slot at the same time share
//! it when one request can answer them all, so that a flood of misses
//! costs a request per slot however many names it asks for:
//!
//! - misses that name objects of one namespace ([`Query::Named`]) form one
//!   batch: one name is asked for with a `GET`; several with one list of
//!   the namespace's object metadata, of which each miss keeps its own;
//! - a [`Query::Selected`] is shared only by misses asking exactly it (a
//!   field selector cannot ask for several values at once).
//!
//! Every miss of a batch joined it before its request was sent, so the
//! answer (a consistent read) is as new as each miss. A batch holds at most
//! [`MAX_BATCH_NAMES`] names; a miss that finds it full goes without a slot.
//!
//! Pure: unit-tested without a server.

use std::collections::BTreeSet;

use super::Query;
use crate::ObjectKey;

/// Distinct names one request may answer. A list of the namespace answers
/// any number at the same cost; the bound keeps what a waiting batch holds
/// small whatever a client asks for.
pub const MAX_BATCH_NAMES: usize = 512;

/// What identifies a batch among a kind's waiting requests.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum BatchKey {
    /// Objects of this namespace, by name.
    Namespace(String),
    /// Exactly this query.
    Selected(Query),
}

impl BatchKey {
    /// The batch `query` belongs to.
    pub fn of(query: &Query) -> Self {
        match query {
            Query::Named { namespace, .. } => Self::Namespace(namespace.clone()),
            Query::Selected { .. } => Self::Selected(query.clone()),
        }
    }
}

/// The names a waiting batch asks for (empty for a [`BatchKey::Selected`]
/// one).
#[derive(Debug, Default)]
pub struct Names(BTreeSet<String>);

impl Names {
    /// Adds `query`'s name to the batch; `false` if the batch is full and
    /// does not hold it yet.
    pub fn join(&mut self, query: &Query) -> bool {
        let Query::Named { name, .. } = query else {
            return true;
        };
        if self.0.contains(name) {
            return true;
        }
        if self.0.len() >= MAX_BATCH_NAMES {
            return false;
        }
        self.0.insert(name.clone());
        true
    }

    /// What the batch's request asks, given the query of the miss that
    /// sends it.
    pub fn request(self, query: &Query) -> Request {
        match query {
            Query::Named { namespace, .. } if self.0.len() > 1 => Request::Listed {
                namespace: namespace.clone(),
                names: self.0,
            },
            _ => Request::One(query.clone()),
        }
    }
}

/// One request to the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// One query as it is (a `GET`, or a list with its selectors).
    One(Query),
    /// The metadata of every object of `namespace`, kept for `names`.
    Listed {
        namespace: String,
        names: BTreeSet<String>,
    },
}

impl Request {
    /// Whether a listed object answers this request.
    pub fn wants(&self, key: &ObjectKey) -> bool {
        match self {
            Self::One(_) => true,
            Self::Listed { names, .. } => names.contains(&key.name),
        }
    }
}

/// The keys of a batch's answer that answer `query`: its own object for a
/// named miss, every key for a selected one.
pub fn own(query: &Query, keys: &[ObjectKey]) -> Vec<ObjectKey> {
    match query {
        Query::Named { namespace, name } => keys
            .iter()
            .filter(|key| key.namespace.as_deref() == Some(namespace) && &key.name == name)
            .cloned()
            .collect(),
        Query::Selected { .. } => keys.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(namespace: &str, name: &str) -> Query {
        Query::Named {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn selected(fields: &str) -> Query {
        Query::Selected {
            namespace: None,
            fields: fields.into(),
            labels: None,
        }
    }

    #[test]
    fn names_of_one_namespace_share_a_batch_and_selections_do_not() {
        assert_eq!(
            BatchKey::of(&named("a", "x")),
            BatchKey::of(&named("a", "y"))
        );
        assert_ne!(
            BatchKey::of(&named("a", "x")),
            BatchKey::of(&named("b", "x"))
        );
        assert_ne!(
            BatchKey::of(&selected("spec.clusterIP=10.0.0.1")),
            BatchKey::of(&selected("spec.clusterIP=10.0.0.2"))
        );
    }

    #[test]
    fn one_name_is_asked_for_alone_and_several_with_one_list() {
        let mut names = Names::default();
        assert!(names.join(&named("a", "x")));
        assert!(names.join(&named("a", "x")));
        assert_eq!(
            names.request(&named("a", "x")),
            Request::One(named("a", "x"))
        );

        let mut names = Names::default();
        for name in ["x", "y", "x"] {
            assert!(names.join(&named("a", name)));
        }
        let request = names.request(&named("a", "x"));
        assert_eq!(
            request,
            Request::Listed {
                namespace: "a".into(),
                names: ["x".to_string(), "y".to_string()].into(),
            }
        );
        assert!(request.wants(&ObjectKey::new(Some("a"), "y")));
        assert!(!request.wants(&ObjectKey::new(Some("a"), "z")));
    }

    #[test]
    fn a_full_batch_takes_no_new_name_but_still_the_ones_it_holds() {
        let mut names = Names::default();
        for i in 0..MAX_BATCH_NAMES {
            assert!(names.join(&named("a", &format!("n{i}"))));
        }
        assert!(!names.join(&named("a", "one-more")));
        assert!(names.join(&named("a", "n0")));
    }

    #[test]
    fn each_miss_keeps_its_own_object_of_a_shared_answer() {
        let keys = vec![
            ObjectKey::new(Some("a"), "x"),
            ObjectKey::new(Some("a"), "y"),
        ];
        assert_eq!(own(&named("a", "y"), &keys), vec![keys[1].clone()]);
        assert!(own(&named("a", "z"), &keys).is_empty());
        assert!(own(&named("b", "x"), &keys).is_empty());
        assert_eq!(own(&selected("metadata.name=x"), &keys), keys);
    }
}
