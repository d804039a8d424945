#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod layer;
mod schedule;

pub use layer::{CronFireLayer, CronFireService, TickRun};
pub use schedule::{FireSchedule, TickError};

#[cfg(test)]
mod tests;
