//! `switchboard endpoint ...`: endpoints, named sets of servers and tools each served at its own
//! MCP path, and the keys that reach one endpoint only. Like `server ...`, these work on the
//! store directly, so they serve a running daemon too (it follows the store).

use std::collections::BTreeMap;

use anyhow::bail;
use switchboard_core::{EndpointDefinition, ToolSet};
use switchboard_store::Store;

use super::{DAEMON_PICKS_IT_UP, print_json};
use crate::cli::EndpointCommand;
use crate::render;

/// Runs an `endpoint` subcommand.
pub async fn endpoint_command(store: &Store, command: EndpointCommand) -> anyhow::Result<i32> {
    match command {
        EndpointCommand::Set {
            name,
            servers,
            description,
        } => {
            let definition = EndpointDefinition {
                description,
                servers: included_servers(&servers)?,
            };
            let new = store.define_endpoint(&name, definition).await?;
            let did = if new { "Defined" } else { "Redefined" };
            println!(
                "{did} endpoint '{name}': clients of /mcp/e/{name} (or /sse/e/{name}, or \
                 `switchboard stdio --endpoint {name}`) reach what it includes and nothing else. \
                 {DAEMON_PICKS_IT_UP}"
            );
        }
        EndpointCommand::List(flag) => {
            let endpoints = store.endpoints().await?;
            if flag.json {
                print_json(&endpoints)?;
            } else if endpoints.is_empty() {
                println!(
                    "No endpoints. Define one with `switchboard endpoint set <name> --server <id>`."
                );
            } else {
                for endpoint in endpoints {
                    let servers: Vec<String> = endpoint
                        .definition
                        .servers
                        .iter()
                        .map(|(server, tools)| match tools {
                            ToolSet::All => server.clone(),
                            ToolSet::Only(tools) => format!(
                                "{server}:{}",
                                tools.iter().cloned().collect::<Vec<_>>().join(",")
                            ),
                        })
                        .collect();
                    let keys: Vec<&str> = endpoint.keys.iter().map(|k| k.id.as_str()).collect();
                    println!(
                        "{}\t{}\tkeys: {}\t{}",
                        render::safe(&endpoint.name),
                        render::safe(&servers.join(" ")),
                        if keys.is_empty() {
                            "none".to_owned()
                        } else {
                            keys.join(" ")
                        },
                        render::safe(endpoint.definition.description.as_deref().unwrap_or("")),
                    );
                }
            }
        }
        EndpointCommand::Remove { name } => {
            store.remove_endpoint(&name).await?;
            println!("Removed endpoint '{name}' and its keys. {DAEMON_PICKS_IT_UP}");
        }
        EndpointCommand::AddKey { name } => {
            let (key, kept) = store.issue_endpoint_key(&name).await?;
            eprintln!(
                "Key '{}' of endpoint '{name}' (shown once; it reaches /mcp/e/{name} and \
                 /sse/e/{name} only, as `Authorization: Bearer <key>`):",
                kept.id
            );
            println!("{key}");
        }
        EndpointCommand::RevokeKey { name, id } => {
            store.revoke_endpoint_key(&name, &id).await?;
            println!("Revoked key '{id}' of endpoint '{name}'. {DAEMON_PICKS_IT_UP}");
        }
    }
    Ok(0)
}

/// The servers `--server` values name: `<id>` for all of a server's tools, `<id>:<a>,<b>` for
/// only these.
fn included_servers(values: &[String]) -> anyhow::Result<BTreeMap<String, ToolSet>> {
    let mut servers = BTreeMap::new();
    for value in values {
        let (server, tools) = match value.split_once(':') {
            None => (value.trim(), ToolSet::All),
            Some((server, tools)) => {
                let tools: std::collections::BTreeSet<String> = tools
                    .split(',')
                    .map(str::trim)
                    .filter(|tool| !tool.is_empty())
                    .map(str::to_owned)
                    .collect();
                if tools.is_empty() {
                    bail!("--server {value}: name tools after the colon, or leave it out for all");
                }
                (server.trim(), ToolSet::Only(tools))
            }
        };
        if servers.insert(server.to_owned(), tools).is_some() {
            bail!("--server {server} is given twice: name its tools once");
        }
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_included_whole_or_by_the_tools_after_its_colon() {
        let servers =
            included_servers(&["docs".into(), "github:search_issues, get_issue".into()]).unwrap();
        assert_eq!(servers["docs"], ToolSet::All);
        assert_eq!(
            servers["github"],
            ToolSet::Only(["get_issue".to_owned(), "search_issues".to_owned()].into())
        );
        assert!(included_servers(&["github:".into()]).is_err());
        assert!(included_servers(&["a".into(), "a:x".into()]).is_err());
    }
}
