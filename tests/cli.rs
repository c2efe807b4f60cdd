//! End-to-end tests of the `redisson-locks` command-line tool (being written).
