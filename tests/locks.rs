//! The integration suite: every scenario against a real `redis-server` that the
//! test starts itself (see `support`).

#[path = "support/mod.rs"]
mod support;

mod locks {
    mod ambiguity;
    mod cancellation;
    mod cluster;
    mod cluster_campaigns;
    mod config_database;
    mod deadlocks;
    mod doctor;
    mod durability;
    mod errors;
    mod fair;
    mod fair_line;
    mod fair_semaphore;
    mod faults;
    mod fenced;
    mod group;
    mod histories;
    mod hostile;
    mod inspect;
    mod interop;
    mod java;
    mod latch;
    mod leader;
    mod liveness;
    mod liveness_campaigns;
    mod local_line;
    mod max_hold;
    mod multi;
    mod non_reentrant;
    mod order;
    mod permit_expirable;
    mod porting;
    mod pubsub;
    mod read_write;
    mod redlock;
    mod reentrant;
    mod replication;
    mod safety;
    mod self_wait;
    mod semaphore;
    mod sentinel;
    mod siblings;
    mod spin;
    mod watchdog;
}
