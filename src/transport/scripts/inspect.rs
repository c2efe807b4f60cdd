//! The inspector's one script: everything under a lock-family name.

use super::*;

// The inspector reads a read-write lock's hold keys as its scripts build them.
lua_script!(INSPECT, "rw_common.lua" + "inspect.lua");

/// Everything under lock-family name `name`, read in one script (see
/// `lua/inspect.lua` for the reply's shape; `inspect/read.rs` decodes it).
pub(crate) async fn inspect(conn: &mut Conn, name: &str, bound: usize) -> Result<Value> {
    let mut invocation = INSPECT.key(name);
    invocation
        .key(crate::transport::keys::fair_queue(name))
        .key(crate::transport::keys::fair_timeouts(name))
        .key(crate::transport::keys::fenced_token(name))
        .key(crate::transport::keys::permit_timeouts(name))
        .arg(bound);
    call(conn, name, &invocation).await
}
