//! Who a client is, said on the server (being written).
