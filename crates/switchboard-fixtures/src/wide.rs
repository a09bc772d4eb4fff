//! Many small stateless servers behind one listener, for scale measurements.
//!
//! [`serve_many`] answers `http://127.0.0.1:<port>/s/<i>/mcp` for `i` in `0..servers`, each a
//! 2026-07-28 stateless server with `tools` tools (`tool_0`, ...) plus `grow`, which adds one
//! more tool and announces the change on the server's `subscriptions/listen` streams.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{RequestContext, RoleServer, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// One of the many servers.
#[derive(Clone)]
struct WideServer {
    /// How many `tool_*` tools it lists; `grow` adds one.
    tools: Arc<AtomicUsize>,
    /// Bumped on every change, for listen streams.
    changes: Arc<watch::Sender<usize>>,
}

impl WideServer {
    fn tool(name: String) -> Tool {
        let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let schema = match schema {
            serde_json::Value::Object(map) => Arc::new(map),
            _ => Arc::default(),
        };
        Tool::new(name, "A tool of a wide fixture server", schema)
    }
}

impl ServerHandler for WideServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("switchboard-wide-fixture", "1.0.0"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Owned(vec![ProtocolVersion::V_2026_07_28])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools: Vec<Tool> = (0..self.tools.load(Ordering::SeqCst))
            .map(|k| Self::tool(format!("tool_{k}")))
            .collect();
        tools.push(Self::tool("grow".into()));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name == "grow" {
            self.tools.fetch_add(1, Ordering::SeqCst);
            self.changes.send_modify(|n| *n += 1);
        }
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("ok"),
        ])))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.changes.subscribe();
        changes.borrow_and_update();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// Serves `servers` servers of `tools` tools each on one loopback listener until `stop`;
/// returns their URLs (`.../s/<i>/mcp`).
pub async fn serve_many(
    servers: usize,
    tools: usize,
    stop: CancellationToken,
) -> std::io::Result<Vec<String>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let mut router = axum::Router::new();
    for i in 0..servers {
        let server = WideServer {
            tools: Arc::new(AtomicUsize::new(tools)),
            changes: Arc::new(watch::channel(0).0),
        };
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default()
                .with_sse_keep_alive(None)
                .with_cancellation_token(stop.child_token()),
        );
        router = router.nest_service(&format!("/s/{i}/mcp"), service);
    }
    crate::transports::spawn_router(listener, router, stop, None);
    Ok((0..servers)
        .map(|i| format!("http://{addr}/s/{i}/mcp"))
        .collect())
}
