//! What an acquire waits for, beyond the primary's memory, before it counts
//! as held: the durability modes ([`Durability`]).

/// What an acquire waits for before it counts as held, when replica sync is
/// on (see [`Config::replica_sync`](crate::Config::replica_sync)): the modes
/// Redis offers for making a write outlive a crash.
///
/// | mode | sent after each acquire | the hold survives | servers |
/// | --- | --- | --- | --- |
/// | none (`replica_sync: Some(0)` under `Replicas`, or no replica at connect time) | nothing | while the primary lives | all |
/// | [`Replicas`](Durability::Replicas) (the default) | `WAIT n` | a failover to one of the `n` replicas that acknowledged | all |
/// | [`Aof`](Durability::Aof) | `WAITAOF 1 n` | also a restart of the primary from its AOF | Redis 7.2+, Valkey 7.2+, with `appendonly yes` |
/// | [`ReplicaAof`](Durability::ReplicaAof) | `WAITAOF 0 n` | a failover to, or restart of, one of `n` replicas that wrote it to disk | Redis 7.2+, Valkey 7.2+ |
///
/// The client asks each server what it supports when it connects, and again
/// whenever its connection was replaced (a reconnect, a Sentinel failover)
/// or the server refused the command: a mode the server cannot give is a
/// clear error at connect time ([`Error::Config`](crate::Error::Config)) or,
/// found later, at the acquire
/// ([`Error::DurabilityUnavailable`](crate::Error::DurabilityUnavailable)),
/// never the server's "unknown command". Under the default (`replica_sync:
/// None`), where the client turned sync on by itself, a server that refuses
/// `WAIT` (some managed services do) turns it off instead, with a warning.
///
/// Redisson (3.27 and later) sends `WAITAOF 1 n` wherever the server knows
/// the command, which broke locks on servers that know it but cannot keep the
/// promise (`appendfsync no`: the primary never reports an fsync, so every
/// acquire timed out; redisson#6920), or refuse it. Here the mode is chosen,
/// and the server checked for it (`appendonly`, `appendfsync`).
///
/// ```
/// use redisson_locks::{Config, Durability};
///
/// let mut config = Config::from_url("redis://127.0.0.1:6379")?;
/// // On the primary's disk and one replica's, before an acquire returns.
/// config.durability = Durability::Aof;
/// config.replica_sync = Some(1);
/// config.validate()?;
/// # Ok::<(), redisson_locks::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Durability {
    /// `WAIT n`: `n` replicas have the write in memory.
    #[default]
    Replicas,
    /// `WAITAOF 1 n`: the primary has written it to its append-only file and
    /// fsynced it, and so have `n` replicas (`n` may be 0: the primary's disk
    /// alone).
    Aof,
    /// `WAITAOF 0 n`: `n` replicas have fsynced it to their append-only files;
    /// the primary's own file is not waited for.
    ReplicaAof,
}

impl Durability {
    /// The command it sends, for messages.
    pub(crate) fn command(self) -> &'static str {
        match self {
            Durability::Replicas => "WAIT",
            Durability::Aof | Durability::ReplicaAof => "WAITAOF",
        }
    }

    /// Whether the primary's own fsync is waited for.
    pub(crate) fn local(self) -> bool {
        self == Durability::Aof
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Durability::Replicas => "replicas (WAIT)",
            Durability::Aof => "aof (WAITAOF 1 n)",
            Durability::ReplicaAof => "replica_aof (WAITAOF 0 n)",
        })
    }
}
