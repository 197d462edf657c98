//! Links libcronoq and prepares the layout check.
//!
//! Where the library comes from, first match wins:
//! 1. `CRONOQ_LIB_DIR`: a directory with `libcronoq.a` (linked statically)
//!    or `libcronoq.so`. The CMake build sets it for its test.
//! 2. `pkg-config --libs cronoq`: the installed library.
//! 3. The repository's `build/` directory (after `scripts/test.sh`).
//!
//! The fleet pool's library, `libcronoq_fleet.a`, is linked too where it
//! is found: in `CRONOQ_FLEET_LIB_DIR`, else beside the chosen
//! `libcronoq.a` (in a CMake build tree, its `src/fleet/`), else through
//! `pkg-config cronoq_fleet`. Then hiredis is linked with it and the cfg
//! `cronoq_fleet` is set, here and (as `DEP_CRONOQ_FLEET=1`) for the
//! `cronoq` crate. Without it `Pool::connect` reports that fleet pools are
//! not built in. `CRONOQ_NO_FLEET=1` leaves it out on purpose.
//!
//! The layout check: with the header at hand (`CRONOQ_INCLUDE_DIR`, the
//! repository's `include/`, or pkg-config's includedir), `layout.c` is
//! compiled with `$CC` (default `cc`) and run; its table of C sizes and
//! offsets becomes `$OUT_DIR/layout.rs` for `tests/layout.rs`.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CRONOQ_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CRONOQ_FLEET_LIB_DIR");
    println!("cargo:rerun-if-env-changed=CRONOQ_NO_FLEET");
    println!("cargo:rerun-if-env-changed=CRONOQ_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-changed=layout.c");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let repo = manifest.join("../../..");
    link(&repo);
    layout(&repo);
}

/// The fleet library, linked ahead of libcronoq (it calls into it) where
/// it is found; whether it was.
fn link_fleet(core_dir: Option<&Path>) -> bool {
    if env::var_os("CRONOQ_NO_FLEET").map_or(false, |v| v == "1") {
        return false;
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = env::var_os("CRONOQ_FLEET_LIB_DIR") {
        dirs.push(PathBuf::from(dir));
    } else if let Some(dir) = core_dir {
        dirs.push(dir.to_path_buf());
        dirs.push(dir.join("src/fleet"));
    }
    for dir in &dirs {
        let lib = dir.join("libcronoq_fleet.a");
        if lib.exists() {
            println!("cargo:rerun-if-changed={}", lib.display());
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=cronoq_fleet");
            let hiredis = pkg_config_of("hiredis", &["--libs"]);
            link_args(hiredis.as_deref().unwrap_or("-lhiredis"));
            return true;
        }
    }
    if env::var_os("CRONOQ_FLEET_LIB_DIR").is_some() || core_dir.is_some() {
        return false; // an explicit choice never falls through
    }
    match pkg_config_of("cronoq_fleet", &["--libs", "--static"]) {
        Some(libs) => {
            link_args(&libs);
            true
        }
        None => false,
    }
}

fn link_args(libs: &str) {
    for arg in libs.split_whitespace() {
        if let Some(dir) = arg.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        } else if let Some(lib) = arg.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", lib);
        }
    }
}

fn link_static(dir: &Path) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=static=cronoq");
    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:rerun-if-changed={}", dir.join("libcronoq.a").display());
}

fn link_shared(dir: &Path) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=cronoq");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:rerun-if-changed={}", dir.join("libcronoq.so").display());
}

fn pkg_config(args: &[&str]) -> Option<String> {
    pkg_config_of("cronoq", args)
}

fn pkg_config_of(package: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).arg(package).output().ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8(out.stdout).ok()
}

fn link(repo: &Path) {
    if let Some(dir) = env::var_os("CRONOQ_LIB_DIR") {
        let dir = PathBuf::from(dir);
        fleet_found(link_fleet(Some(&dir)));
        if dir.join("libcronoq.a").exists() {
            return link_static(&dir);
        }
        if dir.join("libcronoq.so").exists() {
            return link_shared(&dir);
        }
        panic!("CRONOQ_LIB_DIR={} holds neither libcronoq.a nor libcronoq.so", dir.display());
    }
    if let Some(libs) = pkg_config(&["--libs"]) {
        fleet_found(link_fleet(None));
        link_args(&libs);
        return;
    }
    let build = repo.join("build");
    if build.join("libcronoq.a").exists() {
        fleet_found(link_fleet(Some(&build)));
        return link_static(&build);
    }
    panic!(
        "libcronoq not found: set CRONOQ_LIB_DIR to the directory of libcronoq.a, \
         install the library (pkg-config cronoq), or build it in the repository's build/ \
         (scripts/test.sh)"
    );
}

fn fleet_found(linked: bool) {
    if linked {
        println!("cargo:rustc-cfg=cronoq_fleet");
        println!("cargo:fleet=1"); // DEP_CRONOQ_FLEET for the cronoq crate
    }
}

fn include_dir(repo: &Path) -> Option<PathBuf> {
    if let Some(dir) = env::var_os("CRONOQ_INCLUDE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let inc = repo.join("include");
    if inc.join("cronoq/cronoq.h").exists() {
        return Some(inc);
    }
    pkg_config(&["--variable=includedir"]).map(|s| PathBuf::from(s.trim()))
}

fn layout(repo: &Path) {
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let table = out.join("layout.rs");
    let inc = match include_dir(repo) {
        Some(inc) if inc.join("cronoq/cronoq.h").exists() => inc,
        _ => {
            println!("cargo:warning=cronoq.h not found: the struct layout check is skipped");
            fs::write(&table, "pub const C_LAYOUT: &[(&str, usize)] = &[];\n")
                .expect("write layout.rs");
            return;
        }
    };
    println!("cargo:rerun-if-changed={}", inc.join("cronoq/cronoq.h").display());
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let exe = out.join("cronoq-layout");
    let status = Command::new(&cc)
        .args(["-std=c11", "-I"])
        .arg(&inc)
        .arg("layout.c")
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {} for the layout check: {}", cc, e));
    assert!(status.success(), "{} could not compile layout.c", cc);
    let run = Command::new(&exe).output().expect("run the layout program");
    assert!(run.status.success(), "the layout program failed");
    fs::write(&table, run.stdout).expect("write layout.rs");
}
