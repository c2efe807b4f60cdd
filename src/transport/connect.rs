//! Dialling: the link a [`Config`] asks for (single server, Cluster or
//! Sentinel, each over TLS when the addresses say `rediss://`), and what is read
//! from the server once connected.
//!
//! Cluster and Sentinel are cargo features (`cluster`, `sentinel`, both on by
//! default); a configuration that needs one this build lacks is refused with
//! [`Error::Config`] rather than silently treated as a single server.

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::transport::conn::{Conn, Link};
use crate::transport::pubsub::PushHandler;

fn manager_config(config: &Config, pushes: &PushHandler) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(Some(config.timeout))
        .set_number_of_retries(config.retry_attempts as usize)
        .set_max_delay(config.retry_interval)
        .set_push_sender(pushes.sender())
}

/// Connects the kind of link `config` asks for.
pub(crate) async fn connect_link(config: Config, pushes: PushHandler) -> Result<Link> {
    if !config.cluster_nodes.is_empty() {
        connect_cluster(&config, &pushes).await
    } else if !config.sentinel_addresses.is_empty() {
        connect_sentinel(&config, &pushes).await
    } else {
        connect_single(&config, &pushes).await
    }
}

async fn connect_single(config: &Config, pushes: &PushHandler) -> Result<Link> {
    let info = config.connection_info()?;
    let redis_client = match tls::certificates(config)? {
        Some(certificates) => tls::client_with(info, certificates)?,
        None => redis::Client::open(info).map_err(|e| Error::Config(e.to_string()))?,
    };
    let manager = ConnectionManager::new_with_config(redis_client, manager_config(config, pushes))
        .await
        .map_err(Error::redis)?;
    Ok(Link::Single(manager))
}

#[cfg(not(feature = "sentinel"))]
async fn connect_sentinel(_config: &Config, _pushes: &PushHandler) -> Result<Link> {
    Err(Error::Config(
        "sentinel_addresses is set, but this build has no Sentinel support (cargo feature \
         `sentinel`)"
            .into(),
    ))
}

#[cfg(feature = "sentinel")]
async fn connect_sentinel(config: &Config, pushes: &PushHandler) -> Result<Link> {
    use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
    let sentinels = config.sentinel_infos()?;
    // Credentials in the sentinel URLs are the sentinels' own.
    let sentinel_auth = sentinels.first().map(|info| {
        let settings = info.redis_settings();
        (
            settings.username().map(str::to_owned),
            settings.password().map(str::to_owned),
        )
    });
    let addresses = sentinels.iter().map(|info| info.addr().clone());
    let master = config.sentinel_master_name.clone().unwrap_or_default();
    let mut builder = SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)
        .map_err(Error::redis)?
        .set_client_to_redis_protocol(redis::ProtocolVersion::RESP3)
        .set_client_to_redis_db(config.database);
    if let Some(user) = &config.username {
        builder = builder.set_client_to_redis_username(user);
    }
    if let Some(password) = &config.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some((user, password)) = sentinel_auth {
        if let Some(user) = user {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = password {
            builder = builder.set_client_to_sentinel_password(password);
        }
    }
    builder = tls::sentinel(builder, config)?;
    let sentinel = builder.build().map_err(|e| Error::Config(e.to_string()))?;
    // Few re-dials of one address: after a failover it stays dead, and the sooner
    // a command fails, the sooner the sentinels are asked again.
    let conn = crate::transport::sentinel::SentinelConn::connect(
        sentinel,
        manager_config(config, pushes).set_number_of_retries(1),
        pushes.reconnect_signal(),
    )
    .await
    .map_err(Error::redis)?;
    Ok(Link::Sentinel(std::sync::Arc::new(conn)))
}

#[cfg(not(feature = "cluster"))]
async fn connect_cluster(_config: &Config, _pushes: &PushHandler) -> Result<Link> {
    Err(Error::Config(
        "cluster_nodes is set, but this build has no Cluster support (cargo feature `cluster`)"
            .into(),
    ))
}

#[cfg(feature = "cluster")]
async fn connect_cluster(config: &Config, pushes: &PushHandler) -> Result<Link> {
    let mut builder = redis::cluster::ClusterClientBuilder::new(config.cluster_node_infos()?)
        .use_protocol(redis::ProtocolVersion::RESP3)
        .connection_timeout(config.connect_timeout)
        .response_timeout(config.timeout)
        .retries(config.retry_attempts)
        .max_retry_wait(u64::try_from(config.retry_interval.as_millis()).unwrap_or(u64::MAX))
        .push_sender(pushes.sender());
    if let Some(user) = &config.username {
        builder = builder.username(user);
    }
    if let Some(password) = &config.password {
        builder = builder.password(password);
    }
    builder = tls::cluster(builder, config)?;
    if config.database != 0 {
        builder = builder.database_id(config.database);
    }
    let client = builder.build().map_err(|e| Error::Config(e.to_string()))?;
    let mut conn = match client.get_async_connection().await {
        Ok(conn) => conn,
        Err(e) if config.database != 0 => return Err(cluster_database_refused(config, &e).await),
        Err(e) => return Err(Error::redis(e)),
    };
    if config.database != 0 {
        check_cluster_database(&mut conn, config).await?;
    }
    let sharded = match config.sharded_pubsub {
        // Asked for explicitly on a server without it: every release script's
        // SPUBLISH would fail after its writes (freed, yet reported failed), and
        // every waiter's SSUBSCRIBE be refused. Refused here instead.
        Some(true) => match server_major_version(&mut conn).await {
            Some(major) if major < 7 => {
                return Err(Error::Config(format!(
                    "sharded_pubsub is Some(true), but the cluster runs Redis {major}.x, which \
                     has no sharded pub/sub (SSUBSCRIBE and SPUBLISH need 7.0); leave it None \
                     or set Some(false)"
                )))
            }
            _ => true,
        },
        Some(false) => false,
        // As Redisson: sharded pub/sub in cluster mode on servers that have it.
        // Guessing wrong would leave Java and Rust clients deaf to each other's
        // unlocks, so an unknown version is an error, not a guess.
        None => match server_major_version(&mut conn).await {
            Some(major) => major >= 7,
            None => {
                return Err(Error::Config(
                    "could not read the cluster's Redis version to choose between sharded \
                     and plain pub/sub; set Config::sharded_pubsub"
                        .into(),
                ))
            }
        },
    };
    Ok(Link::Cluster { conn, sharded })
}

/// Every primary of the cluster serves `config.database` on this client's
/// connections (`CLIENT INFO` says `db=N` on each): a node that cannot would
/// put some of the locks in another database than the rest.
#[cfg(feature = "cluster")]
async fn check_cluster_database(
    conn: &mut redis::cluster_async::ClusterConnection,
    config: &Config,
) -> Result<()> {
    use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
    let reply = conn
        .route_command(
            redis::cmd("CLIENT").arg("INFO").clone(),
            RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
        )
        .await
        .map_err(Error::redis)?;
    let texts: Vec<String> = match reply {
        redis::Value::Map(nodes) => nodes
            .into_iter()
            .map(|(_, text)| redis::from_redis_value::<String>(text).unwrap_or_default())
            .collect(),
        one => vec![redis::from_redis_value::<String>(one).unwrap_or_default()],
    };
    let wanted = format!("db={}", config.database);
    if texts.is_empty()
        || texts
            .iter()
            .any(|text| !text.split(' ').any(|part| part == wanted))
    {
        return Err(Error::Config(format!(
            "database is {}, but not every primary of the cluster serves it on this \
             client's connections (CLIENT INFO said: {texts:?})",
            config.database
        )));
    }
    Ok(())
}

/// Why a cluster refused database `config.database`, naming the server and
/// its version: numbered databases in cluster mode need Valkey 9 or newer,
/// with `cluster-databases` above the number.
#[cfg(feature = "cluster")]
async fn cluster_database_refused(config: &Config, error: &redis::RedisError) -> Error {
    let server = async {
        let mut first = config.cluster_node_infos().ok()?.into_iter().next()?;
        let settings = first.redis_settings().clone().set_db(0);
        first = first.set_redis_settings(settings);
        let mut plain = redis::Client::open(first)
            .ok()?
            .get_multiplexed_async_connection()
            .await
            .ok()?;
        let info: redis::InfoDict = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut plain)
            .await
            .ok()?;
        // `server_name` is `valkey` on Valkey; Redis has none.
        let name = match info.get::<String>("server_name").as_deref() {
            Some("valkey") => "Valkey",
            _ => "Redis",
        };
        let version = info
            .get::<String>("valkey_version")
            .or_else(|| info.get::<String>("redis_version"))?;
        Some(format!("{name} {version}"))
    };
    let server = tokio::time::timeout(config.connect_timeout, server)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "the cluster's server (its version could not be read)".to_owned());
    Error::Config(format!(
        "database is {}, but {server} refuses it in cluster mode ({error}): numbered \
         databases in a cluster need Valkey 9 or newer with cluster-databases above {}; \
         elsewhere a cluster has only database 0",
        config.database, config.database
    ))
}

/// The major version of a server the connection reaches (INFO server).
#[cfg(feature = "cluster")]
async fn server_major_version(conn: &mut impl redis::aio::ConnectionLike) -> Option<u32> {
    let reply: redis::Value = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .ok()?;
    // A cluster may answer per node (a map of node to text); any node will do.
    let one_node = match reply {
        redis::Value::Map(nodes) => nodes.into_iter().next()?.1,
        single => single,
    };
    let info: redis::InfoDict = redis::from_redis_value(one_node).ok()?;
    let version: String = info.get("redis_version")?;
    crate::numeral::decimal(version.split('.').next()?)
}

/// Reads the server settings locks depend on; see
/// [`Client::warnings`](crate::Client::warnings).
pub(crate) async fn check_server(conn: &mut Conn) -> Vec<String> {
    let reply: redis::RedisResult<std::collections::HashMap<String, String>> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await;
    let policy = reply
        .ok()
        .and_then(|mut pairs| pairs.remove("maxmemory-policy"));
    match policy {
        Some(policy) if policy != "noeviction" => vec![format!(
            "the server's maxmemory-policy is '{policy}': under memory pressure Redis may \
             evict lock keys, which releases locks silently; locks need 'noeviction'"
        )],
        _ => Vec::new(),
    }
}

/// TLS (feature `tls`): the certificates of [`Config::tls`](crate::Config::tls),
/// read when connecting.
#[cfg(feature = "tls")]
mod tls {
    use redis::{ClientTlsConfig, TlsCertificates};

    use crate::config::Config;
    use crate::error::{Error, Result};

    /// The certificates to use instead of the defaults, when any are configured.
    pub(super) fn certificates(config: &Config) -> Result<Option<TlsCertificates>> {
        install_crypto();
        let tls = &config.tls;
        let read = |what: &str, path: &std::path::Path| {
            std::fs::read(path).map_err(|e| {
                Error::Config(format!("tls.{what}: cannot read {}: {e}", path.display()))
            })
        };
        let root_cert = tls
            .ca_certificate
            .as_deref()
            .map(|path| read("ca_certificate", path))
            .transpose()?;
        let client_tls = match (&tls.client_certificate, &tls.client_key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read("client_certificate", cert)?,
                client_key: read("client_key", key)?,
            }),
            (None, None) => None,
            _ => {
                return Err(Error::Config(
                    "tls.client_certificate and tls.client_key go together".into(),
                ))
            }
        };
        if root_cert.is_none() && client_tls.is_none() {
            return Ok(None);
        }
        Ok(Some(TlsCertificates {
            client_tls,
            root_cert,
        }))
    }

    /// A client of a single server with custom certificates.
    pub(super) fn client_with(
        info: redis::ConnectionInfo,
        certificates: TlsCertificates,
    ) -> Result<redis::Client> {
        redis::Client::build_with_tls(info, certificates)
            .map_err(|e| Error::Config(format!("TLS certificates: {e}")))
    }

    #[cfg(feature = "cluster")]
    pub(super) fn cluster(
        builder: redis::cluster::ClusterClientBuilder,
        config: &Config,
    ) -> Result<redis::cluster::ClusterClientBuilder> {
        Ok(match certificates(config)? {
            Some(certificates) => builder.certs(certificates),
            None => builder,
        })
    }

    #[cfg(feature = "sentinel")]
    pub(super) fn sentinel(
        mut builder: redis::sentinel::SentinelClientBuilder,
        config: &Config,
    ) -> Result<redis::sentinel::SentinelClientBuilder> {
        // The servers are TLS when the sentinels are: one `rediss://` scheme for
        // the whole deployment, as Redisson's one `sslEnabled`-by-scheme.
        if config
            .sentinel_addresses
            .iter()
            .any(|a| a.starts_with("rediss://"))
        {
            builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
            if let Some(certificates) = certificates(config)? {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates);
            }
        }
        Ok(builder)
    }

    /// rustls needs one process-wide crypto provider; this crate brings `ring`'s
    /// and installs it unless the application installed one already.
    fn install_crypto() {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Losing a race to another installer is fine: one is installed.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    }
}

/// Without the `tls` feature: `rediss://` is refused when the config is
/// validated, so there is never anything to do here.
#[cfg(not(feature = "tls"))]
mod tls {
    use crate::config::Config;
    use crate::error::Result;

    pub(super) fn certificates(_config: &Config) -> Result<Option<std::convert::Infallible>> {
        Ok(None)
    }

    pub(super) fn client_with(
        _info: redis::ConnectionInfo,
        certificates: std::convert::Infallible,
    ) -> Result<redis::Client> {
        match certificates {}
    }

    #[cfg(feature = "cluster")]
    pub(super) fn cluster(
        builder: redis::cluster::ClusterClientBuilder,
        _config: &Config,
    ) -> Result<redis::cluster::ClusterClientBuilder> {
        Ok(builder)
    }

    #[cfg(feature = "sentinel")]
    pub(super) fn sentinel(
        builder: redis::sentinel::SentinelClientBuilder,
        _config: &Config,
    ) -> Result<redis::sentinel::SentinelClientBuilder> {
        Ok(builder)
    }
}
