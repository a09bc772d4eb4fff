//! `switchboard-conformance`: the adapter the official MCP conformance suite drives as a client.
//! (Work in progress: scenarios are wired in the next increment.)

fn main() {
    eprintln!("switchboard-conformance: no scenarios are wired yet");
    std::process::exit(2);
}
