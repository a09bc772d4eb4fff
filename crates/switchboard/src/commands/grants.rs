//! `switchboard group ...` and `switchboard grant ...`: a tenant's groups of users, and the
//! grants of its endpoints, servers and tools to users and groups. Like `user ...`, these work
//! on the store directly; a running daemon follows the change (its members' workspaces read
//! their reach again).

use switchboard_core::grants::{Group, GroupName, Subject, Target};
use switchboard_core::{Grant, TenantId, UserId};
use switchboard_store::Store;

use super::print_json;
use crate::cli::{GrantCommand, GroupCommand, TenantList};
use crate::render;

/// Runs a `group` subcommand.
pub async fn group_command(store: &Store, command: GroupCommand) -> anyhow::Result<i32> {
    match command {
        GroupCommand::Set {
            name,
            members,
            description,
            tenant,
        } => {
            let tenant = TenantId::new(tenant.tenant)?;
            let group = Group {
                name: GroupName::new(name)?,
                description,
                members: members
                    .into_iter()
                    .map(UserId::new)
                    .collect::<Result<_, _>>()?,
            };
            let new = store.put_group(&tenant, &group).await?;
            let did = if new { "Defined" } else { "Redefined" };
            println!(
                "{did} group '{}' of tenant '{tenant}' with {} member(s). Grant it what its \
                 members may reach with `switchboard grant add --tenant {tenant} --to group:{} ...`.",
                group.name,
                group.members.len(),
                group.name
            );
        }
        GroupCommand::List(TenantList { tenant, json }) => {
            let groups = store.groups(&TenantId::new(tenant.tenant)?).await?;
            if json {
                print_json(&groups)?;
            } else if groups.is_empty() {
                println!(
                    "No groups. Define one with `switchboard group set <name> --member <user>`."
                );
            } else {
                for group in groups {
                    let members: Vec<String> =
                        group.members.iter().map(ToString::to_string).collect();
                    println!(
                        "{}\t{}\t{}",
                        render::safe(group.name.as_str()),
                        render::safe(&members.join(" ")),
                        render::safe(group.description.as_deref().unwrap_or("")),
                    );
                }
            }
        }
        GroupCommand::Remove { name, tenant } => {
            let tenant = TenantId::new(tenant.tenant)?;
            let name = GroupName::new(name)?;
            store.remove_group(&tenant, &name).await?;
            println!("Removed group '{name}' of tenant '{tenant}' and the grants made to it.");
        }
    }
    Ok(0)
}

/// Runs a `grant` subcommand.
pub async fn grant_command(store: &Store, command: GrantCommand) -> anyhow::Result<i32> {
    match command {
        GrantCommand::Add {
            to,
            endpoint,
            server,
            tool,
            tenant,
        } => {
            let tenant = TenantId::new(tenant.tenant)?;
            let subject: Subject = to.parse()?;
            let target = match (endpoint, server, tool) {
                (Some(endpoint), _, _) => Target::Endpoint(endpoint),
                (None, Some(server), Some(tool)) => Target::Tool { server, tool },
                (None, Some(server), None) => Target::Server(server),
                (None, None, _) => anyhow::bail!("name what to grant: --endpoint or --server"),
            };
            let (kept, new) = store.add_grant(&tenant, Grant { subject, target }).await?;
            let grant = &kept.grant;
            if new {
                println!(
                    "Granted {} to {} in tenant '{tenant}' (grant {}). Members of a tenant with \
                     grants reach only what they were granted.",
                    grant.target, grant.subject, kept.id
                );
            } else {
                println!(
                    "{} already had {} (grant {}).",
                    grant.subject, grant.target, kept.id
                );
            }
        }
        GrantCommand::List(TenantList { tenant, json }) => {
            let grants = store.grants(&TenantId::new(tenant.tenant)?).await?;
            if json {
                print_json(&grants)?;
            } else if grants.is_empty() {
                println!(
                    "No grants: every member reaches every shared server. Grant with \
                     `switchboard grant add --to <user:id|group:name> --server <id>`."
                );
            } else {
                for kept in grants {
                    println!(
                        "{}\t{}\t{}",
                        kept.id,
                        render::safe(&kept.grant.subject.to_string()),
                        render::safe(&kept.grant.target.to_string()),
                    );
                }
            }
        }
        GrantCommand::Revoke { id, tenant } => {
            let tenant = TenantId::new(tenant.tenant)?;
            store.revoke_grant(&tenant, &id).await?;
            println!("Revoked grant '{id}' of tenant '{tenant}'.");
        }
    }
    Ok(0)
}
