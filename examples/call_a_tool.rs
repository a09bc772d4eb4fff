//! Switchboard's connection library in a small program: connect to one server of a Switchboard
//! configuration file, list its tools, and call one.
//!
//! ```text
//! cargo run -p switchboard-upstream --example call_a_tool -- examples/switchboard.toml everything
//! cargo run -p switchboard-upstream --example call_a_tool -- examples/switchboard.toml everything echo '{"message": "hi"}'
//! ```
//!
//! `connect` probes the server's transport and protocol era (stdio, Streamable HTTP with or
//! without sessions, HTTP+SSE, WebSocket) as the daemon does; the `Upstream` it gives calls the
//! server directly. Checked by `crates/switchboard-upstream/tests/examples.rs`.

use switchboard_upstream::{CallContext, ConnectOptions, connect};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(config), Some(server)) = (args.next(), args.next()) else {
        return Err("usage: call_a_tool <config.toml> <server> [<tool> [<JSON arguments>]]".into());
    };
    let (tool, arguments) = (args.next(), args.next());

    let report = switchboard_core::config::parse_toml(&std::fs::read_to_string(&config)?)?;
    let definition = report
        .servers
        .iter()
        .find(|definition| definition.id.as_str() == server)
        .ok_or_else(|| format!("{config} has no usable server {server}"))?;
    let connection = connect(definition, None, &ConnectOptions::new("call_a_tool")).await?;
    let upstream = &connection.upstream;

    let Some(tool) = tool else {
        for tool in upstream.list_tools().await? {
            let description = tool.description.as_deref().unwrap_or("");
            println!(
                "{}\t{}",
                tool.name,
                description.lines().next().unwrap_or("")
            );
        }
        return Ok(());
    };
    let arguments = match arguments {
        Some(text) => match serde_json::from_str(&text)? {
            serde_json::Value::Object(arguments) => Some(arguments),
            _ => return Err("the arguments must be a JSON object".into()),
        },
        None => None,
    };
    let result = upstream
        .call_tool(&tool, arguments, &CallContext::default())
        .await?;
    for content in &result.content {
        match content.as_text() {
            Some(text) => println!("{}", text.text),
            None => println!("{}", serde_json::to_string(content)?),
        }
    }
    if result.is_error == Some(true) {
        return Err(format!("{tool} answered with an error").into());
    }
    Ok(())
}
