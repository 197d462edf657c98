//! Passes on what cronoq-sys found: with `DEP_CRONOQ_FLEET=1` (cronoq-sys
//! linked libcronoq_fleet) the cfg `cronoq_fleet` turns `Pool::connect`
//! and `Grant::fencing_token` on.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_CRONOQ_FLEET");
    if std::env::var_os("DEP_CRONOQ_FLEET").map_or(false, |v| v == "1") {
        println!("cargo:rustc-cfg=cronoq_fleet");
    }
}
