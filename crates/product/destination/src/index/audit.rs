//! The index checking itself: every `Get` group's and every profile's
//! published state against what the stored objects give when recomputed
//! from scratch (no previous snapshot reused). A difference means a change
//! was stored but never published: a stale answer that no later event of
//! the same object would fix.

use std::sync::Arc;

use crate::{
    core::{FilterKey, ServiceId},
    proto::{profile::ProfileState, snapshot::Snapshot},
};

use super::{
    EndpointsIndex, ProfileKey,
    endpoints::{GroupContext, GroupState},
};

/// A group whose published snapshot is not what the index now computes.
#[derive(Debug)]
pub struct GroupMismatch {
    pub service: ServiceId,
    pub port: u16,
    pub key: FilterKey,
    /// What the group's streams are being sent.
    pub published: Arc<GroupState>,
    /// What the stored objects give.
    pub truth: Snapshot,
}

/// A profile publisher whose published profile is not what the index now computes.
#[derive(Debug)]
pub struct ProfileMismatch {
    pub key: ProfileKey,
    pub published: Arc<ProfileState>,
}

/// The result of one audit of the index.
#[derive(Debug, Default)]
pub struct IndexAudit {
    /// Groups checked.
    pub groups: usize,
    /// Profiles checked.
    pub profiles: usize,
    pub group_mismatches: Vec<GroupMismatch>,
    pub profile_mismatches: Vec<ProfileMismatch>,
}

impl IndexAudit {
    /// Whether every published state matched.
    pub fn is_consistent(&self) -> bool {
        self.group_mismatches.is_empty() && self.profile_mismatches.is_empty()
    }
}

impl EndpointsIndex {
    /// Recomputes every group and profile and compares it with what is published.
    pub fn audit(&self) -> IndexAudit {
        let cx = GroupContext {
            config: self.cluster.config(),
            lookups: &self.cluster,
        };
        let mut audit = IndexAudit::default();
        self.endpoints.for_each_group(
            &self.cluster,
            |service, port, key, published, truth| {
                audit.groups += 1;
                if *published.snapshot != truth {
                    audit.group_mismatches.push(GroupMismatch {
                        service: service.clone(),
                        port,
                        key: key.clone(),
                        published: published.clone(),
                        truth,
                    });
                }
            },
            &cx,
        );
        self.profiles
            .for_each_profile(&self.cluster, |key, published, consistent| {
                audit.profiles += 1;
                if !consistent {
                    audit.profile_mismatches.push(ProfileMismatch {
                        key: key.clone(),
                        published: published.clone(),
                    });
                }
            });
        audit
    }
}
