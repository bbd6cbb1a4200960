//! Build script: records the commit the binary is built from, for `jira-hub --version`. A build
//! outside a git checkout (a source tarball) says `unknown`. It also sets `has_chromium` where
//! Debian's Chromium and its WebDriver are installed: the console's browser test needs them and
//! is ignored without them (so `cargo test` counts it as ignored, not as passed).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=JIRA_HUB_COMMIT={commit}");
    // A new commit or checkout changes HEAD (or the branch it points to).
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    println!("cargo::rustc-check-cfg=cfg(has_chromium)");
    let installed = ["/usr/bin/chromium", "/usr/bin/chromedriver"]
        .iter()
        .all(|path| std::path::Path::new(path).exists());
    if installed {
        println!("cargo::rustc-cfg=has_chromium");
    }
    // Installing or removing them changes the folder.
    println!("cargo:rerun-if-changed=/usr/bin");
}
