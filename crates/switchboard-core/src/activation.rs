//! Which servers and tools are on for a conversation: the app's choice, then the user's, then
//! the conversation's (thread's) own.
//!
//! Thirty connected servers are too many tools for any one conversation. An app turns servers
//! on or off for everyone, a user for their conversations, and a conversation (a thread, or an
//! MCP session that names none) for itself, often by the model's own request. Each [`Activation`]
//! is one layer's choices; [`Layers::is_active`] reads them narrowest first: the thread's word
//! on the tool, then on its server, then the user's, then the app's, and a server nobody
//! mentioned is on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One layer's choices: servers and tools (by exposed name) turned on or off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activation {
    /// Servers, by id.
    #[serde(default)]
    pub servers: BTreeMap<String, bool>,
    /// Tools, by exposed name.
    #[serde(default)]
    pub tools: BTreeMap<String, bool>,
}

/// A change to a layer: each entry sets a server or tool on (`true`) or off (`false`), or, with
/// `null`, forgets the layer's word on it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ActivationChange {
    /// Servers, by id.
    #[serde(default)]
    pub servers: BTreeMap<String, Option<bool>>,
    /// Tools, by exposed name.
    #[serde(default)]
    pub tools: BTreeMap<String, Option<bool>>,
}

impl Activation {
    /// Whether the layer says nothing.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.tools.is_empty()
    }

    /// Applies `change`; whether anything changed.
    pub fn apply(&mut self, change: &ActivationChange) -> bool {
        let before = self.clone();
        for (map, changes) in [
            (&mut self.servers, &change.servers),
            (&mut self.tools, &change.tools),
        ] {
            for (name, value) in changes {
                match value {
                    Some(on) => {
                        map.insert(name.clone(), *on);
                    }
                    None => {
                        map.remove(name);
                    }
                }
            }
        }
        *self != before
    }

    /// This layer's word on `tool` of `server`: the tool's own, else its server's.
    fn says(&self, server: &str, tool: &str) -> Option<bool> {
        self.tools
            .get(tool)
            .or_else(|| self.servers.get(server))
            .copied()
    }

    /// Whether this layer turns `tool` of `server` on explicitly (the deferred view lists such
    /// tools).
    pub fn turns_on(&self, server: &str, tool: &str) -> bool {
        self.says(server, tool) == Some(true)
    }
}

/// The layers that apply to one conversation, broadest first; any may be missing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layers<'a> {
    /// The app's (every conversation's).
    pub app: Option<&'a Activation>,
    /// The user's.
    pub user: Option<&'a Activation>,
    /// The conversation's own.
    pub thread: Option<&'a Activation>,
}

impl Layers<'_> {
    /// Whether `tool` (exposed name) of `server` is on: the narrowest layer with a word on it
    /// decides; with none, it is on.
    pub fn is_active(&self, server: &str, tool: &str) -> bool {
        self.decision(server, tool).is_none_or(|(on, _)| on)
    }

    /// The narrowest layer's word on `tool` of `server`, and which layer it is (`"app"`,
    /// `"user"`, `"thread"`).
    pub fn decision(&self, server: &str, tool: &str) -> Option<(bool, &'static str)> {
        [
            (self.thread, "thread"),
            (self.user, "user"),
            (self.app, "app"),
        ]
        .into_iter()
        .find_map(|(layer, name)| layer?.says(server, tool).map(|on| (on, name)))
    }

    /// Whether the user's or the thread's layer turns `tool` of `server` on explicitly.
    pub fn turned_on_for_conversation(&self, server: &str, tool: &str) -> bool {
        self.is_active(server, tool)
            && [self.thread, self.user]
                .into_iter()
                .flatten()
                .any(|layer| layer.turns_on(server, tool))
    }

    /// Whether no layer says anything (every tool is on).
    pub fn is_empty(&self) -> bool {
        [self.app, self.user, self.thread]
            .into_iter()
            .flatten()
            .all(Activation::is_empty)
    }
}

/// Whether `id` can name a user or a thread: 1 to 128 of `A-Za-z0-9._:@-`.
pub fn valid_conversation_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:@+|-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(servers: &[(&str, bool)], tools: &[(&str, bool)]) -> Activation {
        Activation {
            servers: servers.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            tools: tools.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        }
    }

    #[test]
    fn the_narrowest_layer_with_a_word_decides() {
        let app = layer(&[("github", false)], &[]);
        let user = layer(&[("github", true)], &[("github__delete_repo", false)]);
        let thread = layer(&[("slack", false)], &[]);
        let layers = Layers {
            app: Some(&app),
            user: Some(&user),
            thread: Some(&thread),
        };
        assert!(
            layers.is_active("github", "github__list_issues"),
            "the user turned it on"
        );
        assert!(
            !layers.is_active("github", "github__delete_repo"),
            "but not this tool"
        );
        assert!(
            !layers.is_active("slack", "slack__post"),
            "the thread turned it off"
        );
        assert!(
            layers.is_active("linear", "linear__search"),
            "nobody said: on"
        );
        assert_eq!(
            layers.decision("github", "github__delete_repo"),
            Some((false, "user"))
        );
        let app_only = Layers {
            app: Some(&app),
            ..Layers::default()
        };
        assert!(!app_only.is_active("github", "github__list_issues"));
        // A thread turning the server on wins over the user's word on one of its tools.
        let thread_on = layer(&[("github", true)], &[]);
        let layers = Layers {
            thread: Some(&thread_on),
            ..layers
        };
        assert!(layers.is_active("github", "github__delete_repo"));
        assert!(layers.turned_on_for_conversation("github", "github__list_issues"));
        assert!(!layers.turned_on_for_conversation("linear", "linear__search"));
    }

    #[test]
    fn a_change_sets_and_forgets() {
        let mut activation = Activation::default();
        let change: ActivationChange =
            serde_json::from_str(r#"{"servers": {"github": true}, "tools": {"x__y": false}}"#)
                .unwrap();
        assert!(activation.apply(&change));
        assert!(
            !activation.apply(&change),
            "the same change again changes nothing"
        );
        let forget: ActivationChange =
            serde_json::from_str(r#"{"servers": {"github": null}}"#).unwrap();
        assert!(activation.apply(&forget));
        assert_eq!(activation, layer(&[], &[("x__y", false)]));
    }

    #[test]
    fn conversation_ids_are_short_plain_names() {
        assert!(valid_conversation_id("thread-42"));
        assert!(valid_conversation_id("user@example.com"));
        assert!(!valid_conversation_id(""));
        assert!(!valid_conversation_id("a b"));
        assert!(!valid_conversation_id(&"x".repeat(129)));
    }
}
