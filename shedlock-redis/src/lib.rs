// A build without `testing` documents the link to it as a link to docs.rs.
#![cfg_attr(
    not(feature = "testing"),
    doc = "[`testing::redis_url`]: https://docs.rs/shedlock-redis/latest/shedlock_redis/testing/fn.redis_url.html"
)]
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admin;
mod builder;
mod connection;
mod key;
mod provider;
mod script;
#[cfg(feature = "testing")]
pub mod testing;
#[cfg(feature = "tls-rustls")]
mod tls;
mod trigger;

pub use builder::{DEFAULT_KEY_PREFIX, RedisLockProviderBuilder};
pub use provider::RedisLockProvider;
pub use redis;
