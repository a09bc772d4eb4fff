//! The full path of `tools/call`: admission ([`super::admission`]), approval, guardrails,
//! tasks, and the exchange with the server that may ask the client for input on the way.

use futures::FutureExt;
use rmcp::model::{CallToolRequestParams, CallToolResponse, ErrorData, ServerResult};
use rmcp::service::{RequestContext, RoleServer};
use switchboard_core::sync::lock;
use switchboard_core::{ServerId, TaskMode};
use switchboard_hub::{ExposeUris, ExposedCatalog};
use switchboard_upstream::UpstreamError;
use tracing::Instrument;

use super::exchange::{Exchange, Outcome};
pub use deferred::ToolsView;

use super::*;

impl AggregateServer {
    /// Runs (or, with a `requestState`, resumes) an upstream request for `context`.
    pub(super) async fn exchange<F>(
        &self,
        purpose: String,
        request_state: Option<String>,
        input_responses: Option<rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
        patience: std::time::Duration,
        work: F,
    ) -> Result<Outcome, ErrorData>
    where
        F: FnOnce(
            switchboard_upstream::CallContext,
        )
            -> futures::future::BoxFuture<'static, Result<ServerResult, UpstreamError>>,
    {
        let running = self
            .exchange_until(
                purpose,
                request_state,
                input_responses,
                context,
                patience,
                None,
                work,
            )
            .await?;
        // Without a deadline it never comes back unfinished.
        Ok(running.unwrap_or_else(|_| Outcome::Done(Err(UpstreamError::Closed))))
    }

    /// [`Self::exchange`], but an exchange still running at `deadline` (without an outcome or
    /// a question for the client) comes back unfinished (`Err`), to become a task.
    #[expect(
        clippy::too_many_arguments,
        reason = "the request's parts, each used once; a struct would only rename them"
    )]
    pub(super) async fn exchange_until<F>(
        &self,
        purpose: String,
        request_state: Option<String>,
        input_responses: Option<rmcp::model::InputResponses>,
        context: &RequestContext<RoleServer>,
        patience: std::time::Duration,
        deadline: Option<tokio::time::Instant>,
        work: F,
    ) -> Result<Result<Outcome, Exchange>, ErrorData>
    where
        F: FnOnce(
            switchboard_upstream::CallContext,
        )
            -> futures::future::BoxFuture<'static, Result<ServerResult, UpstreamError>>,
    {
        if let Some(responses) = &input_responses {
            exchange::check_input_responses(responses)?;
        }
        // Counted until the outcome is in hand, so a shutdown lets it finish.
        let _in_flight = self.shared.in_flight.token();
        let forward = downstream::Forwarder::new(context, self.log_level(), patience);
        // A state of ours resumes the exchange parked under it; any other goes to the server,
        // which issued it to the client through the short path (`short_path`).
        let exchange = match request_state {
            Some(handle) if self.shared.parked.holds(&handle) => {
                let mut exchange = self.shared.parked.resume(&handle, &purpose)?;
                exchange.deliver(input_responses);
                exchange
            }
            foreign => Exchange::start(
                purpose,
                input_responses,
                foreign,
                self.client_key(context),
                context,
                &forward,
                work,
            ),
        };
        Ok(exchange
            .advance_until(context, &forward, &self.shared.parked, deadline)
            .await)
    }
}

/// What the client gets for a `tools/call` its server answered with `result`: the result with
/// exposed names and URIs, the server's input requests as they are, the server's JSON-RPC error;
/// a failure of the server itself is a tool error the model can read.
pub(super) fn call_result(
    catalog: &ExposedCatalog,
    server: &ServerId,
    result: Result<ServerResult, UpstreamError>,
) -> Result<CallToolResponse, ErrorData> {
    match result {
        Ok(ServerResult::CallToolResult(result)) => Ok(CallToolResponse::Complete(complete(
            result.exposed(&prefix_of(catalog, server)),
        ))),
        Ok(ServerResult::InputRequiredResult(required)) => {
            Ok(CallToolResponse::InputRequired(required))
        }
        Ok(_) => Err(ErrorData::internal_error(
            format!("server '{server}' answered tools/call with another kind of result"),
            None,
        )),
        Err(error) => crate::wire::tool_call_failure(server, error).map(CallToolResponse::Complete),
    }
}

impl AggregateServer {
    /// `tools/call`, inside its span.
    pub(super) async fn call_tool_traced(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.tools_view(&context) == ToolsView::Deferred {
            match request.name.as_ref() {
                deferred::SEARCH_TOOLS => return self.search_for_client(&request, &context).await,
                deferred::DESCRIBE_TOOLS => return self.describe_for_client(&request, &context),
                deferred::LIST_SERVERS => return self.list_servers_for_client(&context),
                deferred::SET_ACTIVE => {
                    return self.set_active_for_client(&request, &context).await;
                }
                deferred::CALL_TOOL => {
                    let (name, arguments) = deferred::call_arguments(request.arguments.as_ref())?;
                    request.name = name.into();
                    request.arguments = arguments;
                }
                _ => {}
            }
        }
        let catalog = self.catalog();
        let admission = self.admission(&context);
        let tool = admission.tool(&catalog, &request.name)?;
        let server = tool.server.clone();
        let parts = context.extensions.get::<axum::http::request::Parts>();
        let exposed = request.name.clone();
        // The checks admitting the call, in a span of their own; then its server, once ready.
        let admission_span = switchboard_telemetry::admission_span();
        admission.admit(
            tool,
            self.hub().server_view(&server).ok().as_ref(),
            &exposed,
            caller::caller_of(&request, &context.meta, parts),
            request.arguments.as_ref(),
            &admission_span,
        )?;
        let ready = async {
            self.shared.subscribing.settled(&server).await;
            self.upstream_soon(&server, Some(&tool.upstream), &context)
                .await
        }
        .instrument(admission_span.clone())
        .await;
        if let Err(error) = &ready {
            trace_error(&admission_span, error);
            admission.audit_refusal(tool, &exposed, request.arguments.as_ref(), error);
        }
        let upstream = ready?;
        // A call refused on its way is recorded, with the arguments it had then.
        let refused = |error: &ErrorData, arguments: Option<&rmcp::model::JsonObject>| {
            admission.audit_refusal(tool, &exposed, arguments, error);
        };
        // A called tool joins a deferred session's working set.
        if self.tools_view(&context) == ToolsView::Deferred
            && lock(&self.session.working_set).called(&request.name)
            && !downstream::is_modern(&context)
        {
            let _ = context.peer.notify_tool_list_changed().await;
        }
        let name = tool.upstream.clone();
        let arguments = self
            .hub()
            .with_fixed_arguments(&server, &name, request.arguments.take());
        // A call that needs a person's approval waits for it here, with the exact arguments
        // the server would get; nothing is sent unless they approve.
        let destructive = tool
            .item
            .annotations
            .as_ref()
            .and_then(|hints| hints.destructive_hint)
            == Some(true);
        if let Some(wait) = self.hub().approval_wait(&server, &name, destructive) {
            self.hub()
                .approve_call(&server, &name, &request.name, arguments.as_ref(), wait)
                .await
                .map_err(|not_approved| {
                    let error = not_approved.json_rpc();
                    refused(&error, arguments.as_ref());
                    error
                })?;
        }
        // Guardrails: the arguments masked and checked before the server gets them.
        let guardrails = self.hub().guardrails(&server);
        let guarded = switchboard_hub::GuardedCall {
            server: &server,
            tool: &tool.upstream,
            exposed: &exposed,
        };
        let arguments = match &guardrails {
            Some(guardrails) => self
                .hub()
                .guard_arguments(guardrails, guarded, arguments)
                .await
                .map_err(|stopped| {
                    let error = stopped.json_rpc();
                    refused(&error, None);
                    error
                })?,
            None => arguments,
        };
        let checked_arguments = guardrails.as_ref().map(|_| arguments.clone());
        // Recorded as the server gets it: with the arguments an admin fixed.
        let origin = admission.origin(&request.name, arguments.as_ref());
        let patience = upstream.timeouts().tool_call;
        // The tasks extension: how this call may become a task, if its client can take one.
        let takes_tasks = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        // Looked up again: the server may have reconnected (a new slot) while the call waited.
        let server_now = self.hub().server_view(&server).ok();
        let task_mode = admission::task_mode(
            server_now.as_ref(),
            tool,
            &exposed,
            takes_tasks,
            guardrails.is_some(),
        )?;
        let repeatable = self.hub().call_repeatable(&server, &name);
        let work = move |mut call: switchboard_upstream::CallContext| {
            call.repeatable = repeatable;
            call.origin = origin.clone();
            async move {
                upstream
                    .call_tool(&name, arguments, &call)
                    .await
                    .map(ServerResult::CallToolResult)
            }
            .boxed()
        };
        let purpose = format!("tools/call {}", request.name);
        let request_state = request.request_state.take();
        let input_responses = request.input_responses.take();
        let outcome = match task_mode {
            TaskMode::Forbidden => {
                self.exchange(
                    purpose,
                    request_state,
                    input_responses,
                    &context,
                    patience,
                    work,
                )
                .await?
            }
            mode => {
                // A required task is one from the start.
                let deadline = match mode {
                    TaskMode::Required => tokio::time::Instant::now(),
                    _ => tokio::time::Instant::now() + tasks::TASK_AFTER,
                };
                let running = self
                    .exchange_until(
                        purpose,
                        request_state,
                        input_responses,
                        &context,
                        patience,
                        Some(deadline),
                        work,
                    )
                    .await?;
                match running {
                    Ok(outcome) => outcome,
                    Err(exchange) => {
                        let finish: tasks::Finish = Box::new(move |outcome| {
                            match call_result(&catalog, &server, outcome) {
                                Ok(response) => tasks::payload(Ok(ServerResult::from(response))),
                                Err(error) => tasks::payload(Err::<ServerResult, _>(error)),
                            }
                        });
                        let task = self.shared.tasks.start(exchange, finish)?;
                        return Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                            task,
                        )));
                    }
                }
            }
        };
        match outcome {
            Outcome::InputRequired(required) => Ok(CallToolResponse::InputRequired(required)),
            Outcome::Done(result) => match (call_result(&catalog, &server, result)?, &guardrails) {
                // Guardrails: the result checked and masked before the client gets it.
                (CallToolResponse::Complete(result), Some(guardrails)) => {
                    let arguments = checked_arguments.flatten();
                    Ok(CallToolResponse::Complete(
                        self.hub()
                            .guard_result(guardrails, guarded, arguments.as_ref(), result)
                            .await,
                    ))
                }
                (response, _) => Ok(response),
            },
        }
    }
}
