//! Links `aep-cline` as a position-dependent executable (`-no-pie`). Cline runs the shim twice
//! per tool call; a PIE binary of this size makes the loader apply ~20,000 relocations at every
//! start, touching about 1 MiB of pages. Without PIE the linker resolves them once, at build
//! time, and the shim starts faster and smaller. (ASLR of the executable image is lost; shared
//! libraries, heap and stack stay randomized.)

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
