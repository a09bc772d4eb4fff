//! Parsing `WWW-Authenticate` (RFC 9110 §11.6.1) into challenges.
//!
//! Written by hand: the grammar is small, but the crates that parse it either handle only one
//! scheme or predate the `http` 1.x types. A header may hold several challenges, each an
//! auth-scheme followed by a token68 or by comma-separated `name=value` parameters whose values
//! are tokens or quoted strings with backslash escapes; several header lines are one list.

/// One challenge: a scheme and its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Challenge {
    /// The auth-scheme as sent (`Bearer`, `DPoP`, ...); compare case-insensitively.
    pub scheme: String,
    /// A token68 instead of parameters, if the challenge has one.
    pub token68: Option<String>,
    /// Parameters in order, names lower-cased.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The value of a parameter (names are case-insensitive).
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What a `Bearer` (or `DPoP`) challenge tells an OAuth client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// The scheme of the challenge this came from.
    pub scheme: String,
    /// `resource_metadata`: where the protected-resource metadata is (RFC 9728 §5.1).
    pub resource_metadata: Option<String>,
    /// `scope`: the scopes needed for the request, space-separated.
    pub scope: Option<String>,
    /// `error`: `invalid_token`, `insufficient_scope`, `use_dpop_nonce`, ...
    pub error: Option<String>,
    /// `error_description`.
    pub error_description: Option<String>,
}

impl BearerChallenge {
    /// The first `Bearer` or `DPoP` challenge among the given header values, if any.
    pub fn from_header_values<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let challenges: Vec<Challenge> = values.into_iter().flat_map(parse).collect();
        let pick = |scheme: &str| {
            challenges
                .iter()
                .find(|c| c.scheme.eq_ignore_ascii_case(scheme))
        };
        let challenge = pick("Bearer").or_else(|| pick("DPoP"))?;
        let get = |name| challenge.param(name).map(str::to_owned);
        Some(Self {
            scheme: challenge.scheme.clone(),
            resource_metadata: get("resource_metadata"),
            scope: get("scope").filter(|s| !s.trim().is_empty()),
            error: get("error"),
            error_description: get("error_description"),
        })
    }

    /// The first `Bearer`/`DPoP` challenge in a response's headers.
    pub fn from_headers(headers: &http::HeaderMap) -> Option<Self> {
        Self::from_header_values(
            headers
                .get_all(http::header::WWW_AUTHENTICATE)
                .iter()
                .filter_map(|v| v.to_str().ok()),
        )
    }

    /// True for `error="insufficient_scope"`.
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The challenged scopes, split on whitespace.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref())
    }
}

/// Splits a space-separated scope string.
pub(crate) fn split_scopes(scope: Option<&str>) -> Vec<String> {
    scope
        .unwrap_or_default()
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect()
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

fn is_token68_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/".contains(c)
}

/// Parses one header value into its challenges. Malformed parts are skipped rather than failing
/// the whole header: a server's typo must not hide the parameters that are well-formed.
pub(crate) fn parse(header: &str) -> Vec<Challenge> {
    let mut cursor = Cursor {
        chars: header.chars().collect(),
        at: 0,
    };
    let mut challenges = Vec::new();
    loop {
        cursor.skip_separators();
        let Some(scheme) = cursor.token() else {
            if cursor.done() {
                break;
            }
            cursor.at += 1; // not a token: skip the character and resynchronise
            continue;
        };
        let mut challenge = Challenge {
            scheme,
            token68: None,
            params: Vec::new(),
        };
        cursor.skip_spaces();
        if let Some(token68) = cursor.token68() {
            challenge.token68 = Some(token68);
        } else {
            // auth-params until the next scheme (a token not followed by '=') or the end.
            loop {
                cursor.skip_separators();
                let start = cursor.at;
                let Some(name) = cursor.token() else { break };
                cursor.skip_spaces();
                if !cursor.eat('=') {
                    cursor.at = start; // a new challenge begins here
                    break;
                }
                cursor.skip_spaces();
                let value = if cursor.peek() == Some('"') {
                    cursor.quoted()
                } else {
                    cursor.token().unwrap_or_default()
                };
                challenge.params.push((name.to_ascii_lowercase(), value));
            }
        }
        challenges.push(challenge);
    }
    challenges
}

struct Cursor {
    chars: Vec<char>,
    at: usize,
}

impl Cursor {
    fn done(&self) -> bool {
        self.at >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.at += 1;
        }
    }

    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | ',')) {
            self.at += 1;
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.at;
        while self.peek().is_some_and(is_tchar) {
            self.at += 1;
        }
        (self.at > start).then(|| self.chars[start..self.at].iter().collect())
    }

    /// A token68 is only taken when what follows it is the end of the challenge, so that
    /// `name=value` parameters are not mistaken for one.
    fn token68(&mut self) -> Option<String> {
        let start = self.at;
        while self.peek().is_some_and(is_token68_char) {
            self.at += 1;
        }
        if self.at == start {
            return None;
        }
        while self.peek() == Some('=') {
            self.at += 1;
        }
        let end = self.at;
        self.skip_spaces();
        if self.done() || self.peek() == Some(',') {
            Some(self.chars[start..end].iter().collect())
        } else {
            self.at = start;
            None
        }
    }

    fn quoted(&mut self) -> String {
        self.at += 1; // opening quote
        let mut value = String::new();
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                '"' => return value,
                '\\' => {
                    if let Some(escaped) = self.peek() {
                        value.push(escaped);
                        self.at += 1;
                    }
                }
                c => value.push(c),
            }
        }
        value // unterminated: keep what was there
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_challenge_with_quoted_parameters_is_read() {
        let header = r#"Bearer realm="mcp", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#;
        let challenge = BearerChallenge::from_header_values([header]).unwrap();
        assert_eq!(
            challenge.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(challenge.scopes(), ["files:read", "files:write"]);
    }

    #[test]
    fn several_challenges_in_one_header_are_separated() {
        let parsed = parse(
            r#"Basic realm="a, b", Bearer error="insufficient_scope", scope="x", DPoP algs="ES256 RS256""#,
        );
        let schemes: Vec<_> = parsed.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["Basic", "Bearer", "DPoP"]);
        assert_eq!(parsed[0].param("realm"), Some("a, b"));
        assert_eq!(parsed[1].param("error"), Some("insufficient_scope"));
        assert_eq!(parsed[2].param("algs"), Some("ES256 RS256"));
    }

    #[test]
    fn escapes_tokens_and_token68_are_handled() {
        let parsed = parse(
            r#"Bearer error=invalid_token, error_description="say \"hi\"", Negotiate abc123=="#,
        );
        assert_eq!(parsed[0].param("error"), Some("invalid_token"));
        assert_eq!(parsed[0].param("error_description"), Some(r#"say "hi""#));
        assert_eq!(parsed[1].token68.as_deref(), Some("abc123=="));
    }

    #[test]
    fn parameter_names_are_case_insensitive_and_bare_schemes_parse() {
        let challenge = BearerChallenge::from_header_values(["bearer Scope=\"a\""]).unwrap();
        assert_eq!(challenge.scope.as_deref(), Some("a"));
        assert_eq!(parse("Bearer").len(), 1);
    }

    #[test]
    fn garbage_never_panics_and_keeps_what_is_well_formed() {
        for header in [
            "",
            ",,,",
            "=\"",
            "Bearer scope=\"unterminated",
            "Bearer ,=, x=",
            "\u{1F600} Bearer a=b",
        ] {
            let _ = parse(header);
        }
        let challenge =
            BearerChallenge::from_header_values(["Bearer scope=\"unterminated"]).unwrap();
        assert_eq!(challenge.scope.as_deref(), Some("unterminated"));
    }

    #[test]
    fn challenges_spread_over_several_header_lines_are_one_list() {
        let challenge =
            BearerChallenge::from_header_values(["Basic realm=\"x\"", "Bearer scope=\"y\""])
                .unwrap();
        assert_eq!(challenge.scope.as_deref(), Some("y"));
    }
}
