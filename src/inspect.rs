//! The inspector (being written).
