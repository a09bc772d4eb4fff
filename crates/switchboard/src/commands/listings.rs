//! What the servers offer and how they are doing: `tools`, `resources` (and `resources read`),
//! `prompts` (and `prompts get`), `search`, `status` and `server check`, read from the daemon
//! when one serves this data directory, else from servers started here.

use anyhow::{Context, bail};
use serde_json::{Value, json};
use switchboard_core::ConnectionState;
use switchboard_store::Store;

use super::{EXIT_FAILURE, print_json, split_target};
use crate::cli::{self, ListArgs};
use crate::hubs::{connected_hub_with, load_search_model, reach_for};
use crate::{daemon, reach, render};

/// `tools`: every connected server's tools (or one server's).
pub(crate) async fn tools(
    daemon: Option<daemon::Daemon>,
    store: Store,
    args: ListArgs,
) -> anyhow::Result<i32> {
    let reach = reach_for(daemon, store, args.server.clone()).await?;
    list_tools(reach, args).await
}

/// `resources`: every connected server's resources and templates (or one server's), or with
/// `read`, one resource's contents.
pub(crate) async fn resources(
    daemon: Option<daemon::Daemon>,
    store: Store,
    args: cli::ResourcesArgs,
) -> anyhow::Result<i32> {
    match args.read {
        Some(cli::ResourcesCommand::Read { server, uri, json }) => {
            let reach = reach_for(daemon, store, Some(server.clone())).await?;
            read_resource(reach, &server, &uri, json).await
        }
        None => {
            let reach = reach_for(daemon, store, args.list.server.clone()).await?;
            list_resources(reach, args.list).await
        }
    }
}

/// `prompts`: every connected server's prompts (or one server's), or with `get`, one prompt's
/// messages.
pub(crate) async fn prompts(
    daemon: Option<daemon::Daemon>,
    store: Store,
    args: cli::PromptsArgs,
) -> anyhow::Result<i32> {
    match args.get {
        Some(cli::PromptsCommand::Get { target, arg, json }) => {
            let (server, prompt) = split_target(&target, "<server>/<prompt>")?;
            let reach = reach_for(daemon, store, Some(server.to_owned())).await?;
            get_prompt(reach, server, prompt, &arg, json).await
        }
        None => {
            let reach = reach_for(daemon, store, args.list.server.clone()).await?;
            list_prompts(reach, args.list).await
        }
    }
}

/// `status`: how every enabled server is doing.
pub(crate) async fn status_of_all(
    daemon: Option<daemon::Daemon>,
    store: Store,
    json: bool,
) -> anyhow::Result<i32> {
    status(reach_for(daemon, store, None).await?, None, json).await
}

/// `server check <id>`: how server `id` is doing, checked now.
pub(crate) async fn check(
    daemon: Option<daemon::Daemon>,
    store: Store,
    id: &str,
    json: bool,
) -> anyhow::Result<i32> {
    let reach = reach_for(daemon, store, Some(id.to_owned())).await?;
    status(reach, Some(id), json).await
}

/// Prints the tools `reach` lists.
async fn list_tools(reach: reach::Reach, args: ListArgs) -> anyhow::Result<i32> {
    let (catalogs, lines) = reach.catalogs(args.server.as_deref()).await?;
    let mut rows = (Vec::new(), Vec::new());
    for (id, catalog) in &catalogs {
        for tool in &catalog.tools {
            rows.0.push(vec![
                id.clone(),
                tool.name.to_string(),
                render::short(tool.description.as_deref(), 80),
            ]);
            rows.1.push(json_row(tool, id, &[])?);
        }
    }
    let code = listing_exit_code(&lines, args.server.as_deref());
    let header = ["SERVER", "TOOL", "DESCRIPTION"];
    print_listing(reach, args.json, &header, rows, code).await
}

/// Prints the resources and templates `reach` lists.
async fn list_resources(reach: reach::Reach, args: ListArgs) -> anyhow::Result<i32> {
    let (catalogs, lines) = reach.catalogs(args.server.as_deref()).await?;
    let mut rows = (Vec::new(), Vec::new());
    for (id, catalog) in &catalogs {
        for resource in &catalog.resources {
            rows.0.push(vec![
                id.clone(),
                resource.uri.clone(),
                resource.name.clone(),
            ]);
            rows.1
                .push(json_row(resource, id, &[("kind", "resource")])?);
        }
        for template in &catalog.resource_templates {
            rows.0.push(vec![
                id.clone(),
                template.uri_template.clone(),
                template.name.clone(),
            ]);
            rows.1
                .push(json_row(template, id, &[("kind", "template")])?);
        }
    }
    let code = listing_exit_code(&lines, args.server.as_deref());
    print_listing(reach, args.json, &["SERVER", "URI", "NAME"], rows, code).await
}

/// Prints the prompts `reach` lists.
async fn list_prompts(reach: reach::Reach, args: ListArgs) -> anyhow::Result<i32> {
    let (catalogs, lines) = reach.catalogs(args.server.as_deref()).await?;
    let mut rows = (Vec::new(), Vec::new());
    for (id, catalog) in &catalogs {
        for prompt in &catalog.prompts {
            rows.0.push(vec![
                id.clone(),
                prompt.name.clone(),
                render::short(prompt.description.as_deref(), 80),
            ]);
            rows.1.push(json_row(prompt, id, &[])?);
        }
    }
    let code = listing_exit_code(&lines, args.server.as_deref());
    let header = ["SERVER", "PROMPT", "DESCRIPTION"];
    print_listing(reach, args.json, &header, rows, code).await
}

/// `resources read <server> <uri>`: the contents, text as text.
async fn read_resource(
    reach: reach::Reach,
    server: &str,
    uri: &str,
    json: bool,
) -> anyhow::Result<i32> {
    let read = reach
        .read_resource(server, uri)
        .await
        .with_context(|| format!("reading {uri} at {server}"));
    let printed = read.and_then(|read| {
        if json {
            print_json(&read)
        } else {
            println!("{}", render::read_contents(&read.contents));
            Ok(())
        }
    });
    reach.close().await;
    printed.map(|()| 0)
}

/// `prompts get <server>/<prompt>`: its messages.
async fn get_prompt(
    reach: reach::Reach,
    server: &str,
    prompt: &str,
    pairs: &[String],
    json: bool,
) -> anyhow::Result<i32> {
    let mut arguments = serde_json::Map::new();
    for pair in pairs {
        let (name, value) = pair
            .split_once('=')
            .with_context(|| format!("'{pair}' is not NAME=VALUE"))?;
        // Prompt arguments are strings, whatever they look like.
        arguments.insert(name.to_owned(), Value::String(value.to_owned()));
    }
    let got = reach
        .get_prompt(server, prompt, arguments)
        .await
        .with_context(|| format!("getting {server}/{prompt}"));
    let printed = got.and_then(|got| {
        if json {
            print_json(&got)
        } else {
            println!("{}", render::prompt_messages(&got));
            Ok(())
        }
    });
    reach.close().await;
    printed.map(|()| 0)
}

/// `search`: the tools that match a query, best first.
pub(crate) async fn search(
    daemon: Option<daemon::Daemon>,
    store: Store,
    args: cli::SearchArgs,
) -> anyhow::Result<i32> {
    let reach = match daemon {
        Some(daemon) => {
            if args.search_model.search_model.is_some() {
                eprintln!(
                    "The daemon ranks with its own --search-model; this one applies with --standalone."
                );
            }
            reach::Reach::Daemon(daemon)
        }
        None => {
            let encoder = load_search_model(&args.search_model).await?;
            let hub = connected_hub_with(store, None, |hub| hub.semantic_search(encoder)).await?;
            reach::Reach::Here(hub)
        }
    };
    let found = reach
        .search(&args.query, args.limit, args.regex, args.min_score)
        .await;
    // Printed first: a stdio server's shutdown grace is no reason to keep the user waiting.
    let printed = found.and_then(|found| {
        if let Some(note) = &found.note {
            eprintln!("Ranked by words only: {note}.");
        }
        if args.json {
            print_json(&found.tools)?;
            return Ok(0);
        }
        if found.tools.is_empty() {
            eprintln!("No tool matches '{}'.", args.query);
            return Ok(EXIT_FAILURE);
        }
        let rows: Vec<Vec<String>> = found
            .tools
            .iter()
            .map(|tool| {
                vec![
                    format!("{:.2}", tool.score),
                    tool.name.clone(),
                    render::short(Some(&tool.description), 70),
                ]
            })
            .collect();
        println!(
            "{}",
            render::table(&["SCORE", "TOOL", "DESCRIPTION"], &rows)
        );
        Ok(0)
    });
    reach.close().await;
    printed
}

/// Shows how each server (or only `only`) is doing, with advice on the names; fails unless
/// all shown are connected. Through the daemon, `only` is checked now first.
async fn status(reach: reach::Reach, only: Option<&str>, json: bool) -> anyhow::Result<i32> {
    if let (reach::Reach::Daemon(daemon), Some(id)) = (&reach, only) {
        let path = format!("/api/servers/{}/check", reach::path_segment(id));
        let _: Value = daemon.post(&path, &json!({})).await?;
    }
    let (mut report, view) = reach.status().await?;
    let shown = |server: &str| only.is_none_or(|id| id == server);
    let lines: Vec<&reach::StatusLine> = view.servers.iter().filter(|s| shown(&s.server)).collect();
    if let Some(id) = only
        && lines.is_empty()
    {
        bail!("no server with id '{id}' is running");
    }
    if json {
        let mut servers = report["servers"].take();
        if let Value::Array(all) = &mut servers {
            all.retain(|s| s["server"].as_str().is_some_and(shown));
        }
        print_json(&servers)?;
    } else if lines.is_empty() {
        println!("No enabled servers.");
    } else {
        let rows: Vec<Vec<String>> = lines
            .iter()
            .map(|s| {
                vec![
                    s.server.clone(),
                    s.state.to_string(),
                    s.detected_transport.clone().unwrap_or(s.transport.clone()),
                    s.protocol_version.clone().unwrap_or_default(),
                    s.tools.to_string(),
                    s.error.clone().unwrap_or_default(),
                ]
            })
            .collect();
        println!(
            "{}",
            render::table(
                &[
                    "SERVER",
                    "STATE",
                    "TRANSPORT",
                    "PROTOCOL",
                    "TOOLS",
                    "PROBLEM"
                ],
                &rows
            )
        );
        if only.is_none() {
            for advice in &view.advice {
                println!("warning: {}", render::safe(advice));
            }
            for renamed in &view.renamed {
                println!(
                    "note: {}'s tool \"{}\" is not a valid tool name; it is exposed as {}",
                    renamed.server,
                    render::safe(&renamed.original),
                    renamed.exposed
                );
            }
        }
    }
    // Printed first: a stdio server's shutdown grace is no reason to keep the user waiting.
    reach.close().await;
    let unhealthy = lines.iter().any(|s| s.state != ConnectionState::Connected);
    Ok(if unhealthy { EXIT_FAILURE } else { 0 })
}

/// `item` as JSON with its server (and `extra` fields) added: a row of a `--json` listing.
fn json_row(
    item: &impl serde::Serialize,
    server: &str,
    extra: &[(&str, &str)],
) -> anyhow::Result<Value> {
    let mut value = serde_json::to_value(item)?;
    if let Value::Object(map) = &mut value {
        map.insert("server".into(), json!(server));
        for (key, text) in extra {
            map.insert((*key).into(), json!(text));
        }
    }
    Ok(value)
}

/// Prints a listing (`--json`: the rows' JSON; else a table) and closes `reach`.
async fn print_listing(
    reach: reach::Reach,
    json: bool,
    header: &[&str],
    rows: (Vec<Vec<String>>, Vec<Value>),
    code: i32,
) -> anyhow::Result<i32> {
    let printed = if json {
        print_json(&rows.1)
    } else {
        println!("{}", render::table(header, &rows.0));
        Ok(())
    };
    // Printed first: a stdio server's shutdown grace is no reason to keep the user waiting.
    reach.close().await;
    printed.map(|()| code)
}

/// Exit code of a listing: a failure when the one server asked for is not connected. Listings
/// over every server show what they can and warn about the rest.
fn listing_exit_code(lines: &[reach::StatusLine], only: Option<&str>) -> i32 {
    let failed = only.is_some()
        && lines
            .iter()
            .any(|line| line.state != ConnectionState::Connected);
    if failed { EXIT_FAILURE } else { 0 }
}
