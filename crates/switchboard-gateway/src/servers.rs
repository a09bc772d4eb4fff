//! The admin API of configured servers: what a console (or a script) needs to manage them
//! while the daemon runs. Every write goes through the hub, which stores it and brings the
//! running servers in step before the answer, so the answer already shows the effect.
//!
//! - `GET /api/servers`, `GET /api/servers/{id}`: definitions (secrets shown as `********`) with
//!   each server's live status.
//! - `POST /api/servers` (`{"id": ..., "url": ... | "command": ..., ...}`, an entry as the
//!   `mcpServers` files write it), `PUT /api/servers/{id}` (the same, replacing; values shown as
//!   `********` keep the stored ones), `PATCH /api/servers/{id}` (`enabled`, `display_name`,
//!   `description`, `prefix`, `rate_limit`), `DELETE /api/servers/{id}`.
//! - `POST /api/servers/import[?replace=true]`: a Claude Desktop / Cursor / VS Code JSON file or
//!   a Switchboard TOML file as the body.
//! - `GET /api/servers/{id}/tools` (enabled and disabled, with their settings),
//!   `PATCH /api/servers/{id}/tools/{tool}` (`enabled`, `pinned`, `task_mode`,
//!   `allowed_callers`, `rate_limit`), `GET /api/servers/{id}/resources`, `GET /api/servers/{id}/prompts`.
//! - `POST /api/servers/{id}/tools/{tool}/call` (`{"arguments": {...}}`): the tool's result; with
//!   `Accept: text/event-stream`, `progress` events first and then the `result` (or `error`).
//!   Closing the stream cancels the call.
//! - `POST /api/servers/{id}/logout`: revoke and delete its tokens.

use std::convert::Infallible;

use futures::StreamExt;

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_core::exposure::Prefix;
use switchboard_core::{ServerDefinition, ServerId, ToolSettingsChange, config};
use switchboard_hub::HubError;
use switchboard_upstream::CallContext;

use crate::wire::OnTheWire;
use crate::{ApiError, AppState};

/// What the admin API's handlers answer.
type Answer = Result<Response, ApiError>;

/// A server id from a path, or a 400.
fn server_id(id: String) -> Result<ServerId, ApiError> {
    ServerId::new(id).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, rejection.body_text())
    }
}

/// A server as the API shows it: its definition, redacted, and its live status (`null` when it
/// is not running: disabled, or just removed).
fn server_view(app: &AppState, def: &ServerDefinition, owners: &Owners) -> Value {
    let status = app
        .hub
        .status()
        .into_iter()
        .find(|status| status.server == def.id);
    let mut shown = def.redacted();
    // A member sees what a shared server is, not the values it runs with (they are the
    // tenant's, and a name does not say which hold credentials).
    if let Owners::User(own) = owners
        && !own.contains(&def.id)
        && !app.hub.workspace().manages_tenant()
    {
        shown.transport = shown.transport.redacted_for_users();
    }
    let mut view = serde_json::to_value(shown).unwrap_or_default();
    if let Some(object) = view.as_object_mut() {
        object.insert(
            "status".into(),
            serde_json::to_value(status).unwrap_or_default(),
        );
        if let Owners::User(own) = owners {
            object.insert("shared".into(), Value::Bool(!own.contains(&def.id)));
        }
    }
    view
}

/// Whose the servers of a workspace are: in a user's, their own or their tenant's (shared);
/// in the local workspace, the question does not arise.
enum Owners {
    Local,
    User(std::collections::HashSet<ServerId>),
}

impl Owners {
    async fn of(app: &AppState) -> Result<Self, ApiError> {
        if app.hub.workspace().user().is_none() {
            return Ok(Self::Local);
        }
        Ok(Self::User(
            app.hub.own_server_ids().await.map_err(HubError::from)?,
        ))
    }
}

/// `GET /api/servers`.
pub(crate) async fn list(app: AppState) -> Answer {
    let defs = app.hub.definitions().await?;
    let owners = Owners::of(&app).await?;
    let servers: Vec<Value> = defs
        .iter()
        .map(|def| server_view(&app, def, &owners))
        .collect();
    Ok(Json(json!({ "servers": servers })).into_response())
}

/// `GET /api/servers/{id}`.
pub(crate) async fn show(app: AppState, Path(id): Path<String>) -> Answer {
    let def = app.hub.definition(&server_id(id)?).await?;
    let owners = Owners::of(&app).await?;
    Ok(Json(server_view(&app, &def, &owners)).into_response())
}

/// `GET /api/me`: whose workspace the caller is in.
pub(crate) async fn me(app: AppState) -> Answer {
    Ok(match app.hub.workspace() {
        switchboard_core::Workspace::Local => Json(json!({"workspace": "local"})).into_response(),
        switchboard_core::Workspace::User(principal) => {
            let groups = app.hub.my_groups().await?;
            // `null`: not bound by grants; else the servers, tools and endpoints granted.
            let reach = app.hub.reach();
            Json(json!({
                "workspace": "user",
                "tenant": principal.tenant,
                "user": principal.user,
                "role": principal.role,
                "groups": groups,
                "reach": reach,
            }))
            .into_response()
        }
    })
}

/// A server's definition from an `mcpServers` entry under `id` (an `"id"` key in it ignored).
fn entry(id: &str, mut entry: Value) -> Result<ServerDefinition, ApiError> {
    if let Some(object) = entry.as_object_mut() {
        object.remove("id");
    }
    let def =
        config::parse_entry(id, entry).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    if def.id.as_str() != id {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("'{id}' is not a server id (lowercase letters, digits, single hyphens)"),
        ));
    }
    Ok(def)
}

/// `POST /api/servers`: adds a server; 409 when its id is taken.
pub(crate) async fn create(app: AppState, payload: Result<Json<Value>, JsonRejection>) -> Answer {
    let Json(payload) = payload?;
    let Some(id) = payload.get("id").and_then(Value::as_str).map(str::to_owned) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "give the new server's \"id\" beside its \"url\" or \"command\"",
        ));
    };
    let def = entry(&id, payload)?;
    app.hub.put_definition(def.clone(), false).await?;
    Ok((
        StatusCode::CREATED,
        Json(server_view(&app, &def, &Owners::of(&app).await?)),
    )
        .into_response())
}

/// `POST /api/test-connection`: connects to a definition (the body of `POST /api/servers`; the id
/// may be left out) without storing it, and says what it found. A server that cannot be reached
/// is an answer (`connected: false` and why), not an error.
pub(crate) async fn test(app: AppState, payload: Result<Json<Value>, JsonRejection>) -> Answer {
    let Json(payload) = payload?;
    let id = payload
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("test")
        .to_owned();
    let def = entry(&id, payload)?;
    Ok(Json(app.hub.test_definition(&def).await?).into_response())
}

/// `PUT /api/servers/{id}`: adds or replaces a server.
pub(crate) async fn replace(
    app: AppState,
    Path(id): Path<String>,
    payload: Result<Json<Value>, JsonRejection>,
) -> Answer {
    let Json(payload) = payload?;
    let def = entry(&id, payload)?;
    let id = def.id.clone();
    let replaced = app.hub.put_definition(def, true).await?;
    let def = app.hub.definition(&id).await?;
    let status = if replaced {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((
        status,
        Json(server_view(&app, &def, &Owners::of(&app).await?)),
    )
        .into_response())
}

/// What `PATCH /api/servers/{id}` may change.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerChange {
    enabled: Option<bool>,
    display_name: Option<String>,
    description: Option<String>,
    /// `""` for names unchanged.
    prefix: Option<String>,
    /// The limit of calls to all its tools together; `null` for none.
    #[serde(default, deserialize_with = "switchboard_core::tool_settings::present")]
    rate_limit: Option<Option<switchboard_core::RateLimit>>,
    /// How requests safe to repeat are retried: `off`, `quick` or `standard`.
    retries: Option<switchboard_core::RetryPreset>,
    /// Whether every tool annotated destructive waits for a person's approval.
    approve_destructive: Option<bool>,
    /// How long a call waits for approval, in seconds; `null` for the default.
    #[serde(default, deserialize_with = "switchboard_core::tool_settings::present")]
    approval_timeout_secs: Option<Option<u64>>,
    /// What happens when a tool's definition is not the approved one: `warn`, `hold`, `off`.
    definition_changes: Option<switchboard_core::definitions::DefinitionChanges>,
    /// What is checked and rewritten on each call's way; `null` for none.
    #[serde(default, deserialize_with = "switchboard_core::tool_settings::present")]
    guardrails: Option<Option<switchboard_core::guardrails::Guardrails>>,
    /// The OAuth client registered for the server; `null` for none (then client ID metadata
    /// documents and dynamic registration are used).
    #[serde(default, deserialize_with = "switchboard_core::tool_settings::present")]
    oauth_client: Option<Option<OAuthClientChange>>,
}

/// An OAuth client as `PATCH /api/servers/{id}` sets it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OAuthClientChange {
    client_id: String,
    /// `********` keeps the stored one (as the API shows it); absent or empty for none.
    #[serde(default)]
    client_secret: Option<String>,
    /// The authorization server the client belongs to (its credentials go to no other).
    #[serde(default)]
    issuer: Option<String>,
    #[serde(default)]
    grant: switchboard_core::OAuthGrant,
}

impl OAuthClientChange {
    /// The client this change makes of `stored` (the server's client now, if any), or why it
    /// cannot be. The private key and redirect URI (set with the CLI) stay with an unchanged
    /// client id.
    fn applied_to(
        self,
        stored: Option<&switchboard_core::OAuthClient>,
        transport: &switchboard_core::TransportSpec,
    ) -> Result<switchboard_core::OAuthClient, String> {
        if !matches!(transport, switchboard_core::TransportSpec::Http { .. }) {
            return Err("an OAuth client applies to HTTP servers only".into());
        }
        let client_id = self.client_id.trim().to_owned();
        if client_id.is_empty() || client_id.len() > 512 {
            return Err("an OAuth client needs a client id (at most 512 characters)".into());
        }
        let issuer = self
            .issuer
            .map(|issuer| issuer.trim().to_owned())
            .filter(|issuer| !issuer.is_empty());
        if let Some(issuer) = &issuer {
            let parsed = url::Url::parse(issuer)
                .map_err(|_| format!("the issuer '{issuer}' is not a URL"))?;
            if !matches!(parsed.scheme(), "https" | "http") || parsed.host().is_none() {
                return Err(format!("the issuer '{issuer}' is not an http(s) URL"));
            }
        }
        let same = stored.filter(|stored| stored.client_id == client_id);
        let client_secret = match self.client_secret.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(switchboard_core::server::REDACTED) => {
                let kept = same.and_then(|stored| stored.client_secret.clone());
                Some(kept.ok_or("the client secret shown masked belongs to no stored client")?)
            }
            Some(secret) => Some(secret.to_owned()),
        };
        Ok(switchboard_core::OAuthClient {
            client_id,
            client_secret,
            issuer,
            grant: self.grant,
            private_key_pem: same.and_then(|stored| stored.private_key_pem.clone()),
            signing_algorithm: same.and_then(|stored| stored.signing_algorithm.clone()),
            redirect_uri: same.and_then(|stored| stored.redirect_uri.clone()),
        })
    }
}

/// `PATCH /api/servers/{id}`.
pub(crate) async fn change(
    app: AppState,
    Path(id): Path<String>,
    payload: Result<Json<ServerChange>, JsonRejection>,
) -> Answer {
    let id = server_id(id)?;
    let Json(change) = payload?;
    let def = app
        .hub
        .change_definition(&id, move |def| {
            if let Some(name) = change.display_name {
                if name.trim().is_empty() {
                    return Err("a display name cannot be empty".into());
                }
                def.display_name = name;
            }
            if let Some(prefix) = change.prefix {
                def.prefix = Some(Prefix::new(prefix).map_err(|e| e.to_string())?.to_string());
            }
            if let Some(description) = change.description {
                def.description = description;
            }
            if let Some(enabled) = change.enabled {
                def.enabled = enabled;
            }
            if let Some(limit) = change.rate_limit {
                def.policies.server_rate_limit = limit;
            }
            if let Some(retries) = change.retries {
                def.policies.retries = retries;
            }
            if let Some(setting) = change.definition_changes {
                def.policies.definition_changes = setting;
            }
            if let Some(guardrails) = change.guardrails {
                let guardrails = guardrails.unwrap_or_default();
                guardrails.check().map_err(|e| e.to_string())?;
                def.policies.guardrails = guardrails;
            }
            if let Some(destructive) = change.approve_destructive {
                def.policies.approve_destructive = destructive;
            }
            if let Some(timeout) = change.approval_timeout_secs {
                if timeout.is_some_and(|secs| {
                    !(1..=switchboard_core::policy::MAX_APPROVAL_WAIT_SECS).contains(&secs)
                }) {
                    return Err(format!(
                        "approval_timeout_secs is 1 to {}",
                        switchboard_core::policy::MAX_APPROVAL_WAIT_SECS
                    ));
                }
                def.policies.approval_timeout_secs = timeout;
            }
            if let Some(client) = change.oauth_client {
                def.oauth_client = match client {
                    Some(client) => {
                        Some(client.applied_to(def.oauth_client.as_ref(), &def.transport)?)
                    }
                    None => None,
                };
            }
            Ok(())
        })
        .await?;
    Ok(Json(server_view(&app, &def, &Owners::of(&app).await?)).into_response())
}

/// `DELETE /api/servers/{id}`.
pub(crate) async fn remove(app: AppState, Path(id): Path<String>) -> Answer {
    app.hub.remove_definition(&server_id(id)?).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The query of `POST /api/servers/import`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ImportQuery {
    #[serde(default)]
    replace: bool,
}

/// `POST /api/servers/import[?replace=true]`: the body is a file's text.
pub(crate) async fn import(
    app: AppState,
    Query(query): Query<ImportQuery>,
    text: String,
) -> Answer {
    let report = config::parse_any(&text).map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    let outcome = app.hub.import_definitions(report, query.replace).await?;
    let skipped: Vec<Value> = outcome
        .skipped
        .iter()
        .map(|(name, reason)| json!({"name": name, "reason": reason}))
        .collect();
    Ok(Json(json!({"imported": outcome.imported, "skipped": skipped})).into_response())
}

/// `GET /api/servers/{id}/tools`: every tool the server lists, enabled or not, with its exposed
/// name (when exposed) and settings.
pub(crate) async fn tools(app: AppState, Path(id): Path<String>) -> Answer {
    let id = server_id(id)?;
    let def = app.hub.definition(&id).await?;
    let catalog = app.hub.catalog(&id).unwrap_or_default();
    let exposed = app.hub.exposed();
    let exposed_names: std::collections::HashMap<&str, &str> = exposed
        .tools
        .iter()
        .filter(|tool| tool.server == id)
        .map(|tool| (tool.upstream.as_str(), tool.item.name.as_ref()))
        .collect();
    let tools: Vec<Value> = catalog
        .tools
        .iter()
        .chain(&catalog.disabled_tools)
        .map(|tool| {
            json!({
                "name": tool.name,
                "exposed_name": exposed_names.get(tool.name.as_ref()),
                "title": tool.title,
                "description": tool.description,
                "input_schema": tool.input_schema,
                "output_schema": tool.output_schema,
                "annotations": tool.annotations,
                "_meta": tool.meta,
                "settings": def.tool_settings(&tool.name),
            })
        })
        .collect();
    Ok(Json(json!({"server": id, "tools": tools})).into_response())
}

/// `PATCH /api/servers/{id}/tools/{tool}`.
pub(crate) async fn change_tool(
    app: AppState,
    Path((id, tool)): Path<(String, String)>,
    payload: Result<Json<ToolSettingsChange>, JsonRejection>,
) -> Answer {
    let id = server_id(id)?;
    let Json(change) = payload?;
    let def = app
        .hub
        .change_definition(&id, |def| {
            change.check().map_err(|e| e.to_string())?;
            def.change_tool(&tool, &change);
            Ok(())
        })
        .await?;
    Ok(Json(json!({"tool": tool, "settings": def.tool_settings(&tool)})).into_response())
}

/// `GET /api/servers/{id}/resources`.
pub(crate) async fn resources(app: AppState, Path(id): Path<String>) -> Answer {
    let catalog = app.hub.catalog(&server_id(id)?)?;
    Ok(Json(json!({
        "resources": catalog.resources,
        "resource_templates": catalog.resource_templates,
    }))
    .into_response())
}

/// `GET /api/servers/{id}/prompts`.
pub(crate) async fn prompts(app: AppState, Path(id): Path<String>) -> Answer {
    let catalog = app.hub.catalog(&server_id(id)?)?;
    Ok(Json(json!({"prompts": catalog.prompts})).into_response())
}

/// Which resource `GET /api/servers/{id}/resource` reads.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceQuery {
    uri: String,
}

/// `GET /api/servers/{id}/resource?uri=...`: reads one resource at the server (a listed one,
/// a template's expansion, or a `ui://` view); the server's `ReadResourceResult`.
pub(crate) async fn read_resource(
    app: AppState,
    Path(id): Path<String>,
    query: Result<Query<ResourceQuery>, axum::extract::rejection::QueryRejection>,
) -> Answer {
    let Query(query) = query.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.body_text()))?;
    let upstream = app.hub.upstream(&server_id(id)?)?;
    let read = upstream
        .read_resource(&query.uri, &CallContext::default())
        .await?;
    Ok(Json(read).into_response())
}

/// `POST /api/servers/{id}/prompts/{prompt}/get`: gets the prompt with `{"arguments": {...}}`
/// (string values); the server's `GetPromptResult`.
pub(crate) async fn get_prompt(
    app: AppState,
    Path((id, prompt)): Path<(String, String)>,
    payload: Result<Json<CallBody>, JsonRejection>,
) -> Answer {
    let Json(body) = payload?;
    let upstream = app.hub.upstream(&server_id(id)?)?;
    let got = upstream
        .get_prompt(&prompt, body.arguments, &CallContext::default())
        .await?;
    Ok(Json(got).into_response())
}

/// `POST /api/servers/{id}/complete`: the server's `completion/complete` for a prompt's or a
/// resource template's argument, with the body of that request (`{"ref", "argument",
/// "context"}`, the prompt and template as the server names them). A server that offers no
/// completions answers no values.
pub(crate) async fn complete(
    app: AppState,
    Path(id): Path<String>,
    payload: Result<Json<Value>, JsonRejection>,
) -> Answer {
    use switchboard_upstream::rmcp_model::{
        ClientRequest, CompleteRequestParams, CompleteResult, Request, ServerResult,
    };
    let Json(payload) = payload?;
    let params: CompleteRequestParams = serde_json::from_value(payload).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("give {{\"ref\", \"argument\": {{\"name\", \"value\"}}}}: {e}"),
        )
    })?;
    let id = server_id(id)?;
    // An unknown server (another workspace's among them) is 404, as on every route of one.
    app.hub.definition(&id).await?;
    let upstream = app.hub.upstream(&id)?;
    if upstream.capabilities().completions.is_none() {
        return Ok(Json(CompleteResult::default()).into_response());
    }
    match upstream
        .request(ClientRequest::CompleteRequest(Request::new(params)))
        .await?
    {
        ServerResult::CompleteResult(result) => Ok(Json(result).into_response()),
        _ => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            "the server answered completion/complete with another kind of result",
        )),
    }
}

/// The body of a call.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallBody {
    #[serde(default)]
    arguments: Option<serde_json::Map<String, Value>>,
}

/// `POST /api/servers/{id}/tools/{tool}/call`: calls the server's tool as a person trying it
/// (the caller is `direct`).
pub(crate) async fn call(
    app: AppState,
    Path((id, tool)): Path<(String, String)>,
    headers: HeaderMap,
    payload: Result<Json<CallBody>, JsonRejection>,
) -> Answer {
    let id = server_id(id)?;
    let Json(call) = payload?;
    let upstream = app.hub.upstream_for_tool(&id, &tool)?;
    app.hub
        .check_caller(&id, &tool, &switchboard_core::Caller::Direct)?;
    // The console is no client of the MCP front door: only the server's and tool's limits.
    app.hub.admit_call(&id, &tool, || None)?;
    let streams = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    let repeatable = app.hub.call_repeatable(&id, &tool);
    let mut call = call;
    call.arguments = app.hub.with_fixed_arguments(&id, &tool, call.arguments);
    let origin = app
        .hub
        .call_origin("api", None, None, &tool, call.arguments.as_ref());
    if !streams {
        let context = CallContext {
            repeatable,
            origin,
            ..Default::default()
        };
        let result = upstream.call_tool(&tool, call.arguments, &context).await?;
        return Ok(Json(result).into_response());
    }
    let (progress, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let cancel = tokio_util::sync::CancellationToken::new();
    let context = CallContext {
        progress: Some(progress),
        cancel: cancel.clone(),
        repeatable,
        origin,
        ..Default::default()
    };
    let (events, received) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let progress_event = |report: switchboard_upstream::Progress| {
        Event::default()
            .event("progress")
            .json_data(json!({
                "progress": report.progress,
                "total": report.total,
                "message": report.message,
            }))
            .unwrap_or_default()
    };
    tokio::spawn(async move {
        let running = upstream.call_tool(&tool, call.arguments, &context);
        tokio::pin!(running);
        let outcome = loop {
            tokio::select! {
                Some(report) = reports.recv() => {
                    let _ = events.send(progress_event(report));
                }
                outcome = &mut running => break outcome,
            }
        };
        while let Ok(report) = reports.try_recv() {
            let _ = events.send(progress_event(report));
        }
        let last = match outcome {
            Ok(result) => Event::default().event("result").json_data(result),
            Err(error) => Event::default()
                .event("error")
                .json_data(json!({"error": error.to_string()})),
        };
        let _ = events.send(last.unwrap_or_default());
    });
    // The stream ends when the call's task has sent its last event; dropping it before (the
    // client went away) cancels the call upstream.
    let cancel_when_dropped = cancel.drop_guard();
    let events = futures::stream::unfold(received, |mut received| async move {
        received.recv().await.map(|event| (event, received))
    })
    .map(move |event| {
        let _held = &cancel_when_dropped;
        Ok::<_, Infallible>(event)
    });
    Ok(Sse::new(events).into_response())
}

/// How long `POST /api/servers/{id}/check` waits for the check (a reconnection included).
const CHECK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// `POST /api/servers/{id}/check`: checks one server now (a connected one is asked whether it
/// still answers and reconnected when it does not; one waiting to reconnect tries at once) and
/// shows it as `GET /api/servers/{id}` does once the check is done.
pub(crate) async fn check(app: AppState, Path(id): Path<String>) -> Answer {
    let id = server_id(id)?;
    let def = app.hub.definition(&id).await?;
    if !def.enabled {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!("server '{id}' is disabled; enable it to connect it"),
        ));
    }
    app.hub.check_now(&id, CHECK_WAIT).await?;
    let owners = Owners::of(&app).await?;
    Ok(Json(server_view(&app, &def, &owners)).into_response())
}

/// `POST /api/servers/{id}/logout`: revokes the server's tokens where it supports that, deletes
/// them, and restarts it (so it shows that it needs a sign-in).
pub(crate) async fn logout(app: AppState, Path(id): Path<String>) -> Answer {
    let id = server_id(id)?;
    let done = app
        .hub
        .sign_out(&id)
        .await
        .map_err(|error| error.api_error())?;
    Ok(Json(json!({"signed_out": done.signed_out, "revoked": done.revoked})).into_response())
}

/// The body of `PUT /api/servers/{id}/my-settings`: a user's own headers (HTTP, WebSocket) or
/// environment values (stdio) for a shared server, and the tools they pin.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MySettingsBody {
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    env: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pinned: std::collections::BTreeSet<String>,
}

/// Settings as shown: secret values as `********`.
fn my_settings_view(settings: &switchboard_core::UserServerSettings) -> Response {
    let values: Vec<Value> = settings
        .values
        .iter()
        .map(|v| json!({"name": v.name, "value": v.display_value(), "secret": v.secret}))
        .collect();
    Json(json!({"values": values, "pinned": settings.pinned})).into_response()
}

/// `GET /api/servers/{id}/my-settings`: the caller's own settings for a server their tenant
/// shares.
pub(crate) async fn my_settings(app: AppState, Path(id): Path<String>) -> Answer {
    let id = server_id(id)?;
    let settings = app.hub.my_settings(&id).await.map_err(HubError::from)?;
    Ok(my_settings_view(&settings))
}

/// `PUT /api/servers/{id}/my-settings`: replaces them (a value written back as `********`
/// keeps the stored one); the server restarts with them in the caller's workspace.
pub(crate) async fn put_my_settings(
    app: AppState,
    Path(id): Path<String>,
    body: Result<Json<MySettingsBody>, JsonRejection>,
) -> Answer {
    let id = server_id(id)?;
    let Json(body) = body?;
    let values = body.headers.into_iter().chain(body.env);
    let settings = app.hub.put_my_settings(&id, values, body.pinned).await?;
    Ok(my_settings_view(&settings))
}

/// `DELETE /api/servers/{id}/my-settings`: forgets them.
pub(crate) async fn delete_my_settings(app: AppState, Path(id): Path<String>) -> Answer {
    let id = server_id(id)?;
    app.hub.forget_my_settings(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_core::{OAuthClient, OAuthGrant, TransportSpec};

    fn change(value: Value) -> OAuthClientChange {
        serde_json::from_value(value).expect("a client change")
    }

    #[test]
    fn an_oauth_client_change_keeps_a_masked_secret_and_the_cli_only_settings_of_the_same_client() {
        let http = TransportSpec::from_url("https://mcp.example.com/mcp", vec![]).unwrap();
        let stored = OAuthClient {
            client_id: "app".into(),
            client_secret: Some("real secret".into()),
            issuer: None,
            grant: OAuthGrant::AuthorizationCode,
            private_key_pem: Some("PEM".into()),
            signing_algorithm: Some("ES256".into()),
            redirect_uri: Some("http://127.0.0.1:8976/callback".into()),
        };
        let kept = change(json!({"client_id": "app", "client_secret": "********",
                                 "issuer": "https://auth.example.com", "grant": "client-credentials"}))
        .applied_to(Some(&stored), &http)
        .unwrap();
        assert_eq!(kept.client_secret.as_deref(), Some("real secret"));
        assert_eq!(kept.issuer.as_deref(), Some("https://auth.example.com"));
        assert_eq!(kept.grant, OAuthGrant::ClientCredentials);
        assert_eq!(kept.private_key_pem.as_deref(), Some("PEM"));
        assert_eq!(kept.redirect_uri, stored.redirect_uri);

        // Another client gets nothing of the old one's, and a masked secret means nothing to it.
        let other = change(json!({"client_id": "other", "client_secret": "new"}))
            .applied_to(Some(&stored), &http)
            .unwrap();
        assert_eq!(other.client_secret.as_deref(), Some("new"));
        assert_eq!((other.private_key_pem, other.redirect_uri), (None, None));
        let refused = change(json!({"client_id": "other", "client_secret": "********"}))
            .applied_to(Some(&stored), &http)
            .unwrap_err();
        assert!(refused.contains("masked"), "{refused}");

        for (bad, words) in [
            (json!({"client_id": " "}), "client id"),
            (
                json!({"client_id": "a", "issuer": "not a url"}),
                "not a URL",
            ),
            (
                json!({"client_id": "a", "issuer": "file:///etc/passwd"}),
                "http(s)",
            ),
        ] {
            let error = change(bad).applied_to(None, &http).unwrap_err();
            assert!(error.contains(words), "{error}");
        }
        let stdio = TransportSpec::stdio("node", vec![], vec![], None).unwrap();
        let error = change(json!({"client_id": "a"}))
            .applied_to(None, &stdio)
            .unwrap_err();
        assert!(error.contains("HTTP servers only"), "{error}");
        assert!(
            serde_json::from_value::<OAuthClientChange>(json!({"client_id": "a", "extra": 1}))
                .is_err()
        );
    }
}

/// `GET /api/servers/{id}/definitions`: its tools whose definitions are not the approved ones,
/// each with the approved and the current definition (and whether it is held back).
pub(crate) async fn changed_definitions(app: AppState, Path(id): Path<String>) -> Answer {
    let id = server_id(id)?;
    app.hub.definition(&id).await?;
    Ok(Json(app.hub.changed_definitions(&id)?).into_response())
}

/// The body of an acceptance: the SHA-256 of the definition the person saw.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcceptBody {
    #[serde(default)]
    sha256: Option<String>,
}

/// `POST /api/servers/{id}/definitions/{tool}/accept` with `{"sha256"?}`: the tool's current
/// definition becomes the approved one, and a held tool is served again (204); 404 when there
/// is none waiting, 409 when it changed again since the one named.
pub(crate) async fn accept_definition(
    app: AppState,
    Path((id, tool)): Path<(String, String)>,
    body: Option<Json<AcceptBody>>,
) -> Answer {
    let id = server_id(id)?;
    app.hub.definition(&id).await?;
    let seen = body.and_then(|Json(body)| body.sha256);
    app.hub
        .accept_definition(&id, &tool, seen.as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
