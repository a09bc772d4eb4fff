//! The web console at `/`, used by a person in a real browser (headless Chromium driven by
//! playwright-core: `tests/npm/console.mjs`) against a running daemon with the real
//! `@modelcontextprotocol/server-everything`: add a server, see it connect, filter its tools,
//! turn one off and on, run tools from the generated form with progress, cancel a long call,
//! answer a server's question and the built-in human server's in the console's dialogs.

// A test's helpers may unwrap and lock directly: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

mod common;

use std::time::Duration;

use serde_json::{Value, json};

/// Runs the browser script `script` of `tests/npm` (at `npm`) with `args` and the screenshot
/// directory, if `SWITCHBOARD_SCREENSHOTS` names one, within `limit`; what it printed.
async fn browser(npm: &std::path::Path, script: &str, args: &[&str], limit: Duration) -> Value {
    let screenshots = std::env::var("SWITCHBOARD_SCREENSHOTS").ok();
    let output = tokio::time::timeout(
        limit,
        tokio::process::Command::new("node")
            .arg(npm.join(script))
            .args(args)
            .args(screenshots.iter())
            .env("CHROMIUM", common::chromium())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("the browser finishes within {limit:?}"))
    .unwrap();
    assert!(
        output.status.success(),
        "the browser: {}",
        common::text(&output)
    );
    serde_json::from_slice(&output.stdout).expect("the browser prints JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_adds_a_server_and_runs_its_tools_from_the_console() {
    let npm = common::npm_dir(&[
        "playwright-core",
        "@modelcontextprotocol/server-everything",
        "@modelcontextprotocol/server-basic-vanillajs",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, port) = common::spawn_daemon(dir.path());
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if reqwest::get(format!("{base}/healthz")).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let page = reqwest::get(format!("{base}/")).await.unwrap();
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"));

    let everything = switchboard_fixtures::server_everything_entry();
    let seen = browser(
        &npm,
        "console.mjs",
        &[&base, &everything.to_string_lossy()],
        Duration::from_secs(180),
    )
    .await;

    assert_eq!(seen["empty"], true, "an empty daemon says so: {seen:#}");
    assert_eq!(seen["formsHiddenAtFirst"], true, "{seen:#}");
    assert_eq!(
        seen["refused"], "Switchboard is shutting down; try again shortly",
        "a JSON-RPC refusal is shown by its message: {seen:#}"
    );
    let tested = seen["tested"].as_str().unwrap();
    assert!(
        tested.contains("mcp-servers/everything") && tested.contains("tools"),
        "{tested}"
    );
    assert_eq!(seen["storedAfterTest"], 0, "a test stores nothing");
    assert_eq!(seen["message"], "Added everything.");
    assert_eq!(seen["formHiddenAfterAdding"], true, "{seen:#}");
    let card = seen["card"].as_str().unwrap();
    assert!(
        card.contains("connected") && card.contains("tools"),
        "{card}"
    );
    assert!(seen["tools"].as_u64().unwrap() > 5, "{seen:#}");
    assert_eq!(
        seen["filtered"],
        serde_json::json!(["trigger-long-running-operation"])
    );
    assert!(
        seen["progress"].as_str().unwrap().contains("of 4"),
        "{seen:#}"
    );
    assert!(
        seen["longResult"].as_str().unwrap().contains("completed"),
        "{seen:#}"
    );
    assert!(
        seen["echoResult"]
            .as_str()
            .unwrap()
            .contains("Echo: hello from the console"),
        "{seen:#}"
    );
    let requests = seen["inspectorRequests"].as_array().unwrap();
    assert!(
        !requests.is_empty() && requests.iter().all(|kind| kind == "request"),
        "the filter shows requests only: {requests:?}"
    );
    assert_eq!(
        (
            &seen["inspectedCall"]["method"],
            &seen["inspectedCall"]["params"]["name"]
        ),
        (&serde_json::json!("tools/call"), &serde_json::json!("echo")),
        "{seen:#}"
    );
    assert_eq!(seen["cancelled"], true);
    assert_eq!(
        seen["question"],
        "Please provide inputs for the following fields:"
    );
    let elicited = seen["elicitResult"].as_str().unwrap();
    for answered in ["- Name: Ada Lovelace", "hero-3", "fish-2", "fish-3"] {
        assert!(elicited.contains(answered), "{answered} in {elicited}");
    }
    assert_eq!(
        seen["toolsAfterLateAnswer"],
        json!(["ask", "confirm", "choose", "approve_plan", "request_file"]),
        "the server opened last shows its own tools, whatever answers late: {seen:#}"
    );
    let confirm = seen["confirmQuestion"].as_str().unwrap();
    assert!(
        confirm.contains("human · confirm") && confirm.contains("Deploy to production?"),
        "{confirm}"
    );
    assert!(
        seen["confirmResult"]
            .as_str()
            .unwrap()
            .contains("Yes, confirmed."),
        "{seen:#}"
    );
    assert!(seen["resources"].as_u64().unwrap() > 0);
    assert_eq!(seen["resourceRead"], true, "{seen:#}");
    assert_eq!(seen["prompt"], "user: What's weather in Lisbon?");
    let activity: Vec<&str> = seen["activity"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        activity
            .iter()
            .any(|line| line.contains("everything/echo: ok")),
        "{activity:?}"
    );
    // The MCP App: shown the tool's result, then calling the server itself, in an opaque
    // origin.
    let first = seen["appFirstTime"].as_str().unwrap();
    let second = seen["appSecondTime"].as_str().unwrap();
    assert!(
        first.contains('T') && second > first,
        "{first} then {second}"
    );
    assert_eq!(
        seen["viewOrigin"], "null",
        "the view runs in an opaque origin"
    );
    assert!(
        seen["appFrameHeight"].as_str().unwrap().ends_with("px"),
        "the frame took the height the app asked for: {seen:#}"
    );
    assert_eq!(seen["appMessage"], "get-time app says: hello from the app");
    assert!(
        seen["appLog"]
            .as_str()
            .unwrap()
            .contains("info logged by the app"),
        "{seen:#}"
    );
    // The layout: the form beside the tool, in view at 1280x800; one column on a phone.
    assert_eq!(
        seen["tryBeside"],
        json!({"inView": true, "besideTheTool": true}),
        "{seen:#}"
    );
    assert!(seen["phoneOverflow"].as_i64().unwrap() <= 0, "{seen:#}");
    // Results as a client shows them.
    assert_eq!(seen["image"], true, "{seen:#}");
    assert_eq!(seen["clearedOnOpen"], true, "{seen:#}");
    let tree: Vec<&str> = seen["tree"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tree.contains(&"temperature: ") && tree.contains(&"conditions: "),
        "{tree:?}"
    );
    assert_eq!(
        seen["rawHidden"], true,
        "the raw JSON waits behind its toggle"
    );
    assert!(
        seen["linkOpened"]
            .as_str()
            .unwrap()
            .starts_with("demo://resource/"),
        "{seen:#}"
    );
    // Ranked search across servers, by pointer and by keyboard.
    let found: Vec<&str> = seen["found"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(found.contains(&"everything__get-sum"), "{found:?}");
    assert_eq!(seen["foundOpened"], "get-sum");
    assert!(
        seen["keyboardOpened"]
            .as_str()
            .unwrap()
            .starts_with("everything__")
    );
    // Connecting a client.
    assert_eq!(seen["mcpUrl"], format!("{base}/mcp"));
    assert!(seen["clientEntries"].as_array().unwrap().len() >= 4);
    assert_eq!(
        seen["cursorEntry"]["mcpServers"]["switchboard"]["url"],
        format!("{base}/mcp")
    );
    // The inspector gives each message's size, and a response its time.
    let sizes = seen["inspectorSizes"].as_array().unwrap();
    assert!(
        sizes
            .iter()
            .filter_map(Value::as_str)
            .any(|s| s.contains(" B") && s.ends_with(" ms")),
        "{sizes:?}"
    );
    // A pending question is in the tab's title until answered (here with one press: Yes).
    assert!(
        seen["titleWhileAsked"]
            .as_str()
            .unwrap()
            .starts_with("(1) "),
        "{seen:#}"
    );
    assert_eq!(seen["titleAfter"], "Switchboard");
    // While the person looked elsewhere, the question came as a browser notification too.
    assert_eq!(
        seen["notified"],
        json!([{"title": "human · confirm asks", "body": "Deploy to production?"}]),
        "{seen:#}"
    );
    // A server's answer with markup and script in it: shown as text, nothing ran, no image or
    // script element and no link to anything but http(s).
    assert_eq!(
        seen["hostile"],
        json!({"pwned": null, "elements": 0, "scriptLinks": 0, "shownAsText": true}),
        "{seen:#}"
    );
    // An MCP App: loaded, fullscreen and picture in picture.
    assert_eq!(seen["appLoadingGone"], true);
    assert_eq!(seen["appFullscreen"], true);
    assert_eq!(seen["appPip"], true);
    // Edited in place: the command line shown as one, quoted arguments kept whole, the
    // secret value sealed and shown masked, and a masked value saved again keeps its value.
    let everything_entry = everything.display().to_string();
    assert!(
        seen["editShown"]
            .as_str()
            .unwrap()
            .ends_with(everything_entry.as_str()),
        "{seen:#}"
    );
    let edited = &seen["edited"];
    assert_eq!(
        edited["transport"]["args"],
        json!([everything_entry, "stdio", "two words"]),
        "{edited:#}"
    );
    assert_eq!(
        edited["transport"]["env"],
        json!([{"name": "NOTE_FROM_CONSOLE", "value": "********", "secret": true}]),
        "{edited:#}"
    );
    assert_eq!(edited["timeouts"]["tool_call"], 45000);
    assert_eq!(seen["secretShownMasked"], json!(["password", "********"]));
    assert_eq!(seen["envAfterEdit"], true, "{seen:#}");
    // Resources and prompts complete: a template filled in and read, arguments completed by
    // the server (the second from the first's value).
    assert_eq!(seen["templateCompletions"], json!(["2"]));
    assert_eq!(seen["templateExpanded"], "demo://resource/dynamic/text/2");
    assert!(
        seen["templateRead"]
            .as_str()
            .unwrap()
            .contains("Resource 2"),
        "{seen:#}"
    );
    assert_eq!(seen["departments"], json!(["Engineering"]));
    assert_eq!(seen["leaders"], json!(["Alice"]));
    // A followed resource's updates, shown as they come; following ends on a second press.
    assert!(seen["followedUpdates"].as_u64().unwrap() >= 1, "{seen:#}");
    assert_eq!(seen["followedTitle"], seen["followedUri"]);
    assert_eq!(seen["followStopped"], "Follow");
    // A plan to approve, decided with a reply and a screenshot; questions kept in a history.
    assert_eq!(seen["planShown"], json!(["Build"]), "{seen:#}");
    let decisions = seen["planDecisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 3, "{decisions:?}");
    assert!(decisions[1].as_str().unwrap().contains("Change the plan"));
    let plan = &seen["planResult"];
    assert_eq!(
        plan["content"][0]["text"],
        "Decision: Request changes\nReply: Deploy on Monday"
    );
    assert_eq!(plan["content"][1]["type"], "image");
    assert_eq!(
        plan["structuredContent"]["attachments"][0]["mimeType"],
        "image/png"
    );
    assert_eq!(seen["planImage"], true);
    assert!(
        seen["history"].as_array().unwrap().len() >= 3,
        "the elicitation, the confirmation and the plan: {seen:#}"
    );
    // What survives a reload.
    // The OAuth client in the Edit form: set, shown masked, kept when saved untouched, removed.
    assert_eq!(seen["signinAdded"], 201, "{seen:#}");
    assert_eq!(
        seen["oauthSet"],
        json!({"client_id": "switchboard-console", "client_secret": "********",
               "issuer": "https://auth.example.com", "grant": "client-credentials"}),
        "{seen:#}"
    );
    assert_eq!(
        seen["oauthShown"],
        json!([
            "switchboard-console",
            "********",
            "https://auth.example.com",
            "client-credentials"
        ])
    );
    assert_eq!(seen["oauthKept"], seen["oauthSet"], "{seen:#}");
    assert_eq!(seen["oauthRemoved"], Value::Null, "{seen:#}");
    // An endpoint made through its form: two tools of one server, a key for it alone.
    assert_eq!(seen["noEndpoints"], true, "{seen:#}");
    assert_eq!(
        seen["endpointStored"]["servers"],
        json!({"everything": ["echo", "get-sum"]}),
        "{seen:#}"
    );
    assert_eq!(seen["endpointStored"]["description"], "Support agents");
    let card = seen["endpointCard"].as_str().unwrap();
    assert!(
        card.contains("/mcp/e/support") && card.contains("everything: echo, get-sum"),
        "{card}"
    );
    assert!(
        seen["endpointKey"].as_str().unwrap().starts_with("sbe_"),
        "{seen:#}"
    );
    assert_eq!(
        seen["endpointKeyReaches"],
        json!([200, 403]),
        "its endpoint, and not /mcp"
    );
    assert_eq!(seen["keysAfterRevoking"], 0);
    // A call waiting for approval, shown with its exact arguments, and approved.
    let shown = seen["approvalShows"].as_str().unwrap();
    assert!(
        shown.contains("everything__echo")
            && shown.contains("\"message\": \"deploy to production\""),
        "{shown}"
    );
    assert!(
        seen["approvedCall"]
            .as_str()
            .unwrap()
            .contains("Echo: deploy to production"),
        "{seen:#}"
    );
    // The audit page: the approval, and the call it let through, with its door.
    let approvals = seen["auditApprovals"].as_array().unwrap();
    assert!(
        approvals[0]
            .as_str()
            .unwrap()
            .contains("| everything / echo | approved |"),
        "{approvals:?}"
    );
    let calls = seen["auditCalls"].as_array().unwrap();
    assert!(
        calls.iter().any(|row| {
            let row = row.as_str().unwrap();
            row.contains("| mcp")
                && row.contains("called as everything__echo")
                && row.contains("| ok |")
        }),
        "{calls:?}"
    );
    assert_eq!(
        seen["auditExported"]["name"], "switchboard-audit.jsonl",
        "{seen:#}"
    );
    assert_eq!(seen["auditExported"]["kinds"], json!(["call"]), "{seen:#}");
    assert_eq!(seen["auditExported"]["tools"], json!(["echo"]), "{seen:#}");
    assert_eq!(
        seen["auditExported"]["lines"].as_u64(),
        Some(calls.len() as u64),
        "{seen:#}"
    );
    assert_eq!(seen["afterReload"]["theme"], "dark", "{seen:#}");
    assert_eq!(seen["afterReload"]["server"], "everything", "{seen:#}");
    assert_eq!(seen["afterReload"]["tab"], "prompts", "{seen:#}");
    assert!(seen["afterReload"]["activity"].as_u64().unwrap() > 0);
    assert!(seen["afterReload"]["history"].as_u64().unwrap() >= 3);
    assert_ne!(
        seen["afterReload"]["background"], "rgb(246, 247, 250)",
        "the dark theme is shown"
    );
    assert_eq!(
        seen["imported"],
        "Imported 1; skipped broken (has both 'command' and 'url'; keep one)."
    );
    assert_eq!(
        seen["problems"],
        serde_json::json!([]),
        "the page had no errors"
    );

    // What the person did, as the daemon holds it: the tool on again, the cancelled call
    // cancelled at the server (its call counted as such).
    let tools = common::get_json(&format!("{base}/api/servers/everything/tools")).await;
    let echo = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "echo")
        .unwrap();
    assert_eq!(echo["settings"]["enabled"], true, "{echo:#}");
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let cancelled = r#"switchboard_tool_calls_total{server="everything",tool="trigger-long-running-operation",outcome="cancelled"} 1"#;
    assert!(metrics.contains(cancelled), "{metrics}");
    // The app's tool ran twice: once from the form, once from the app's own button.
    let app_calls = r#"switchboard_tool_calls_total{server="apps",tool="get-time",outcome="ok"} 2"#;
    assert!(metrics.contains(app_calls), "{metrics}");

    // The view as the daemon serves it: sandboxed, under the strict default policy (the example
    // declares no domains), and only for MCP App views.
    let http = reqwest::Client::new();
    let ask = |body: Value| {
        http.post(format!("{base}/api/apps/views"))
            .json(&body)
            .send()
    };
    let served = ask(serde_json::json!({"server": "apps", "uri": "ui://get-time/mcp-app.html"}))
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
    let served: Value = served.json().await.unwrap();
    let page = reqwest::get(format!("{base}{}", served["url"].as_str().unwrap()))
        .await
        .unwrap();
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.starts_with("sandbox allow-scripts") && policy.contains("connect-src 'none'"),
        "{policy}"
    );
    assert!(page.text().await.unwrap().contains("get-time-btn"));
    let not_a_view = ask(serde_json::json!({"server": "everything", "uri": "demo://resource/static/document/architecture.md"}))
        .await
        .unwrap();
    assert_eq!(not_a_view.status(), 400, "not a ui:// resource");
    let unknown = ask(serde_json::json!({"server": "everything", "uri": "ui://nothing-here"}))
        .await
        .unwrap();
    assert_eq!(unknown.status(), 422, "the server's error");
    let expired = reqwest::get(format!("{base}/apps/view/0123456789abcdef"))
        .await
        .unwrap();
    assert_eq!(expired.status(), 404);
}

/// A tool whose definition changed under the same name, on a server that holds such tools, is
/// shown in the console with each changed field as approved and as now (headless Chromium:
/// `tests/npm/console-definitions.mjs`); once a person accepts it, clients see it again. The
/// same person then sets the server's guardrails in its edit form, and the tool's search notes
/// under its row, which search then reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_sees_what_changed_in_a_held_tool_and_accepts_it() {
    use switchboard_fixtures::{Era, transports};
    let npm = common::npm_dir(&["playwright-core"]);
    let fixture = transports::streamable_http(Era::Legacy).await;
    let dir = tempfile::tempdir().unwrap();
    let added = common::run(dir.path(), &["server", "add", "beta", &fixture.url]).await;
    assert!(added.status.success(), "{}", common::text(&added));
    let held = common::run(
        dir.path(),
        &["server", "set-definition-changes", "beta", "hold"],
    )
    .await;
    assert!(held.status.success(), "{}", common::text(&held));
    let (_daemon, port) = common::spawn_daemon(dir.path());
    common::await_health(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let tools = || async {
        let listed: Value = reqwest::get(format!("{base}/api/tools?format=mcp"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        listed.to_string()
    };
    for _ in 0..200 {
        if tools().await.contains("\"beta__add\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tools().await.contains("\"beta__add\""), "{}", tools().await);
    fixture
        .state
        .rug_pull
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let told = http
        .post(format!("{base}/api/servers/beta/tools/add_tool/call"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(told.status(), 200);
    for _ in 0..200 {
        if !tools().await.contains("\"beta__add\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!tools().await.contains("\"beta__add\""), "held back");

    let seen = browser(
        &npm,
        "console-definitions.mjs",
        &[&base, "beta", "add"],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(seen["change"], "add: its definition changed", "{seen:#}");
    assert_eq!(seen["badge"], "held back from clients", "{seen:#}");
    assert_eq!(seen["markedHeld"], json!(["add"]), "{seen:#}");
    assert_eq!(seen["fields"].as_array().unwrap().len(), 1, "{seen:#}");
    assert_eq!(seen["fields"][0]["field"], "description");
    assert_eq!(seen["fields"][0]["was"], "\"Adds two numbers\"");
    assert!(
        seen["fields"][0]["now"]
            .as_str()
            .unwrap()
            .contains("id_rsa"),
        "{seen:#}"
    );
    assert_eq!(
        seen["message"], "Accepted the new definition of add.",
        "{seen:#}"
    );
    assert_eq!(seen["problems"], json!([]), "{seen:#}");
    assert!(
        tools().await.contains("\"beta__add\""),
        "served again once accepted"
    );
    assert_eq!(seen["definitionChangesShown"], "hold", "{seen:#}");
    let server: Value = reqwest::get(format!("{base}/api/servers/beta"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        server["policies"]["guardrails"],
        json!({
            "redact_arguments": ["secrets"],
            "redact_results": ["personal"],
            "webhook": {"url": "http://127.0.0.1:9/check", "timeout_ms": 2500, "on_failure": "allow"},
        }),
        "the guards the person set: {server:#}"
    );
    assert_eq!(
        server["policies"]["definition_changes"], "hold",
        "kept: {server:#}"
    );
    assert_eq!(seen["notesButton"], "Search notes ✓", "{seen:#}");
    let mut found = Value::Null;
    for _ in 0..100 {
        found = reqwest::get(format!("{base}/api/tools/search?q=tally&limit=1"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if found["tools"][0]["name"] == "beta__add" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        found["tools"][0]["name"], "beta__add",
        "the notes the person wrote find the tool: {found:#}"
    );
}

/// A tenant admin puts a member in a group and grants the group one shared server from the
/// console's Access page (headless Chromium: `tests/npm/console-access.mjs`); the member's
/// workspace then reaches that server only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_admin_grants_a_group_one_server_from_the_console() {
    use switchboard_fixtures::{Era, transports};
    let npm = common::npm_dir(&["playwright-core"]);
    let fixture = transports::streamable_http(Era::Modern).await;
    let dir = tempfile::tempdir().unwrap();
    let cli = |args: &'static [&'static str]| {
        let dir = dir.path().to_owned();
        async move {
            let output = common::run(&dir, args).await;
            assert!(
                output.status.success(),
                "{args:?}: {}",
                common::text(&output)
            );
            String::from_utf8(output.stdout).unwrap().trim().to_owned()
        }
    };
    cli(&["tenant", "add", "acme"]).await;
    cli(&["user", "add", "acme/carol", "--admin"]).await;
    cli(&["user", "add", "acme/ana"]).await;
    let carol = cli(&["user", "key", "acme/carol"]).await;
    let ana = cli(&["user", "key", "acme/ana"]).await;
    let port = common::free_port();
    let listen = format!("127.0.0.1:{port}");
    let _daemon = common::command(
        dir.path(),
        &[
            "serve",
            "--users",
            "--listen",
            &listen,
            "--allow-upstream-network",
            "127.0.0.1",
        ],
    )
    .env("SWITCHBOARD_API_KEYS", "operator-key-0123456789abcdef")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .kill_on_drop(true)
    .spawn()
    .unwrap();
    common::await_health(port).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for id in ["docs", "tracker"] {
        let added = http
            .post(format!("{base}/api/servers"))
            .bearer_auth(&carol)
            .json(&json!({"id": id, "url": fixture.url}))
            .send()
            .await
            .unwrap();
        assert_eq!(added.status(), 201);
    }
    let anas_servers = || async {
        let list: Value = http
            .get(format!("{base}/api/servers"))
            .bearer_auth(&ana)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut ids: Vec<String> = list["servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(anas_servers().await, ["docs", "tracker"]);

    let seen = browser(
        &npm,
        "console-access.mjs",
        &[&base, &carol, "ana", "docs"],
        Duration::from_secs(120),
    )
    .await;
    assert!(
        seen["ruleBefore"]
            .as_str()
            .is_some_and(|rule| rule.starts_with("No grants yet")),
        "{seen:#}"
    );
    assert!(
        seen["group"]
            .as_str()
            .is_some_and(|group| group.contains("ana") && group.contains("engineers")),
        "{seen:#}"
    );
    assert_eq!(
        seen["grants"],
        json!([["group:eng", "docs (every tool)"]]),
        "{seen:#}"
    );
    assert!(
        seen["ruleAfter"]
            .as_str()
            .is_some_and(|rule| rule.starts_with("Members reach only")),
        "{seen:#}"
    );
    assert_eq!(seen["problems"], json!([]), "{seen:#}");
    let mut now = Vec::new();
    for _ in 0..200 {
        now = anas_servers().await;
        if now == ["docs"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(now, ["docs"], "ana reaches what her group was granted");
}
