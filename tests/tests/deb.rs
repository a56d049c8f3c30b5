//! The Debian package, installed into this machine for real: `scripts/package-deb` builds it
//! (cargo-deb), `dpkg -i` installs it, the README's tour (`scripts/demo`) runs with the
//! installed evctl, which starts the installed evd itself; `man evctl` and bash completion work
//! from where Debian's tools look; the systemd user units are there, not enabled. `dpkg -r`
//! then removes it, and nothing of it is left but the user's stores. It needs root (CI runs as
//! root); elsewhere, or without dpkg or cargo-deb, it says why and stops there.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use evd_e2e::workspace_root;

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `dpkg ARGS`, waiting (up to a minute) while another package manager holds dpkg's lock, as
/// an unattended upgrade may.
fn dpkg(args: &[&str]) -> Output {
    for _ in 0..60 {
        let out = Command::new("dpkg").args(args).output().expect("dpkg");
        let locked = !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("lock");
        if !locked {
            assert!(
                out.status.success(),
                "dpkg {args:?} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            return out;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    panic!("dpkg {args:?}: dpkg's lock stayed held for a minute");
}

fn ok(cmd: &mut Command) -> bool {
    cmd.output().is_ok_and(|o| o.status.success())
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Removes the package however the test ends.
struct Installed;

impl Drop for Installed {
    fn drop(&mut self) {
        for _ in 0..60 {
            match Command::new("dpkg").args(["-r", "evd"]).output() {
                Ok(o)
                    if !o.status.success()
                        && String::from_utf8_lossy(&o.stderr).contains("lock") =>
                {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
                _ => return,
            }
        }
    }
}

#[test]
fn the_debian_package_installs_runs_the_tour_and_leaves_only_the_users_stores() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: installing a .deb needs root (CI runs as root)");
        return;
    }
    if !ok(Command::new("dpkg").arg("--version")) {
        eprintln!("skipped: this machine has no dpkg");
        return;
    }
    if !ok(Command::new("cargo").args(["deb", "--version"])) {
        eprintln!("skipped: cargo-deb is not installed (.ci/run installs it: cargo install --locked cargo-deb)");
        return;
    }
    let owned_elsewhere = Path::new("/usr/bin/evctl").exists()
        && !ok(Command::new("dpkg").args(["-S", "/usr/bin/evctl"]));
    if owned_elsewhere {
        eprintln!("skipped: /usr/bin/evctl exists and no package owns it; not overwriting it");
        return;
    }
    let root = workspace_root();
    // The debug binaries the suite already built, as they are: building evd and evctl alone
    // here would replace the ones the other tests run (a release build would take minutes).
    let built = run(Command::new("bash")
        .arg(root.join("scripts/package-deb"))
        .arg("--no-build")
        .env("EVD_DEB_PROFILE", "dev"));
    let deb = PathBuf::from(text(&built).lines().last().unwrap_or_default().trim());
    assert!(
        deb.extension().is_some_and(|e| e == "deb") && deb.is_file(),
        "{built:?}"
    );
    let contents = text(&run(Command::new("dpkg-deb").arg("--contents").arg(&deb)));
    for want in [
        "./usr/bin/evctl",
        "./usr/bin/evd",
        "./usr/share/man/man1/evctl.1.gz",
        "./usr/share/man/man1/evctl-decide.1.gz",
        "./usr/share/bash-completion/completions/evctl",
        "./usr/share/zsh/vendor-completions/_evctl",
        "./usr/share/fish/vendor_completions.d/evctl.fish",
        "./usr/lib/systemd/user/evd.service",
        "./usr/lib/systemd/user/evd.socket",
        "./usr/share/doc/evd/README.md",
    ] {
        assert!(
            contents.lines().any(|l| l.ends_with(want)),
            "{want} is not in the package:\n{contents}"
        );
    }

    let _installed = Installed;
    let deb_arg = deb.display().to_string();
    dpkg(&["-i", &deb_arg]);
    let files: Vec<String> = text(&dpkg(&["-L", "evd"]))
        .lines()
        .map(str::to_string)
        .collect();

    // The tour, with the installed programs: evctl finds and starts the evd beside it.
    let tour = run(Command::new("bash")
        .arg(root.join("scripts/demo"))
        .env("DEMO_BIN", "/usr/bin")
        .env_remove("EVD_BIN")
        .env_remove("EVD_RUNTIME_DIR"));
    let said = text(&tour);
    assert!(
        said.contains("recorded e2b337f53a1f (2 ground(s))") && said.contains("/usr/bin"),
        "{said}"
    );

    // The man page where man looks, and bash completion where bash-completion looks.
    if ok(Command::new("man").arg("--version")) {
        let page = text(&run(Command::new("man")
            .args(["-P", "cat", "evctl"])
            .env("MANWIDTH", "80")));
        assert!(page.contains("evctl"), "{page}");
        let decide = text(&run(Command::new("man").args(["-w", "evctl-decide"])));
        assert!(decide.trim().ends_with("evctl-decide.1.gz"), "{decide}");
    } else {
        assert!(Path::new("/usr/share/man/man1/evctl.1.gz").is_file());
    }
    let completion = text(&run(Command::new("bash").args([
        "-c",
        "source /usr/share/bash-completion/completions/evctl && complete -p evctl",
    ])));
    assert!(completion.trim().ends_with(" evctl"), "{completion}");

    // The user units are installed for `systemctl --user enable --now evd.socket`, not enabled.
    let service =
        std::fs::read_to_string("/usr/lib/systemd/user/evd.service").expect("evd.service");
    assert!(
        service.contains("ExecStart=/usr/bin/evd serve"),
        "{service}"
    );
    assert!(!Path::new("/etc/systemd/user/sockets.target.wants/evd.socket").exists());

    // A user's store, made with the installed evctl, outlives the package.
    let user = tempfile::tempdir().expect("tempdir");
    let rt = tempfile::tempdir().expect("tempdir");
    run(Command::new("git")
        .args(["init", "-q"])
        .current_dir(user.path()));
    run(Command::new("/usr/bin/evctl")
        .arg("init")
        .current_dir(user.path())
        .env("XDG_RUNTIME_DIR", rt.path())
        .env_remove("EVD_BIN"));
    let _ = Command::new("/usr/bin/evctl")
        .arg("shutdown")
        .env("XDG_RUNTIME_DIR", rt.path())
        .output();

    dpkg(&["-r", "evd"]);
    let left: Vec<&String> = files
        .iter()
        .filter(|f| Path::new(f.as_str()).is_file())
        .collect();
    assert!(left.is_empty(), "left behind after dpkg -r: {left:?}");
    assert!(!ok(Command::new("dpkg").args(["-s", "evd"])));
    assert!(
        user.path().join(".evolving/HEAD").is_file(),
        "the user's store stays"
    );
}
