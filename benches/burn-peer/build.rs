//! Records the resolved `burn` version (read from this crate's Cargo.lock)
//! as the `BURN_VERSION` compile-time variable, so the JSON names the exact
//! release that was measured rather than a hand-maintained string.

use std::{env, fs, path::Path};

fn main() {
    let lock = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).unwrap_or_default();
    // Lock entries look like:
    //   [[package]]
    //   name = "burn"
    //   version = "0.22.1"
    let mut lines = text.lines();
    let mut version = String::from("unknown");
    while let Some(line) = lines.next() {
        if line.trim() == "name = \"burn\"" {
            if let Some(v) = lines
                .next()
                .and_then(|l| l.trim().strip_prefix("version = "))
            {
                version = v.trim_matches('"').to_string();
            }
            break;
        }
    }
    println!("cargo:rustc-env=BURN_VERSION={version}");
}
