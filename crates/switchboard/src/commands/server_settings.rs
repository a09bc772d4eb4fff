//! `server` subcommands that set how a configured server's tools are offered and guarded:
//! which are on, their names, task modes, pins, callers, search notes, overrides, rate limits,
//! retries, approval, guardrails, and what a changed definition does (and its acceptance).

use anyhow::bail;
use serde_json::Value;
use switchboard_core::ToolSettingsChange;
use switchboard_store::Store;

use super::servers::configured_server;
use super::{DAEMON_PICKS_IT_UP, parse_id, print_json};
use crate::cli;
use crate::hubs::connected_hub;
use crate::render;

/// `server disable-tool` and `enable-tool`.
pub(crate) async fn set_tools_disabled(
    store: &Store,
    args: cli::ToolArgs,
    disabled: bool,
) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        enabled: Some(!disabled),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    let verb = if disabled { "Disabled" } else { "Enabled" };
    println!(
        "{verb} {} on {id}. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", ")
    );
    Ok(0)
}

/// Applies `change` to each of `tools` of the configured server `id` and stores the result.
async fn change_tools(
    store: &Store,
    id: &str,
    tools: &[String],
    change: &ToolSettingsChange,
) -> anyhow::Result<switchboard_core::ServerId> {
    let (id, mut def) = configured_server(store, id).await?;
    for tool in tools {
        def.change_tool(tool, change);
    }
    store.put_server(&def).await?;
    Ok(id)
}

/// `server set-prefix`: what the server's names are exposed with.
pub(crate) async fn set_prefix(store: &Store, args: cli::PrefixArgs) -> anyhow::Result<i32> {
    let (id, mut def) = configured_server(store, &args.id).await?;
    let prefix = switchboard_core::exposure::Prefix::new(args.prefix)?;
    def.prefix = Some(prefix.to_string());
    store.put_server(&def).await?;
    if prefix.to_string().is_empty() {
        println!("{id}'s names are now exposed unchanged. {DAEMON_PICKS_IT_UP}");
    } else {
        println!("{id}'s names are now exposed as {prefix}__<name>. {DAEMON_PICKS_IT_UP}");
    }
    Ok(0)
}

/// `server set-task-mode`: whether calls of tools run as tasks.
pub(crate) async fn set_task_mode(store: &Store, args: cli::TaskModeArgs) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        task_mode: Some(args.mode),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    println!(
        "Calls of {} on {id} are now {} as tasks. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", "),
        match args.mode {
            switchboard_core::TaskMode::Forbidden => "never run",
            switchboard_core::TaskMode::Optional => "run, when they take long,",
            switchboard_core::TaskMode::Required => "always run",
        }
    );
    Ok(0)
}

/// `server pin` and `unpin`: tools always listed in the deferred tool view.
pub(crate) async fn pin_tools(
    store: &Store,
    args: cli::ToolArgs,
    pin: bool,
) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        pinned: Some(pin),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    println!(
        "{} of {id} {} the deferred tool view. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", "),
        if pin {
            "are now pinned in"
        } else {
            "are no longer pinned in"
        }
    );
    Ok(0)
}

/// `server set-callers`: who may call tools.
pub(crate) async fn set_callers(store: &Store, args: cli::CallersArgs) -> anyhow::Result<i32> {
    let callers: std::collections::BTreeSet<_> = args.callers.iter().cloned().collect();
    let change = ToolSettingsChange {
        allowed_callers: Some((!args.any).then(|| callers.clone())),
        ..Default::default()
    };
    let id = change_tools(store, &args.id, &args.tools, &change).await?;
    let who = if args.any {
        "anyone".to_owned()
    } else {
        callers
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "{} of {id} may now be called by {who}. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", ")
    );
    Ok(0)
}

/// `server set-tool-notes`: words a tool is also found by.
pub(crate) async fn set_tool_notes(store: &Store, args: cli::ToolNotesArgs) -> anyhow::Result<i32> {
    let change = ToolSettingsChange {
        search_notes: Some(args.notes.filter(|_| !args.clear)),
        ..Default::default()
    };
    change.check()?;
    let id = change_tools(store, &args.id, std::slice::from_ref(&args.tool), &change).await?;
    let what = if args.clear {
        "no search notes"
    } else {
        "your search notes"
    };
    println!(
        "{} of {id} is searched with {what} now. {DAEMON_PICKS_IT_UP}",
        args.tool
    );
    Ok(0)
}

/// `server set-approval`: the calls that wait for a person's approval.
pub(crate) async fn set_approval(store: &Store, args: cli::ApprovalArgs) -> anyhow::Result<i32> {
    if args.tools.is_empty() && !args.destructive && args.timeout.is_none() {
        bail!("name tools, or --destructive, or a --timeout");
    }
    let (id, mut def) = configured_server(store, &args.id).await?;
    let change = ToolSettingsChange {
        approval: Some(!args.off),
        ..Default::default()
    };
    for tool in &args.tools {
        def.change_tool(tool, &change);
    }
    if args.destructive {
        def.policies.approve_destructive = !args.off;
    }
    if args.timeout.is_some() {
        def.policies.approval_timeout_secs = args.timeout;
    }
    store.put_server(&def).await?;
    let policies = &def.policies;
    let mut waiting: Vec<&str> = policies.approval.iter().map(String::as_str).collect();
    if policies.approve_destructive {
        waiting.push("every tool annotated destructive");
    }
    let secs = policies
        .approval_timeout_secs
        .unwrap_or(switchboard_core::policy::DEFAULT_APPROVAL_WAIT_SECS);
    if waiting.is_empty() {
        println!("No call of {id} waits for approval. {DAEMON_PICKS_IT_UP}");
    } else {
        println!(
            "Calls of {} on {id} wait for a person's approval (in the console), {secs} s at most. {DAEMON_PICKS_IT_UP}",
            waiting.join(", ")
        );
    }
    Ok(0)
}

/// `server override-tool`: how clients see a tool (name, title, description, annotations,
/// fixed arguments).
pub(crate) async fn override_tool(store: &Store, args: cli::OverrideArgs) -> anyhow::Result<i32> {
    let tool_override = if args.clear {
        None
    } else {
        let value_of = |text: &str| -> Value {
            serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
        };
        let pairs = |items: &[String], what: &str| -> anyhow::Result<Vec<(String, Value)>> {
            items
                .iter()
                .map(|item| match item.split_once('=') {
                    Some((name, value)) => Ok((name.trim().to_owned(), value_of(value))),
                    None => bail!("{what} {item}: write NAME=VALUE"),
                })
                .collect()
        };
        Some(switchboard_core::ToolOverride {
            name: args.name,
            title: args.title,
            description: args.description,
            annotations: pairs(&args.annotations, "--annotation")?
                .into_iter()
                .collect(),
            fixed_arguments: pairs(&args.fixed, "--fixed")?.into_iter().collect(),
        })
    };
    let change = ToolSettingsChange {
        tool_override: Some(tool_override),
        ..Default::default()
    };
    change.check()?;
    let id = change_tools(store, &args.id, std::slice::from_ref(&args.tool), &change).await?;
    if args.clear {
        println!(
            "{} of {id} is as its server says again. {DAEMON_PICKS_IT_UP}",
            args.tool
        );
    } else {
        println!(
            "Clients see {} of {id} as you said (`server show {id}` lists it). {DAEMON_PICKS_IT_UP}",
            args.tool
        );
    }
    Ok(0)
}

/// `server set-rate-limit`: how often the server (or each of some tools) may be called.
pub(crate) async fn set_rate_limit(store: &Store, args: cli::RateLimitArgs) -> anyhow::Result<i32> {
    let limit = if args.none { None } else { args.limit };
    let what = if args.tools.is_empty() {
        let (id, mut def) = configured_server(store, &args.id).await?;
        def.policies.server_rate_limit = limit;
        store.put_server(&def).await?;
        format!("Calls to {id}")
    } else {
        let change = ToolSettingsChange {
            rate_limit: Some(limit),
            ..Default::default()
        };
        let id = change_tools(store, &args.id, &args.tools, &change).await?;
        format!("Calls to each of {} on {id}", args.tools.join(", "))
    };
    match limit {
        Some(limit) => println!("{what} are now limited to {limit}. {DAEMON_PICKS_IT_UP}"),
        None => println!("{what} are no longer limited. {DAEMON_PICKS_IT_UP}"),
    }
    Ok(0)
}

/// `server set-retries`: which requests are retried, and how.
pub(crate) async fn set_retries(store: &Store, args: cli::RetriesArgs) -> anyhow::Result<i32> {
    let (id, mut def) = configured_server(store, &args.id).await?;
    def.policies.retries = args.preset;
    for (tools, safe) in [(&args.safe, true), (&args.not_safe, false)] {
        let change = ToolSettingsChange {
            safe_to_retry: Some(safe),
            ..Default::default()
        };
        for tool in tools {
            def.change_tool(tool, &change);
        }
    }
    store.put_server(&def).await?;
    let safe = &def.policies.safe_to_retry;
    println!(
        "Requests to {id} that are safe to repeat are retried: {} ({} tries at most){}. \
         {DAEMON_PICKS_IT_UP}",
        args.preset.as_str(),
        args.preset.tries(),
        if safe.is_empty() {
            String::new()
        } else {
            format!(
                "; calls of {} count as safe",
                safe.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    );
    Ok(0)
}

/// `server set-guardrails`: what is masked in calls of a server, and the webhook that sees them.
pub(crate) async fn set_guardrails(
    store: &Store,
    args: cli::GuardrailsArgs,
) -> anyhow::Result<i32> {
    use switchboard_core::guardrails::{Guardrails, OnFailure, Webhook};
    let (id, mut def) = configured_server(store, &args.id).await?;
    let guardrails = Guardrails {
        redact_arguments: args.redact_arguments.into_iter().collect(),
        redact_results: args.redact_results.into_iter().collect(),
        webhook: args.webhook.map(|url| Webhook {
            url,
            timeout_ms: args.webhook_timeout,
            on_failure: if args.fail_open {
                OnFailure::Allow
            } else {
                OnFailure::Refuse
            },
        }),
    };
    guardrails.check()?;
    let said = match guardrails.is_empty() {
        true => "Calls of {id} pass without guardrails.".replace("{id}", id.as_str()),
        false => format!(
            "Calls of {id} pass through its guardrails: {}.",
            serde_json::to_string(&guardrails)?
        ),
    };
    def.policies.guardrails = guardrails;
    store.put_server(&def).await?;
    println!("{said} {DAEMON_PICKS_IT_UP}");
    Ok(0)
}

/// `server set-definition-changes`: what a changed tool definition of a server does.
pub(crate) async fn set_definition_changes(
    store: &Store,
    args: cli::DefinitionChangesArgs,
) -> anyhow::Result<i32> {
    let (id, mut def) = configured_server(store, &args.id).await?;
    def.policies.definition_changes = args.setting;
    store.put_server(&def).await?;
    let said = match args.setting {
        switchboard_core::definitions::DefinitionChanges::Warn => {
            "served and announced until someone accepts them"
        }
        switchboard_core::definitions::DefinitionChanges::Hold => {
            "held back from clients until someone accepts them"
        }
        switchboard_core::definitions::DefinitionChanges::Off => "not looked for",
    };
    println!("Changed tool definitions of {id} are {said}. {DAEMON_PICKS_IT_UP}");
    Ok(0)
}

/// `server definitions`: the tools of a server whose definitions are not the approved ones.
pub(crate) async fn show_definitions(store: &Store, args: cli::IdArgs) -> anyhow::Result<i32> {
    let id = parse_id(&args.id)?;
    let hub = connected_hub(store.clone(), Some(&args.id)).await?;
    let changed = hub.changed_definitions(&id);
    hub.shutdown().await;
    let changed = changed?;
    if args.json {
        print_json(&changed)?;
    } else if changed.is_empty() {
        println!("Every tool of {id} is as approved.");
    } else {
        for change in &changed {
            println!("{}", render::changed_definition(change));
        }
    }
    Ok(0)
}

/// `server accept-definition`: approves tools' current definitions.
pub(crate) async fn accept_definitions(store: &Store, args: cli::ToolArgs) -> anyhow::Result<i32> {
    let id = parse_id(&args.id)?;
    let hub = connected_hub(store.clone(), Some(&args.id)).await?;
    let mut accepted = Ok(());
    for tool in &args.tools {
        accepted = hub.accept_definition(&id, tool, None).await;
        if accepted.is_err() {
            break;
        }
    }
    hub.shutdown().await;
    accepted?;
    println!(
        "Accepted the current definitions of {} on {id}. {DAEMON_PICKS_IT_UP}",
        args.tools.join(", ")
    );
    Ok(0)
}
