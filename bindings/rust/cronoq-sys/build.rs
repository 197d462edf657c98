//! Links libcronoq and prepares the layout check.
//!
//! Where the library comes from, first match wins:
//! 1. `CRONOQ_LIB_DIR`: a directory with `libcronoq.a` or `libcronoq.so`.
//!    The CMake build sets it for its test.
//! 2. `pkg-config cronoq`: the installed library, in its `libdir`.
//! 3. The repository's `build/` directory (after `scripts/test.sh`).
//!
//! In that directory `libcronoq.a` is linked statically where it is there,
//! so that a program built with the crate runs wherever it is copied.
//! The shared `libcronoq.so` is linked where no `libcronoq.a` is, or where
//! `CRONOQ_LINK=shared` asks for it. A shared library must then be found
//! by the dynamic loader when the program starts, and a build script
//! cannot give the program a run path (its `cargo:rustc-link-arg` reaches
//! only this crate's own targets, never the binary of a crate that
//! depends on it): where the directory is not one the loader searches,
//! the build says so in a warning, with what to set.
//!
//! The fleet pool's library is linked the same way (`libcronoq_fleet.a`,
//! or `libcronoq_fleet.so` with a shared core) where it is found: in
//! `CRONOQ_FLEET_LIB_DIR`, else beside the chosen core library (in a CMake
//! build tree, its `src/fleet/`; for an installed one, also in `pkg-config
//! cronoq_fleet`'s `libdir`). Then hiredis is linked with it and the
//! cfg `cronoq_fleet` is set, here and (as `DEP_CRONOQ_FLEET=1`) for the
//! `cronoq` crate. Without it `Pool::connect` reports that fleet pools are
//! not built in. `CRONOQ_NO_FLEET=1` leaves it out on purpose.
//!
//! What was linked, and from where, is in `cronoq_sys::LINKED` (and in
//! the build script's output, `cargo build -vv`).
//!
//! The cfg is declared (`rustc-check-cfg`: cargo 1.80 and later have rustc
//! check cfg names) only where cargo knows that instruction: older cargo
//! warns about it. `DEP_CRONOQ_CHECK_CFG=1` tells the `cronoq` crate.
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
    for var in [
        "CRONOQ_LIB_DIR",
        "CRONOQ_FLEET_LIB_DIR",
        "CRONOQ_NO_FLEET",
        "CRONOQ_LINK",
        "CRONOQ_INCLUDE_DIR",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "LD_LIBRARY_PATH",
        "CC",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=layout.c");
    if cargo_minor() >= 80 {
        println!("cargo:rustc-check-cfg=cfg(cronoq_fleet)");
        println!("cargo:check_cfg=1"); // DEP_CRONOQ_CHECK_CFG for the cronoq crate
    }
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let repo = manifest.join("../../..");
    link(&repo);
    layout(&repo);
}

/// The minor version of the cargo that runs this script (0 when unknown).
/// Cargo, not rustc, reads the script's instructions, and only cargo 1.80
/// and later make rustc check cfg names (a mixed toolchain, such as
/// Debian's cargo with a current rustc on the PATH, checks none).
fn cargo_minor() -> u32 {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = match Command::new(cargo).arg("--version").output() {
        Ok(out) if out.status.success() => out.stdout,
        _ => return 0,
    };
    // "cargo 1.65.0", "cargo 1.95.0 (f2d3ce0bd 2026-03-21)"
    let text = String::from_utf8_lossy(&out);
    let version = text.split_whitespace().nth(1).unwrap_or("");
    version.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0)
}

/// How the core library was found, for messages.
struct Found {
    dir: PathBuf,
    how: &'static str,
}

fn link(repo: &Path) {
    let found = if let Some(dir) = env::var_os("CRONOQ_LIB_DIR") {
        Found { dir: PathBuf::from(dir), how: "CRONOQ_LIB_DIR" }
    } else if let Some(dir) = pkg_config(&["--variable=libdir"]) {
        Found { dir: PathBuf::from(dir.trim()), how: "pkg-config cronoq" }
    } else if repo.join("build/libcronoq.a").exists() {
        Found { dir: repo.join("build"), how: "the repository's build/" }
    } else {
        panic!(
            "libcronoq not found: set CRONOQ_LIB_DIR to the directory of libcronoq.a, \
             install the library (pkg-config cronoq), or build it in the repository's build/ \
             (scripts/test.sh)"
        );
    };
    // pkg-config's libdir may read ".../lib/pkgconfig/../../lib".
    let dir = &fs::canonicalize(&found.dir).unwrap_or_else(|_| found.dir.clone());
    let want_shared = match env::var("CRONOQ_LINK").as_deref() {
        Ok("shared") => true,
        Ok("static") | Ok("") | Err(_) => false,
        Ok(other) => panic!("CRONOQ_LINK={}: give static (the default) or shared", other),
    };
    let shared = if want_shared {
        dir.join("libcronoq.so").exists()
    } else {
        !dir.join("libcronoq.a").exists() && dir.join("libcronoq.so").exists()
    };
    let (core, kind) = if shared { ("libcronoq.so", "dylib") } else { ("libcronoq.a", "static") };
    if !dir.join(core).exists() {
        let missing = if want_shared {
            "libcronoq.so (CRONOQ_LINK=shared)"
        } else {
            "libcronoq.a nor libcronoq.so"
        };
        panic!("{} (from {}) holds no {}", dir.display(), found.how, missing);
    }
    // The fleet library first: it calls into libcronoq.
    let fleet = link_fleet(dir, found.how, shared);
    println!("cargo:rerun-if-changed={}", dir.join(core).display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib={}=cronoq", kind);
    if !shared {
        println!("cargo:rustc-link-lib=pthread");
    }
    let mut linked = format!("{} {} from {} ({})", kind, core, dir.display(), found.how);
    match &fleet {
        Some(fleet_dir) => {
            let lib = if shared { "libcronoq_fleet.so" } else { "libcronoq_fleet.a" };
            linked += &format!("; {} from {}", lib, fleet_dir.display());
            println!("cargo:rustc-cfg=cronoq_fleet");
            println!("cargo:fleet=1"); // DEP_CRONOQ_FLEET for the cronoq crate
        }
        None => linked += "; no fleet library",
    }
    // For humans (`cargo build -vv`) and for programs (`cronoq_sys::LINKED`).
    println!("cronoq-sys: linked {}", linked);
    println!("cargo:rustc-env=CRONOQ_SYS_LINKED={}", linked);
    if shared {
        // This crate's own tests and examples find it; nothing else does.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        if !loader_searches(dir) {
            let d = dir.display();
            let why = if want_shared {
                "CRONOQ_LINK=shared".to_string()
            } else {
                format!("{} holds no libcronoq.a, which would be linked statically", d)
            };
            println!(
                "cargo:warning=cronoq-sys linked the shared libcronoq.so from {} ({}; {}), \
                 a directory the dynamic loader does not search: programs built with it start \
                 only with LD_LIBRARY_PATH={} (or built with \
                 RUSTFLAGS=\"-C link-arg=-Wl,-rpath,{}\")",
                d, found.how, why, d, d
            );
        }
    }
}

/// Links the fleet library where it is found; the directory it came from.
fn link_fleet(core_dir: &Path, how: &str, shared: bool) -> Option<PathBuf> {
    if env::var_os("CRONOQ_NO_FLEET").map_or(false, |v| v == "1") {
        return None;
    }
    let mut dirs = match env::var_os("CRONOQ_FLEET_LIB_DIR") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![core_dir.to_path_buf(), core_dir.join("src/fleet")],
    };
    // An installed core may have its fleet library installed elsewhere; a
    // core from a build tree takes only that tree's.
    if how == "pkg-config cronoq" && env::var_os("CRONOQ_FLEET_LIB_DIR").is_none() {
        if let Some(dir) = pkg_config_of("cronoq_fleet", &["--variable=libdir"]) {
            dirs.push(PathBuf::from(dir.trim()));
        }
    }
    let (file, kind) =
        if shared { ("libcronoq_fleet.so", "dylib") } else { ("libcronoq_fleet.a", "static") };
    let dir = dirs.into_iter().find(|d| d.join(file).exists())?;
    let dir = fs::canonicalize(&dir).unwrap_or(dir);
    println!("cargo:rerun-if-changed={}", dir.join(file).display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib={}=cronoq_fleet", kind);
    let hiredis = pkg_config_of("hiredis", &["--libs"]);
    for arg in hiredis.as_deref().unwrap_or("-lhiredis").split_whitespace() {
        if let Some(dir) = arg.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(lib) = arg.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", lib);
        }
    }
    Some(dir)
}

/// Whether the dynamic loader finds libraries in `dir` without help: the
/// system's directories (those of `ldconfig`'s cache) and
/// `LD_LIBRARY_PATH`.
fn loader_searches(dir: &Path) -> bool {
    let mut dirs: Vec<String> = env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect();
    let cache = ["/sbin/ldconfig", "ldconfig"]
        .iter()
        .find_map(|l| Command::new(l).arg("-p").output().ok())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6"
    for lib in cache.lines().filter_map(|l| l.split(" => ").nth(1)) {
        if let Some(parent) = Path::new(lib.trim()).parent().and_then(Path::to_str) {
            if !dirs.iter().any(|d| d == parent) {
                dirs.push(parent.to_string());
            }
        }
    }
    dirs.iter().any(|d| fs::canonicalize(d).map_or(false, |d| d == dir))
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
