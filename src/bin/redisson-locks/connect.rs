//! Reaching the server: a URL or a Redisson configuration file, read by the
//! library as any application's would be (TLS, credentials, cluster and
//! sentinel included), then a client that stays out of what it looks at.

use std::path::Path;

use redisson_locks::{redact_address, Client, Config};

use crate::args::Connection;
use crate::exit::{words, Code, Failure};
use crate::out::note;

/// Where the tool connects when told nothing.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The name the tool's client goes by.
const CLIENT_NAME: &str = "redisson-locks-cli";

/// A client connected as `connection` says; a failure names the server.
/// With it, the replica sync the configuration asked for (`replica_sync`).
///
/// A client that only looks (`holds` false) does not announce itself, so
/// that looking at a lock leaves no key behind (and needs no write access).
/// One that takes a lock for a command announces itself as any client of the
/// library does, so that `show` names the holder: this host, this pid.
/// `without_sync`: the client asks for no replica sync (the doctor checks
/// the one asked for instead of failing to connect without it); nor does a
/// client that only looks.
pub(crate) async fn connect(
    connection: &Connection,
    holds: bool,
    without_sync: bool,
) -> Result<(Client, Option<u32>), Failure> {
    let (mut config, target) = config_of(connection)?;
    let wanted_sync = config.replica_sync;
    // A client that only looks sends no acquire to confirm: it need not ask
    // the server what it supports (nor warn a read-only user that it may
    // not run WAIT).
    if without_sync || !holds {
        config.replica_sync = Some(0);
    }
    config.announce = holds;
    config.client_name = Some(CLIENT_NAME.to_owned());
    let client = Client::connect(config).await.map_err(|e| {
        Failure::new(
            Code::Failed,
            format!("cannot connect to {target}: {}", words(&e)),
        )
    })?;
    for warning in client.warnings() {
        note(&format!("redisson-locks: warning: {warning}"));
    }
    Ok((client, wanted_sync))
}

/// The configuration `connection` names, and the server as messages call it
/// (a URL with its credentials masked, or the file).
fn config_of(connection: &Connection) -> Result<(Config, String), Failure> {
    if let Some(path) = &connection.config {
        let config = from_file(path).map_err(|e| {
            Failure::new(
                Code::Failed,
                format!("cannot use --config {}: {}", path.display(), words(&e)),
            )
        })?;
        return Ok((config, format!("the server of {}", path.display())));
    }
    let url = match &connection.url {
        Some(url) => url.clone(),
        None => std::env::var("REDIS_URL")
            .ok()
            .filter(|url| !url.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_URL.to_owned()),
    };
    // The library's message quotes the URL already, with every credential
    // it can carry masked: quoting it here too would say it twice.
    let config = Config::from_url(&url)
        .map_err(|e| Failure::new(Code::Failed, format!("cannot use the URL: {}", words(&e))))?;
    Ok((config, redact_address(&url).into_owned()))
}

/// A Redisson file: JSON when its name ends in `.json`, YAML otherwise (the
/// format of Redisson 3 and 4).
fn from_file(path: &Path) -> redisson_locks::Result<Config> {
    let is_json = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    if is_json {
        let text = std::fs::read_to_string(path).map_err(|e| {
            redisson_locks::Error::Config(format!("cannot read {}: {e}", path.display()))
        })?;
        Config::from_json(&text)
    } else {
        Config::from_yaml_file(path)
    }
}
