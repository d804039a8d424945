//! Test cfgs: which database tests can run (see `tests/build/db_cfg.rs` in the workspace), and
//! whether the dashboard's browser tests can (`tests/build/browser_cfg.rs`). Not shipped by
//! `cargo package` (the tests are not either).

#[path = "build/browser_cfg.rs"]
mod browser_cfg;
#[path = "build/db_cfg.rs"]
mod db_cfg;

fn main() {
    use db_cfg::Store;
    db_cfg::emit(&[Store::Postgres, Store::MySql, Store::Redis, Store::Etcd]);
    browser_cfg::emit();
}
