//! `commands ...`: the programs the operator approves for tenants and members to run as stdio
//! servers.

use anyhow::bail;
use switchboard_store::Store;

use super::servers::parse_named;
use super::{DAEMON_PICKS_IT_UP, print_json};
use crate::{cli, render};

/// `switchboard commands ...`: the operator approves what tenants and members may run.
pub(crate) async fn approved_commands(
    store: &Store,
    command: cli::CommandsCommand,
) -> anyhow::Result<i32> {
    match command {
        cli::CommandsCommand::Add {
            name,
            command,
            description,
            env,
            user_env,
            user_arg,
            cwd,
        } => {
            let mut words = command.into_iter();
            let program = words.next().unwrap_or_default();
            let mut approved =
                switchboard_core::ApprovedCommand::new(&name, program, words.collect())?;
            approved.description = description.unwrap_or_default();
            approved.env = env
                .iter()
                .map(|pair| parse_named(pair, None))
                .collect::<anyhow::Result<_>>()?;
            approved.user_env = user_env;
            approved.user_args = user_arg;
            approved.cwd = cwd;
            store.put_approved_command(&approved).await?;
            println!(
                "Approved '{name}'. Tenant admins and members add it with {{\"approvedCommand\": \"{name}\"}}; {DAEMON_PICKS_IT_UP}"
            );
        }
        cli::CommandsCommand::List(flag) => {
            let commands: Vec<_> = store
                .approved_commands()
                .await?
                .iter()
                .map(switchboard_core::ApprovedCommand::redacted)
                .collect();
            if flag.json {
                print_json(&commands)?;
            } else if commands.is_empty() {
                println!(
                    "No approved commands: tenant admins and members cannot run stdio servers. Approve one with `switchboard commands add <name> -- <program> [args...]`."
                );
            } else {
                for command in commands {
                    let line = std::iter::once(command.command.as_str())
                        .chain(command.args.iter().map(String::as_str))
                        .collect::<Vec<_>>()
                        .join(" ");
                    println!(
                        "{}\t{}\tusers may set: {}\tand add: {}",
                        render::safe(&command.name),
                        render::safe(&line),
                        render::safe(&command.user_env.join(", ")),
                        render::safe(&command.user_args.join(" "))
                    );
                }
            }
        }
        cli::CommandsCommand::Remove { name } => {
            if !store.remove_approved_command(&name).await? {
                bail!("there is no approved command '{name}'");
            }
            println!("Withdrew '{name}': servers made from it no longer start.");
        }
    }
    Ok(0)
}
