//! Support code shared by the examples.
