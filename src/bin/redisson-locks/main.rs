//! The `redisson-locks` command-line tool (being written).
fn main() {}
