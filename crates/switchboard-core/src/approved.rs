//! Commands the operator approves: the only stdio servers tenants and members may run.
//!
//! A stdio server is a program that runs on the daemon's host as the daemon's user, so only the
//! operator who runs the daemon decides which programs those are (CLI, or an operator key). A
//! tenant admin or member who wants a stdio server picks one of the operator's
//! [`ApprovedCommand`]s by name ([`TransportSpec::Approved`](crate::TransportSpec::Approved)) and
//! fills in what the operator left to them: values for the variables it names (their own token,
//! say) and arguments from its list. The command line and every other variable stay the
//! operator's: a user cannot choose `PATH`, `LD_PRELOAD` or `NODE_OPTIONS`, nor add `-e`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{NamedValue, ServerId, TransportSpec};

/// A command the operator lets tenants and members run as a stdio server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovedCommand {
    /// Its name, as users pick it (a slug, like a server id).
    pub name: String,
    /// What it is, for people choosing one.
    #[serde(default)]
    pub description: String,
    /// The program.
    pub command: String,
    /// Its arguments, always given first.
    #[serde(default)]
    pub args: Vec<String>,
    /// The operator's own environment values for it (sealed at rest).
    #[serde(default)]
    pub env: Vec<NamedValue>,
    /// Its working directory, if not the daemon's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The variables a user may set, by name (their values are sealed and never shown).
    #[serde(default)]
    pub user_env: Vec<String>,
    /// The arguments a user may add after [`Self::args`], each exactly as listed.
    #[serde(default)]
    pub user_args: Vec<String>,
}

/// Why a user's choice of an approved command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// Not a name a command can have.
    #[error("'{0}' is not a valid command name (lowercase letters, digits and single hyphens)")]
    BadName(String),
    /// The program is empty.
    #[error("an approved command needs a program to run")]
    EmptyCommand,
    /// No approved command has this name.
    #[error(
        "there is no approved command '{0}'; only the operator defines the commands stdio servers run (see GET /api/commands)"
    )]
    Unknown(String),
    /// A variable the operator did not leave to users.
    #[error(
        "the approved command '{command}' does not let users set '{variable}'{}",
        listing(.allowed)
    )]
    Variable {
        /// The command.
        command: String,
        /// The variable.
        variable: String,
        /// The variables users may set.
        allowed: Vec<String>,
    },
    /// An argument the operator did not list.
    #[error(
        "the approved command '{command}' does not take the argument '{argument}' from users{}",
        listing(.allowed)
    )]
    Argument {
        /// The command.
        command: String,
        /// The argument.
        argument: String,
        /// The arguments users may add.
        allowed: Vec<String>,
    },
}

fn listing(names: &[String]) -> String {
    match names.is_empty() {
        true => " (it takes none)".to_owned(),
        false => format!(" (only {})", names.join(", ")),
    }
}

impl ApprovedCommand {
    /// An approved command running `command` with `args`, leaving nothing to users yet.
    pub fn new(
        name: impl Into<String>,
        command: impl Into<String>,
        args: Vec<String>,
    ) -> Result<Self, ApprovalError> {
        let name = name.into();
        let command = command.into();
        if ServerId::new(name.as_str()).is_err() {
            return Err(ApprovalError::BadName(name));
        }
        if command.trim().is_empty() {
            return Err(ApprovalError::EmptyCommand);
        }
        Ok(Self {
            name,
            description: String::new(),
            command,
            args,
            env: Vec::new(),
            cwd: None,
            user_env: Vec::new(),
            user_args: Vec::new(),
        })
    }

    /// Checks that users may set each of `names`.
    pub fn check_user_variables<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ApprovalError> {
        for name in names {
            if !self.user_env.iter().any(|allowed| allowed == name) {
                return Err(ApprovalError::Variable {
                    command: self.name.clone(),
                    variable: name.to_owned(),
                    allowed: self.user_env.clone(),
                });
            }
        }
        Ok(())
    }

    /// Checks a user's arguments and variables against what the operator allows.
    pub fn check(&self, args: &[String], env: &[NamedValue]) -> Result<(), ApprovalError> {
        if let Some(argument) = args.iter().find(|a| !self.user_args.contains(a)) {
            return Err(ApprovalError::Argument {
                command: self.name.clone(),
                argument: argument.clone(),
                allowed: self.user_args.clone(),
            });
        }
        self.check_user_variables(env.iter().map(|v| v.name.as_str()))
    }

    /// The stdio transport a user's choice runs: the operator's program and arguments, then the
    /// user's arguments; the operator's variables, then the user's (checked first).
    pub fn resolve(
        &self,
        args: &[String],
        env: &[NamedValue],
    ) -> Result<TransportSpec, ApprovalError> {
        self.check(args, env)?;
        let mut all_env = self.env.clone();
        for value in env {
            all_env.retain(|own| own.name != value.name);
            all_env.push(value.clone());
        }
        Ok(TransportSpec::Stdio {
            command: self.command.clone(),
            args: self.args.iter().chain(args).cloned().collect(),
            env: all_env,
            cwd: self.cwd.clone(),
        })
    }

    /// A copy safe to show to users: the operator's values redacted.
    pub fn redacted(&self) -> Self {
        let mut shown = self.clone();
        for value in &mut shown.env {
            value.value = crate::server::REDACTED.to_owned();
        }
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn github() -> ApprovedCommand {
        let mut command = ApprovedCommand::new(
            "github",
            "npx",
            vec!["-y".into(), "@modelcontextprotocol/server-github".into()],
        )
        .unwrap();
        command.env = vec![NamedValue::guess("GITHUB_HOST", "github.com")];
        command.user_env = vec!["GITHUB_TOKEN".into()];
        command.user_args = vec!["--read-only".into()];
        command
    }

    #[test]
    fn a_users_choice_adds_only_listed_arguments_and_variables_after_the_operators() {
        let resolved = github()
            .resolve(
                &["--read-only".into()],
                &[NamedValue::guess("GITHUB_TOKEN", "ghp_x")],
            )
            .unwrap();
        let TransportSpec::Stdio {
            command, args, env, ..
        } = resolved
        else {
            panic!("a stdio transport");
        };
        assert_eq!(command, "npx");
        assert_eq!(
            args,
            ["-y", "@modelcontextprotocol/server-github", "--read-only"]
        );
        let names: Vec<&str> = env.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["GITHUB_HOST", "GITHUB_TOKEN"]);
    }

    #[test]
    fn variables_that_choose_what_runs_and_unlisted_arguments_are_refused() {
        for variable in ["PATH", "LD_PRELOAD", "NODE_OPTIONS", "GITHUB_HOST"] {
            let refused = github()
                .resolve(&[], &[NamedValue::guess(variable, "x")])
                .unwrap_err();
            assert!(
                matches!(&refused, ApprovalError::Variable { variable: v, .. } if v == variable),
                "{refused}"
            );
            assert!(
                refused.to_string().contains("only GITHUB_TOKEN"),
                "{refused}"
            );
        }
        for argument in ["-e", "--eval=process.exit()", "--read-only "] {
            assert!(matches!(
                github().resolve(&[argument.into()], &[]),
                Err(ApprovalError::Argument { .. })
            ));
        }
    }

    #[test]
    fn names_are_slugs_and_a_program_is_needed() {
        assert!(ApprovedCommand::new("Git Hub", "npx", vec![]).is_err());
        assert!(ApprovedCommand::new("github", " ", vec![]).is_err());
        assert_eq!(
            github().redacted().env[0].value,
            crate::server::REDACTED,
            "the operator's values are not shown to users"
        );
    }
}
