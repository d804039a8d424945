//! Test cfgs: which database tests can run (see `tests/build/db_cfg.rs` in the workspace).
//! Not shipped by `cargo package` (the tests are not either).

#[path = "../tests/build/db_cfg.rs"]
mod db_cfg;

fn main() {
    use db_cfg::Store;
    db_cfg::emit(&[Store::Redis]);
}
