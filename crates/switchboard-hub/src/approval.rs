//! Approval before risky calls: a call of a tool an admin marked (or, on a server that approves
//! destructive tools, one annotated `destructiveHint`) waits on the desk as a question a person
//! answers in the console or through the API. The question shows the server, the tool and the
//! exact arguments the server would get, and an approval names the SHA-256 of those arguments:
//! an answer naming other arguments does not fit, and the question goes on waiting. Refusing,
//! dismissing or letting the time run out refuses the call, and nothing reaches the server.

use std::time::Duration;

use serde_json::{Map, Value, json};
use sha2::Digest;
use switchboard_core::ServerId;
use switchboard_core::audit::AuditKind;
use switchboard_core::definitions::write_canonical_object;
use switchboard_core::endpoint::hex_of;

use crate::Hub;
use crate::desk::{Action, Asking};

/// The most of a call's arguments a question quotes; the digest covers all of them.
const MAX_QUOTED_BYTES: usize = 16 * 1024;

/// The form field an approval names the arguments' digest in.
pub const DIGEST_FIELD: &str = "arguments_sha256";

/// Why a call was not approved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalError {
    /// A person refused (or dismissed) it.
    #[error("a person refused this call of tool '{tool}'")]
    Refused {
        /// The tool, as the client named it.
        tool: String,
    },
    /// Nobody answered in time.
    #[error("nobody approved this call of tool '{tool}' within {} s", .waited.as_secs())]
    TimedOut {
        /// The tool, as the client named it.
        tool: String,
        /// How long it waited.
        waited: Duration,
    },
}

impl ApprovalError {
    /// `refused` or `timed_out`, for errors' data.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Refused { .. } => "refused",
            Self::TimedOut { .. } => "timed_out",
        }
    }
}

/// SHA-256 of `arguments` as canonical JSON (keys sorted: the same arguments in another
/// order have the same digest), lower-case hex: what an approval and the audit log name.
pub fn arguments_digest(arguments: Option<&Map<String, Value>>) -> String {
    hex_of(&arguments_sha256(arguments))
}

/// [`arguments_digest`] as its 32 bytes.
pub fn arguments_sha256(arguments: Option<&Map<String, Value>>) -> [u8; 32] {
    let mut text = Vec::with_capacity(256);
    match arguments {
        Some(arguments) => write_canonical_object(arguments, &mut text),
        None => text.extend_from_slice(b"{}"),
    }
    sha2::Sha256::digest(&text).into()
}

impl Hub {
    /// How long a call of the server's upstream tool `tool` waits for a person's approval, if
    /// it needs one (`destructive`: the tool, as clients see it, is annotated
    /// `destructiveHint: true`).
    pub fn approval_wait(&self, id: &ServerId, tool: &str, destructive: bool) -> Option<Duration> {
        self.slot(id)
            .ok()?
            .definition()
            .policies
            .approval_wait(tool, destructive)
    }

    /// Asks a person to approve a call of the server's upstream tool `tool` (`exposed`: the
    /// name the client called it by) with `arguments`, exactly as the server would get them,
    /// and waits up to `wait`. Dropping the future withdraws the question.
    pub async fn approve_call(
        &self,
        id: &ServerId,
        tool: &str,
        exposed: &str,
        arguments: Option<&Map<String, Value>>,
        wait: Duration,
    ) -> Result<(), ApprovalError> {
        let digest = arguments_digest(arguments);
        let mut quoted = serde_json::to_string_pretty(&arguments.cloned().unwrap_or_default())
            .unwrap_or_default();
        if quoted.len() > MAX_QUOTED_BYTES {
            let mut end = MAX_QUOTED_BYTES;
            while !quoted.is_char_boundary(end) {
                end -= 1;
            }
            quoted.truncate(end);
            quoted.push_str("\n… (cut here; the digest covers every argument)");
        }
        // Markdown, which the console shows element by element: the arguments in a code block
        // (pretty JSON: no line of it starts a fence).
        let message = format!(
            "**Approve this call?** Server `{id}`, tool `{tool}` (called as `{exposed}`), with \
             these arguments:\n\n```json\n{quoted}\n```"
        );
        let schema = json!({
            "type": "object",
            "properties": {DIGEST_FIELD: {
                "type": "string",
                "title": "The arguments approved (SHA-256)",
                "enum": [digest],
                "default": digest,
            }},
            "required": [DIGEST_FIELD],
        });
        let asked = self
            .desk()
            .ask(
                id.as_str(),
                Some(tool),
                Asking::Form { message, schema },
                wait,
            )
            .await;
        let decided = match asked {
            Ok(answer) if answer.action == Action::Accept => {
                tracing::info!(server = %id, tool, "a person approved a call");
                Ok(())
            }
            Ok(_) => Err(ApprovalError::Refused {
                tool: exposed.to_owned(),
            }),
            Err(_) => Err(ApprovalError::TimedOut {
                tool: exposed.to_owned(),
                waited: wait,
            }),
        };
        let outcome = match &decided {
            Ok(()) => "approved",
            Err(refused) => refused.kind(),
        };
        self.audit(AuditKind::Approval, outcome, |record| {
            record
                .about(id.as_str(), Some(tool))
                .with_detail(json!({"called_as": exposed, "arguments_sha256": digest}))
        });
        decided
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_of_the_arguments_and_changes_with_them() {
        let one = json!({"path": "/srv/a", "force": true});
        let other = json!({"path": "/srv/b", "force": true});
        let digest = arguments_digest(one.as_object());
        assert_eq!(digest.len(), 64);
        assert_eq!(digest, arguments_digest(one.as_object()));
        assert_ne!(digest, arguments_digest(other.as_object()));
        assert_eq!(arguments_digest(None), arguments_digest(Some(&Map::new())));
        let reordered = json!({"force": true, "path": "/srv/a"});
        assert_eq!(digest, arguments_digest(reordered.as_object()));
    }
}
