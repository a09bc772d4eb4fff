//! `switchboard-conformance`: the client the official MCP conformance suite drives.
//!
//! The harness runs `switchboard-conformance <server-url>` with `MCP_CONFORMANCE_SCENARIO` (and
//! sometimes `MCP_CONFORMANCE_CONTEXT`) set. The adapter connects through exactly the code the CLI
//! and daemon use (`switchboard_upstream::connect`: era probe, transports, input policy), then acts
//! out the scenario: list, call the named tools, read, get prompts. It exits 0 when the scenario's
//! steps succeeded and 1 otherwise, and gives up by itself after a deadline so a stuck server can
//! never hang the suite.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use switchboard_core::{ServerDefinition, ServerId, TransportSpec};
use switchboard_oauth::{
    AuthSettings, ClientIdentity, ConfiguredClient, EnterpriseIdp, GrantKey, GrantKind,
    HeadlessAuthorizer, MemoryCredentialStore, NetworkPolicy, OAuthHttp, ServerAuth,
    WorkloadAssertion,
};
use switchboard_upstream::rmcp_model::Tool;
use switchboard_upstream::{
    CallContext, ConnectOptions, InputPolicy, Upstream, UpstreamError, connect,
};

/// The adapter's own deadline, below the harness's 30 s default.
const DEADLINE: Duration = Duration::from_secs(25);

#[derive(Debug, thiserror::Error)]
enum AdapterError {
    #[error("usage: switchboard-conformance <server-url>")]
    Usage,
    #[error("MCP_CONFORMANCE_CONTEXT is not valid JSON: {0}")]
    Context(serde_json::Error),
    #[error("invalid server URL: {0}")]
    Url(String),
    #[error("{0}")]
    Upstream(#[from] UpstreamError),
    #[error("the server has no tool '{0}'")]
    MissingTool(String),
    #[error("the tool '{0}' reported an error")]
    ToolFailed(String),
    #[error("the scenario did not finish within {0:?}")]
    Deadline(Duration),
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let code = runtime.block_on(async {
        match tokio::time::timeout(DEADLINE, run()).await {
            Ok(Ok(())) => 0,
            Ok(Err(error)) => {
                eprintln!("switchboard-conformance: {error}");
                1
            }
            Err(_) => {
                eprintln!(
                    "switchboard-conformance: {}",
                    AdapterError::Deadline(DEADLINE)
                );
                1
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    std::process::exit(code);
}

async fn run() -> Result<(), AdapterError> {
    let url = std::env::args().nth(1).ok_or(AdapterError::Usage)?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = match std::env::var("MCP_CONFORMANCE_CONTEXT") {
        Ok(text) => serde_json::from_str(&text).map_err(AdapterError::Context)?,
        Err(_) => Value::Null,
    };
    let transport =
        TransportSpec::from_url(&url, vec![]).map_err(|e| AdapterError::Url(e.to_string()))?;
    let mut definition =
        ServerDefinition::new(ServerId::new("conformance").expect("a valid id"), transport);
    definition.timeouts.request = Duration::from_secs(10);
    definition.timeouts.tool_call = Duration::from_secs(15);
    let mut options = ConnectOptions::new(env!("CARGO_PKG_VERSION"));
    // The suite checks that elicitation is answered with the schema's defaults.
    options.input_policy = InputPolicy::AcceptDefaults;
    options.auth = Some(Arc::new(server_auth(&url, &scenario, &context)?));

    let connection = connect(&definition, None, &options).await?;
    let upstream = connection.upstream.clone();
    let outcome = act_out(&scenario, &context, &upstream).await;
    connection.session.close().await;
    outcome
}

/// Where the suite's mock authorization servers expect Switchboard's client ID metadata document
/// (the adapter plays a deployment whose public URL serves it there).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";
/// Nothing listens here: the headless authorizer reads the redirect from `Location`.
const REDIRECT_URI: &str = "http://127.0.0.1:8750/oauth/callback";

/// The OAuth state of the one server under test: the library's flow with the headless
/// authorizer, credentials in memory, and client credentials from the scenario's context.
fn server_auth(url: &str, scenario: &str, context: &Value) -> Result<ServerAuth, AdapterError> {
    let server_url = url::Url::parse(url).map_err(|e| AdapterError::Url(e.to_string()))?;
    let http = OAuthHttp::new(NetworkPolicy::for_server(&server_url, false, false));
    let text = |key: &str| context.get(key).and_then(Value::as_str).map(str::to_owned);
    let client = text("client_id").map(|client_id| ConfiguredClient {
        client_id,
        client_secret: text("client_secret"),
        private_key_pem: text("private_key_pem"),
        signing_algorithm: text("signing_algorithm"),
        auth_method: None,
    });
    let grant = match scenario {
        s if s.starts_with("auth/client-credentials") => GrantKind::ClientCredentials,
        "auth/wif-jwt-bearer" => GrantKind::WorkloadIdentity(WorkloadAssertion::Value(
            text("valid_jwt").unwrap_or_default(),
        )),
        "auth/enterprise-managed-authorization" => GrantKind::EnterpriseManaged(EnterpriseIdp {
            token_endpoint: text("idp_token_endpoint").unwrap_or_default(),
            client_id: text("idp_client_id"),
            client_secret: None,
            id_token: text("idp_id_token").unwrap_or_default(),
        }),
        _ => GrantKind::AuthorizationCode,
    };
    let identity = ClientIdentity {
        metadata_document_url: url::Url::parse(CLIENT_METADATA_URL).ok(),
        ..ClientIdentity::default()
    };
    let settings = AuthSettings {
        client,
        client_issuer: text("issuer"),
        grant,
        dpop: false,
    };
    Ok(ServerAuth::new(
        server_url,
        GrantKey::for_server("conformance"),
        http.clone(),
        identity,
        settings,
        Arc::new(MemoryCredentialStore::default()),
    )
    .with_authorizer(Arc::new(HeadlessAuthorizer::new(http, REDIRECT_URI))))
}

async fn act_out(scenario: &str, context: &Value, upstream: &Upstream) -> Result<(), AdapterError> {
    let tools = upstream.list_tools().await?;
    match scenario {
        "tools_call" => {
            call(upstream, &tools, "add_numbers", json!({"a": 5, "b": 3})).await?;
        }
        "elicitation-sep1034-client-defaults" => {
            call(
                upstream,
                &tools,
                "test_client_elicitation_defaults",
                json!({}),
            )
            .await?;
        }
        "sse-retry" => {
            call(upstream, &tools, "test_reconnection", json!({})).await?;
        }
        "sep-2322-client-request-state" => {
            for name in [
                "test_mrtr_echo_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_state",
                "test_mrtr_no_result_type",
            ] {
                call(upstream, &tools, name, json!({})).await?;
            }
        }
        "http-standard-headers" => {
            if let Some(tool) = tools.first() {
                call(upstream, &tools, &tool.name, json!({})).await?;
            }
            for resource in upstream.list_resources().await? {
                upstream
                    .read_resource(&resource.uri, &CallContext::default())
                    .await?;
            }
            for prompt in upstream.list_prompts().await? {
                upstream
                    .get_prompt(&prompt.name, None, &CallContext::default())
                    .await?;
            }
        }
        "http-invalid-tool-headers" => {
            call(
                upstream,
                &tools,
                "valid_tool",
                json!({"region": "us-west1"}),
            )
            .await?;
        }
        "json-schema-2020-12-preservation" => {
            let schema = tools
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .map(|t| Value::Object((*t.input_schema).clone()))
                .ok_or_else(|| AdapterError::MissingTool("json_schema_2020_12_tool".into()))?;
            call(
                upstream,
                &tools,
                "json_schema_echo",
                json!({"schema": schema}),
            )
            .await?;
        }
        // Auth scenarios protect every request; calling their tool exercises the token on a
        // real call (and, in auth/scope-step-up, the 403 that asks for more scope).
        auth if auth.starts_with("auth/") => {
            call(upstream, &tools, "test-tool", json!({})).await?;
        }
        _ => {}
    }
    // Scenarios that hand over tool calls in their context (e.g. http-custom-headers).
    if let Some(calls) = context.get("toolCalls").and_then(Value::as_array) {
        for tool_call in calls {
            let name = tool_call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let arguments = tool_call.get("arguments").cloned().unwrap_or(json!({}));
            call(upstream, &tools, name, arguments).await?;
        }
    }
    Ok(())
}

async fn call(
    upstream: &Upstream,
    tools: &[Tool],
    name: &str,
    arguments: Value,
) -> Result<(), AdapterError> {
    if !tools.iter().any(|t| t.name == name) {
        return Err(AdapterError::MissingTool(name.into()));
    }
    let arguments: Option<Map<String, Value>> = arguments.as_object().cloned();
    let result = upstream
        .call_tool(name, arguments, &CallContext::default())
        .await?;
    if result.is_error == Some(true) {
        return Err(AdapterError::ToolFailed(name.into()));
    }
    Ok(())
}
