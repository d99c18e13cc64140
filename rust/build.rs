//! Builds libtally from its C sources with the `cc` crate and links it
//! statically: no system install and no cmake are needed.  The sources,
//! flags and definitions are those of src/build.txt, the list CMake reads
//! too, so that the two builds cannot drift apart.  In the tree the C
//! code is ../src and ../include; in the packaged crate, src and include
//! under libtally/ of the crate, which tools/package-crate.sh copies
//! in before `cargo package`.  Warnings are on, as in the CMake build,
//! and TALLY_WERROR=1 makes them errors (make test sets it).  Two small C
//! files of the crate go in a second archive built as an application's
//! code would be: the ABI table that the tests compare with src/sys.rs,
//! and the C inline add loop the benchmark measures.

use std::path::{Path, PathBuf};

/// The C tree: libtally/ of the packaged crate, else the repository
/// around the crate.
fn c_tree(manifest: &Path) -> PathBuf {
    let packed = manifest.join("libtally");
    if packed.join("src/build.txt").is_file() {
        return packed;
    }
    let tree = manifest.parent().expect("the crate lives in rust/ of the tree");
    if !tree.join("src/build.txt").is_file() {
        panic!(
            "no C sources: neither {} nor {} holds src/build.txt",
            packed.display(),
            tree.display()
        );
    }
    tree.to_path_buf()
}

/// src/build.txt: (sources, flags, definitions).
fn read_list(src: &Path) -> (Vec<PathBuf>, Vec<String>, Vec<String>) {
    let list = src.join("build.txt");
    let text = std::fs::read_to_string(&list)
        .unwrap_or_else(|e| panic!("{}: {e}", list.display()));
    let (mut files, mut flags, mut defines) = (Vec::new(), Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(f) = line.strip_prefix("cflag ") {
            flags.push(f.trim().to_string());
        } else if let Some(d) = line.strip_prefix("define ") {
            defines.push(d.trim().to_string());
        } else if line.ends_with(".c") && !line.contains(' ') {
            files.push(src.join(line));
        } else {
            panic!("{}:{}: cannot read '{line}'", list.display(), n + 1);
        }
    }
    (files, flags, defines)
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let tree = c_tree(&manifest);
    let include = tree.join("include");
    let src = tree.join("src");
    let (sources, flags, defines) = read_list(&src);

    println!("cargo:rerun-if-env-changed=TALLY_WERROR");
    let werror = std::env::var("TALLY_WERROR").is_ok_and(|v| !v.is_empty() && v != "0");

    // TALLY_RS_SANITIZE=address builds the C code with ASan and UBSan, so
    // that the library is checked under the crate's calls (Rust's own
    // sanitizers need a nightly compiler).  Link the test binaries with
    // RUSTFLAGS="-C link-arg=-lasan -C link-arg=-lubsan" and run them with
    // the runtime preloaded (a cargo runner "env LD_PRELOAD=libasan.so"),
    // as tools/run-tests.sh does.
    println!("cargo:rerun-if-env-changed=TALLY_RS_SANITIZE");
    let sanitize = std::env::var("TALLY_RS_SANITIZE")
        .ok()
        .filter(|s| !s.is_empty());
    let mut lib = cc::Build::new();
    lib.files(&sources)
        .include(&include)
        .include(&src)
        .pic(true)
        .opt_level(2)
        .debug(true)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(werror);
    for f in &flags {
        lib.flag(f);
    }
    for d in &defines {
        match d.split_once('=') {
            Some((k, v)) => lib.define(k, v),
            None => lib.define(d, None),
        };
    }
    if let Some(s) = &sanitize {
        lib.flag(format!("-fsanitize={s},undefined"))
            .flag("-fno-sanitize-recover=all")
            .flag("-fno-omit-frame-pointer");
    }
    lib.compile("tally");

    let mut app = cc::Build::new();
    app.file(manifest.join("csrc/abi.c"))
        .file(manifest.join("csrc/bench.c"))
        .file(manifest.join("csrc/bench-more.c"))
        .include(&include)
        .flag("-std=c11")
        .pic(true)
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(werror);
    app.compile("tally_rs_c");

    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:include={}", include.display());
    println!("cargo:rerun-if-changed={}", src.join("build.txt").display());
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed={}", manifest.join("csrc").display());
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
}
