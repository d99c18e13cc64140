//! Builds libtally from this repository's C sources (../src/*/) with the
//! `cc` crate and links it statically: no system install and no cmake
//! are needed.  The flags are those of the CMake build (C11, hidden
//! visibility, the library's own slow-path call); two small C files of
//! the crate go in a second archive built as an application's code
//! would be: the ABI table that the tests compare with src/sys.rs, and
//! the C inline add loop the benchmark measures.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest
        .parent()
        .expect("the crate lives in rust/ of the tree");
    let include = root.join("include");
    let src = root.join("src");

    // src/ holds one folder per layer (src/process, src/core ...): every
    // .c file under it, and every folder, so that a file added to a
    // layer also triggers a rebuild.
    let mut sources: Vec<PathBuf> = Vec::new();
    let mut dirs: Vec<PathBuf> = vec![src.clone()];
    let mut i = 0;
    while i < dirs.len() {
        let entries = std::fs::read_dir(&dirs[i])
            .expect("../src: the crate is built from the tally tree");
        for p in entries.filter_map(|e| e.ok().map(|e| e.path())) {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "c") {
                sources.push(p);
            }
        }
        i += 1;
    }
    sources.sort();
    dirs.sort();

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
        .define("TALLY__IN_LIBRARY", None)
        .flag("-std=c11")
        .flag("-fvisibility=hidden")
        .pic(true)
        .opt_level(2)
        .debug(true)
        .warnings(false);
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
        .warnings(false);
    app.compile("tally_rs_c");

    println!("cargo:rustc-link-lib=pthread");
    println!("cargo:include={}", include.display());
    for d in &dirs {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed={}", manifest.join("csrc").display());
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
}
