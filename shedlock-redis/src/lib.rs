#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod builder;
mod connection;
mod key;
mod provider;
mod script;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls-rustls")]
mod tls;

pub use builder::{DEFAULT_KEY_PREFIX, RedisLockProviderBuilder};
pub use provider::RedisLockProvider;
pub use redis;
