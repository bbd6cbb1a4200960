//! Build script: records the commit the binary is built from, for `jira-hub --version`. A build
//! outside a git checkout (a source tarball) says `unknown`. It also sets `has_chromium` where
//! Debian's Chromium and its WebDriver are installed: the console's browser test needs them and
//! is ignored without them (so `cargo test` counts it as ignored, not as passed).

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=JIRA_HUB_COMMIT={commit}");
    // A new commit or checkout changes HEAD, or the branch it points to. Git says where they
    // are: in a worktree `.git` is a file, HEAD lives in the worktree's own git folder and the
    // branches in the common one (beside the other worktrees' branches, whose commits must not
    // make this one build again). Only paths that exist are named: cargo counts a missing one as
    // changed, and every build would compile the crate again.
    let head = git(&["rev-parse", "--git-dir"]).map(|dir| format!("{dir}/HEAD"));
    let branch = git(&["rev-parse", "--git-common-dir"]).and_then(|common| {
        let name = git(&["symbolic-ref", "-q", "HEAD"])?;
        let loose = format!("{common}/{name}");
        Some(if std::path::Path::new(&loose).exists() {
            loose
        } else {
            format!("{common}/packed-refs")
        })
    });
    for path in [head, branch].into_iter().flatten() {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
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

/// What `git ARGS` prints (trimmed), when git runs here and says something.
fn git(args: &[&str]) -> Option<String> {
    std::process::Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|text| text.trim().to_string())
        .filter(|text| !text.is_empty())
}
