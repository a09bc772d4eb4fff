//! The conformance "everything" server over Streamable HTTP, for `.ci/conformance.sh`:
//! `switchboard-conformance-everything --port <port> [--legacy-only]` serves
//! `http://127.0.0.1:<port>/mcp` until killed: legacy sessions and stateless 2026-07-28 requests
//! on the one path, or with `--legacy-only` the revisions up to 2025-11-25 only.

use switchboard_fixtures::conformance::{ConformanceServer, http_service};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (port, legacy_only) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--port", port] => (port.parse::<u16>(), false),
        ["--port", port, "--legacy-only"] => (port.parse::<u16>(), true),
        _ => {
            eprintln!("usage: switchboard-conformance-everything --port <port> [--legacy-only]");
            std::process::exit(2);
        }
    };
    let Ok(port) = port else {
        eprintln!("the port must be a number from 0 to 65535");
        std::process::exit(2);
    };
    let mut server = ConformanceServer::new();
    if legacy_only {
        server = server.legacy_only();
    }
    let service = http_service(server, Default::default());
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on 127.0.0.1:{port}: {error}");
            std::process::exit(1);
        }
    };
    eprintln!("conformance everything server on http://127.0.0.1:{port}/mcp");
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    if let Err(error) = axum::serve(listener, router).await {
        eprintln!("server failed: {error}");
        std::process::exit(1);
    }
}
