//! What the client measures (feature `metrics`), through the `metrics` facade.
