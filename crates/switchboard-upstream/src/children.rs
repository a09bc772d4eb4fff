//! What a stdio server's process gets of the host: a small, fixed environment, and no way into
//! Switchboard's own files.
//!
//! A stdio server is a program of somebody else's (an `npx` package, a `uvx` tool) that runs as
//! the daemon's user. Two things of Switchboard's must never reach it, whatever its command:
//!
//! - **The daemon's environment.** It holds the vault key, operator API keys, OAuth client
//!   secrets, database URLs with passwords. A child gets only [`INHERITED`] (the variables a
//!   program needs to run at all), the variables the operator passes through by name
//!   ([`ChildPolicy::pass_env`]), and what its own definition sets.
//! - **The data directory** (the vault key, the database with every sealed token), and any other
//!   path the daemon names ([`ChildSandbox::hiding`]). On Linux the child is confined with
//!   Landlock before it runs its program: it may read, write and run everything else as before,
//!   but nothing under a hidden path, and it may not create entries directly in the directories
//!   that lead to one (a rule can only grant what existed when the child started). Landlock also
//!   keeps it from signalling the daemon; a child of a daemon run as root loses `CAP_SYS_PTRACE`,
//!   so that, with the daemon not dumpable (the binary sees to it), it cannot read the daemon's
//!   memory or environment through `/proc`.
//!
//! Landlock is an allow-list: there is no rule that denies one directory. So the ruleset grants
//! everything beneath each entry of `/` except the one that leads to a hidden path, then the same
//! one level down that path, and so on; the directories on the way get only `ReadDir`. Symbolic
//! links are not followed (their targets are judged where they are).
//!
//! The `landlock` crate (by Landlock's maintainers) makes the rulesets; the walk is ours.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope,
};

/// The daemon's variables every child inherits: what programs need to find their tools, their
/// home and their language, and nothing that could hold a secret.
pub(crate) const INHERITED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
    "TERM",
];

/// How stdio children are started.
#[derive(Debug, Clone, Default)]
pub struct ChildPolicy {
    /// Further variables of the daemon's environment passed to every child, by name (the
    /// operator's `--child-env`: a proxy, a CA bundle).
    pub pass_env: Vec<String>,
    /// What children may not reach.
    pub sandbox: ChildSandbox,
    /// Stop a child (SIGTERM to its process group) as soon as its session is closed, rather
    /// than giving it rmcp's 3 s to exit once its stdin closes: for one-shot commands, whose
    /// user waits for the process to end.
    pub stop_at_once: bool,
}

impl ChildPolicy {
    /// The environment a child starts with, before its definition's own values: [`INHERITED`]
    /// and [`Self::pass_env`], as far as the daemon has them.
    pub fn inherited_environment(&self) -> Vec<(String, std::ffi::OsString)> {
        INHERITED
            .iter()
            .copied()
            .chain(self.pass_env.iter().map(String::as_str))
            .filter_map(|name| std::env::var_os(name).map(|value| (name.to_owned(), value)))
            .collect()
    }
}

/// Whether children must be confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SandboxMode {
    /// Confine them where the kernel can (Landlock, Linux 5.13 and later); elsewhere start them
    /// unconfined (the daemon warns once at start).
    #[default]
    WhereSupported,
    /// Refuse to start a child the kernel cannot confine.
    Required,
    /// Never confine them (the operator's choice).
    Off,
}

impl std::str::FromStr for SandboxMode {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "on" | "where-supported" => Ok(Self::WhereSupported),
            "required" => Ok(Self::Required),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "'{other}' is not a sandbox mode (on, required or off)"
            )),
        }
    }
}

/// The paths children may not reach.
#[derive(Debug, Clone, Default)]
pub struct ChildSandbox {
    hidden: Vec<PathBuf>,
    mode: SandboxMode,
}

/// Why a child could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel has no Landlock, and confinement is required.
    #[error(
        "this kernel cannot confine stdio servers (Landlock needs Linux 5.13 or later with 'landlock' among its LSMs): {0}"
    )]
    Unsupported(String),
    /// The ruleset could not be made.
    #[error("cannot prepare the sandbox for a stdio server: {0}")]
    Ruleset(String),
}

/// The capability to trace any process (linux/capability.h; the libc crate does not name it).
const CAP_SYS_PTRACE: libc::c_ulong = 19;

/// The newest Landlock ABI whose rights children are confined with where the kernel has it.
const NEWEST: ABI = ABI::V6;

impl ChildSandbox {
    /// Children may not reach `paths` (made absolute and resolved; one that does not exist is
    /// left out), confined as `mode` says.
    pub fn hiding(paths: impl IntoIterator<Item = PathBuf>, mode: SandboxMode) -> Self {
        let hidden = paths
            .into_iter()
            .filter_map(|path| std::fs::canonicalize(&path).ok())
            .collect();
        Self { hidden, mode }
    }

    /// The mode.
    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    /// The paths hidden from children.
    pub fn hidden(&self) -> &[PathBuf] {
        &self.hidden
    }

    /// Why children run unconfined here, if they do although paths are to be hidden: said once
    /// at start, so an operator knows.
    pub fn unconfined_reason(&self) -> Option<String> {
        if self.hidden.is_empty() || self.mode == SandboxMode::Off {
            return None;
        }
        self.ruleset().err().map(|error| error.to_string())
    }

    /// The ruleset confining one child, `None` when there is nothing to confine (nothing hidden,
    /// confinement off, or unsupported where it is not required).
    pub(crate) fn prepare(&self) -> Result<Option<RulesetCreated>, SandboxError> {
        if self.hidden.is_empty() || self.mode == SandboxMode::Off {
            return Ok(None);
        }
        match self.ruleset() {
            Ok(ruleset) => Ok(Some(ruleset)),
            Err(SandboxError::Unsupported(_)) if self.mode == SandboxMode::WhereSupported => {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// Confines `command`'s process with [`Self::prepare`]'s ruleset just before it runs its
    /// program. Returns whether it will be confined.
    pub fn confine(&self, command: &mut tokio::process::Command) -> Result<bool, SandboxError> {
        let Some(ruleset) = self.prepare()? else {
            return Ok(false);
        };
        let mut ruleset = Some(ruleset);
        // SAFETY: the closure runs in the forked child before exec. It only makes system calls
        // (prctl, and landlock_restrict_self through the crate: the ruleset was made in the
        // parent) and builds errors from error numbers: no allocation, no lock.
        unsafe {
            command.pre_exec(move || {
                // A child of a daemon run as root could otherwise read the daemon's memory and
                // environment through /proc with CAP_SYS_PTRACE (Landlock's own ptrace scoping
                // does not cover /proc/<pid>/environ on every kernel). Without the privilege to
                // drop it there is nothing to drop.
                libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0);
                match ruleset.take() {
                    Some(ruleset) => match ruleset.restrict_self() {
                        Ok(_) => Ok(()),
                        Err(_) => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
                    },
                    None => Ok(()),
                }
            });
        }
        Ok(true)
    }

    fn ruleset(&self) -> Result<RulesetCreated, SandboxError> {
        let ruleset_error = |e: &dyn std::fmt::Display| SandboxError::Ruleset(e.to_string());
        // The first ABI's rights are required (else there is no Landlock); later ones are taken
        // where the kernel has them.
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|r| {
                r.set_compatibility(CompatLevel::BestEffort)
                    .handle_access(AccessFs::from_all(NEWEST))
            })
            .and_then(|r| r.scope(Scope::Signal | Scope::AbstractUnixSocket))
            .map_err(|e| ruleset_error(&e))?
            .set_compatibility(CompatLevel::HardRequirement)
            .create()
            .map_err(|e| SandboxError::Unsupported(e.to_string()))?;
        let mut created = created.set_compatibility(CompatLevel::BestEffort);
        for (fd, access) in self.grants()? {
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| ruleset_error(&e))?;
        }
        Ok(created)
    }

    /// Every entry to grant, with its rights: beneath `/` all but the way to a hidden path, and
    /// the same along that way.
    fn grants(&self) -> Result<Vec<(OwnedFd, BitFlags<AccessFs>)>, SandboxError> {
        let all = AccessFs::from_all(NEWEST);
        let files = AccessFs::from_file(NEWEST);
        let mut grants = Vec::new();
        let mut ways: Vec<PathBuf> = vec![PathBuf::from("/")];
        while let Some(dir) = ways.pop() {
            // The way itself: its entries may be listed, nothing more.
            if let Some(fd) = open_path(&dir) {
                grants.push((fd, BitFlags::from(AccessFs::ReadDir)));
            }
            let entries = std::fs::read_dir(&dir).map_err(|e| {
                SandboxError::Ruleset(format!("cannot list {}: {e}", dir.display()))
            })?;
            for entry in entries.flatten() {
                let path = entry.path();
                if self.hidden.iter().any(|hidden| hidden == &path) {
                    continue;
                }
                if self.hidden.iter().any(|hidden| hidden.starts_with(&path)) {
                    ways.push(path);
                    continue;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_symlink() {
                    continue;
                }
                let access = if kind.is_dir() { all } else { files };
                if let Some(fd) = open_path(&path) {
                    grants.push((fd, access));
                }
            }
        }
        Ok(grants)
    }
}

/// An `O_PATH` descriptor of `path` itself (a symbolic link is not followed: `None`).
fn open_path(path: &Path) -> Option<OwnedFd> {
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: `path` is NUL-terminated; these flags need no mode argument.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is open; `stat` is written by the call before it is read.
    let is_link = unsafe {
        libc::fstat(std::os::fd::AsRawFd::as_raw_fd(&fd), stat.as_mut_ptr()) != 0
            || stat.assume_init().st_mode & libc::S_IFMT == libc::S_IFLNK
    };
    (!is_link).then_some(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sh -c script` confined by `sandbox`; its stdout and whether it was confined.
    async fn run(sandbox: &ChildSandbox, script: &str) -> (String, bool) {
        let mut command = tokio::process::Command::new("/bin/sh");
        command.arg("-c").arg(script);
        let confined = sandbox.confine(&mut command).unwrap();
        let output = command.output().await.unwrap();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            confined,
        )
    }

    #[tokio::test]
    async fn a_child_cannot_read_write_or_list_into_a_hidden_directory_but_reaches_the_rest() {
        let place = tempfile::tempdir().unwrap();
        let data = place.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("vault.key"), "the vault key").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::write(elsewhere.path().join("notes.txt"), "notes").unwrap();
        let sandbox = ChildSandbox::hiding([data.clone()], SandboxMode::Required);
        let script = format!(
            "cat {data}/vault.key 2>/dev/null || echo no-read; \
             echo x > {data}/planted 2>/dev/null || echo no-write; \
             cat {notes}; echo; echo y > {elsewhere}/new && echo wrote-elsewhere; \
             cat /etc/hostname >/dev/null && echo etc; \
             kill -0 $PPID 2>/dev/null || echo no-signal",
            data = data.display(),
            notes = elsewhere.path().join("notes.txt").display(),
            elsewhere = elsewhere.path().display(),
        );
        let (seen, confined) = run(&sandbox, &script).await;
        assert!(confined, "Landlock is required here");
        for line in [
            "no-read",
            "no-write",
            "notes",
            "wrote-elsewhere",
            "etc",
            "no-signal",
        ] {
            assert!(seen.lines().any(|l| l == line), "{line} in {seen}");
        }
        assert!(!seen.contains("the vault key"), "{seen}");
        assert!(!data.join("planted").exists());
        // The same script unconfined reads the key: the test can see the difference.
        let (open, confined) = run(
            &ChildSandbox::hiding([data.clone()], SandboxMode::Off),
            &script,
        )
        .await;
        assert!(!confined);
        assert!(open.contains("the vault key"), "{open}");
    }

    #[test]
    fn sandbox_modes_are_read_from_words() {
        assert_eq!("on".parse(), Ok(SandboxMode::WhereSupported));
        assert_eq!("required".parse(), Ok(SandboxMode::Required));
        assert_eq!("off".parse(), Ok(SandboxMode::Off));
        assert!("maybe".parse::<SandboxMode>().is_err());
    }

    #[test]
    fn only_named_and_basic_variables_are_inherited() {
        // SAFETY: this test reads and sets variables no other test of this crate uses.
        unsafe {
            std::env::set_var("SWITCHBOARD_TEST_SECRET_FOR_CHILDREN", "secret");
            std::env::set_var("SWITCHBOARD_TEST_PROXY_FOR_CHILDREN", "proxy");
        }
        let policy = ChildPolicy {
            pass_env: vec!["SWITCHBOARD_TEST_PROXY_FOR_CHILDREN".into()],
            ..ChildPolicy::default()
        };
        let names: Vec<String> = policy
            .inherited_environment()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert!(names.contains(&"PATH".to_owned()), "{names:?}");
        assert!(names.contains(&"SWITCHBOARD_TEST_PROXY_FOR_CHILDREN".to_owned()));
        assert!(!names.contains(&"SWITCHBOARD_TEST_SECRET_FOR_CHILDREN".to_owned()));
    }
}
