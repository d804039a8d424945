//! Shared code of the end-to-end tests and the replica binary.
