//! The inspector's one script: everything under a lock-family name.

use super::*;

// The inspector reads a read-write lock's hold keys as its scripts build them.
lua_script!(
    INSPECT,
    "rw_common.lua" + "inspect_common.lua" + "inspect.lua"
);

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

// A fair semaphore's parts, read by a script of its own (see the script).
lua_script!(INSPECT_FAIR, "inspect_common.lua" + "inspect_fair.lua");

/// Everything of the fair semaphore `name`, read in one script (see
/// `lua/inspect_fair.lua`).
pub(crate) async fn inspect_fair(conn: &mut Conn, name: &str, bound: usize) -> Result<Value> {
    use crate::transport::keys;
    let mut invocation = INSPECT_FAIR.key(name);
    invocation
        .key(keys::fair_semaphore_queue(name))
        .key(keys::fair_semaphore_timeouts(name))
        .key(keys::fair_semaphore_leases(name))
        .arg(bound);
    call(conn, name, &invocation).await
}
