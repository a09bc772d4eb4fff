//! Masking secrets and personal data in JSON before it is kept or passed on (the audit log's
//! redacted arguments, guardrails): two pattern sets. `secrets`: values under keys that name a
//! secret, and text that looks like a credential (bearer tokens, JWTs, cloud and forge tokens,
//! private keys, Switchboard's own keys). `personal`: e-mail addresses, payment card numbers
//! that pass the Luhn check, US social security numbers.
//!
//! Written here because no maintained crate does this for arbitrary JSON; the patterns are the
//! well-known prefixes these issuers document, so a masked value says which kind it was.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A set of patterns masked together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternSet {
    /// Credentials: secret-named keys, tokens, keys.
    Secrets,
    /// Personal data: e-mail addresses, card numbers, social security numbers.
    Personal,
}

impl std::str::FromStr for PatternSet {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "secrets" => Ok(Self::Secrets),
            "personal" => Ok(Self::Personal),
            other => Err(format!(
                "'{other}' is not a pattern set (secrets or personal)"
            )),
        }
    }
}

/// Both pattern sets.
pub fn every_set() -> BTreeSet<PatternSet> {
    BTreeSet::from([PatternSet::Secrets, PatternSet::Personal])
}

/// Keys whose values are masked whatever they hold (compared without case, `-` and `_`).
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "clientsecret",
    "token",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "apikey",
    "authorization",
    "cookie",
    "privatekey",
    "credential",
    "credentials",
    "accesskey",
    "secretaccesskey",
    "sessiontoken",
];

/// The patterns of text that looks like a credential or personal data, each with its set and
/// the name its mask carries.
fn patterns() -> &'static [(PatternSet, &'static str, Regex)] {
    static PATTERNS: OnceLock<Vec<(PatternSet, &'static str, Regex)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        use PatternSet::{Personal, Secrets};
        [
            (
                Secrets,
                "private_key",
                r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
            ),
            (Secrets, "bearer", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
            (
                Secrets,
                "jwt",
                r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            ),
            (Secrets, "aws_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
            (
                Secrets,
                "github_token",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
            ),
            (Secrets, "slack_token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
            (Secrets, "api_key", r"\bsk-[A-Za-z0-9_-]{16,}"),
            (Secrets, "switchboard_key", r"\bsb[ek]_[0-9a-f]{64}\b"),
            (
                Personal,
                "email",
                r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            ),
            (Personal, "ssn", r"\b\d{3}-\d{2}-\d{4}\b"),
            (Personal, "card", r"\b\d(?:[ -]?\d){12,18}\b"),
        ]
        .into_iter()
        .filter_map(|(set, name, pattern)| match Regex::new(pattern) {
            Ok(regex) => Some((set, name, regex)),
            // A constant pattern; the unit tests compile every one.
            Err(_) => None,
        })
        .collect()
    })
}

/// Whether `key` names a secret.
fn is_secret_key(key: &str) -> bool {
    let plain: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_KEYS.contains(&plain.as_str())
}

/// Whether the digits in `text` pass the Luhn check (as every payment card number does).
fn passes_luhn(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(index, digit)| match index % 2 {
            1 if *digit * 2 > 9 => *digit * 2 - 9,
            1 => *digit * 2,
            _ => *digit,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// `text` with every match of a pattern of both sets masked as `[redacted:<kind>]`.
pub fn redact_text(text: &str) -> String {
    redact_text_with(text, &every_set())
}

/// `text` with every match of a pattern of `sets` masked as `[redacted:<kind>]`.
pub fn redact_text_with(text: &str, sets: &BTreeSet<PatternSet>) -> String {
    let mut text = text.to_owned();
    for (set, name, pattern) in patterns() {
        if !sets.contains(set) || !pattern.is_match(&text) {
            continue;
        }
        text = pattern
            .replace_all(&text, |found: &Captures<'_>| {
                let matched = &found[0];
                if *name == "card" && !passes_luhn(matched) {
                    matched.to_owned()
                } else {
                    format!("[redacted:{name}]")
                }
            })
            .into_owned();
    }
    text
}

/// `value` with secrets and personal data masked: every value under a key naming a secret,
/// and every matching part of every string, at any depth.
pub fn redact(value: &Value) -> Value {
    redact_with(value, &every_set())
}

/// `value` with the patterns of `sets` masked at any depth (with `secrets`, every value under a
/// key naming a secret too).
pub fn redact_with(value: &Value, sets: &BTreeSet<PatternSet>) -> Value {
    match value {
        Value::String(text) => Value::String(redact_text_with(text, sets)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| redact_with(item, sets)).collect())
        }
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| {
                    let secret = sets.contains(&PatternSet::Secrets) && is_secret_key(key);
                    let kept = if secret && !value.is_null() {
                        Value::String("[redacted:secret]".to_owned())
                    } else {
                        redact_with(value, sets)
                    };
                    (key.clone(), kept)
                })
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(patterns().len(), 11);
    }

    #[test]
    fn secrets_are_masked_by_key_and_by_shape_at_any_depth() {
        let value = json!({
            "query": "weather in Paris",
            "apiKey": "anything at all",
            "Client-Secret": 12345,
            "headers": {"Authorization": "Bearer abc.def.ghi"},
            "notes": [
                "use token ghp_0123456789abcdefghij0123456789abcdef please",
                "aws AKIAIOSFODNN7EXAMPLE here",
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
                "key sk-ant-api03-abcdefghijklmnop and sbk_"
            ],
            "count": 3,
        });
        let masked = redact(&value);
        assert_eq!(masked["query"], "weather in Paris");
        assert_eq!(masked["apiKey"], "[redacted:secret]");
        assert_eq!(masked["Client-Secret"], "[redacted:secret]");
        assert_eq!(masked["headers"]["Authorization"], "[redacted:secret]");
        assert_eq!(masked["count"], 3);
        let notes = masked["notes"].to_string();
        for leaked in [
            "ghp_0123",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9",
            "MIIEow",
            "sk-ant-api03",
        ] {
            assert!(!notes.contains(leaked), "{leaked} leaked: {notes}");
        }
        for kind in ["github_token", "aws_key", "jwt", "private_key", "api_key"] {
            assert!(notes.contains(&format!("[redacted:{kind}]")), "{notes}");
        }
    }

    #[test]
    fn only_the_sets_asked_for_are_masked() {
        let value = json!({"password": "hunter2", "note": "ada@example.org"});
        let secrets = redact_with(&value, &BTreeSet::from([PatternSet::Secrets]));
        assert_eq!(
            secrets,
            json!({"password": "[redacted:secret]", "note": "ada@example.org"})
        );
        let personal = redact_with(&value, &BTreeSet::from([PatternSet::Personal]));
        assert_eq!(
            personal,
            json!({"password": "hunter2", "note": "[redacted:email]"})
        );
    }

    #[test]
    fn personal_data_is_masked_and_ordinary_numbers_are_not() {
        let text = redact_text(
            "mail ada@example.org, card 4111 1111 1111 1111, ssn 078-05-1120, \
             order 1234567890123, phone 2024-11-27",
        );
        assert!(text.contains("[redacted:email]"), "{text}");
        assert!(text.contains("[redacted:card]"), "{text}");
        assert!(text.contains("[redacted:ssn]"), "{text}");
        assert!(
            text.contains("order 1234567890123"),
            "a number failing the Luhn check stays: {text}"
        );
        assert!(text.contains("2024-11-27"), "{text}");
    }
}
