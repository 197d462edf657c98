//! Passes on what cronoq-sys found: with `DEP_CRONOQ_FLEET=1` (cronoq-sys
//! linked libcronoq_fleet) the cfg `cronoq_fleet` turns `Pool::connect`
//! and `Grant::fencing_token` on. With `DEP_CRONOQ_CHECK_CFG=1` (a
//! cargo that has rustc check cfg names, 1.80 and later) the cfg is
//! declared to it; older cargo would warn about the declaration.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_CRONOQ_FLEET");
    println!("cargo:rerun-if-env-changed=DEP_CRONOQ_CHECK_CFG");
    if std::env::var_os("DEP_CRONOQ_CHECK_CFG").map_or(false, |v| v == "1") {
        println!("cargo:rustc-check-cfg=cfg(cronoq_fleet)");
    }
    if std::env::var_os("DEP_CRONOQ_FLEET").map_or(false, |v| v == "1") {
        println!("cargo:rustc-cfg=cronoq_fleet");
    }
}
