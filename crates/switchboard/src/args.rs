//! Turning `--arg key=value` pairs into tool arguments, typed by the tool's input schema.
//!
//! `--arg count=3` sends the number 3 when the schema says `count` is a number or integer, and the
//! string "3" when it says string. Without a schema type, a value that parses as JSON is sent as
//! that JSON, anything else as a string.

use serde_json::{Map, Value};

/// Why an argument could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// Not `key=value`.
    #[error("'{0}' is not KEY=VALUE")]
    NotKeyValue(String),
    /// The value does not fit the declared type.
    #[error("argument '{key}' must be {expected}, got '{value}'")]
    WrongType {
        /// Argument name.
        key: String,
        /// Declared type.
        expected: String,
        /// The given text.
        value: String,
    },
    /// `--args` was not a JSON object.
    #[error("--args must be a JSON object: {0}")]
    NotAnObject(String),
}

/// Parses `--args` JSON text into an object.
pub fn parse_json_object(text: &str) -> Result<Map<String, Value>, ArgError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(ArgError::NotAnObject(format!("got {other}"))),
        Err(e) => Err(ArgError::NotAnObject(e.to_string())),
    }
}

/// The arguments `schema` requires that `arguments` lacks, each with its declared type (or
/// `any`), in the schema's order.
pub fn missing_required(
    arguments: &Map<String, Value>,
    schema: &Map<String, Value>,
) -> Vec<(String, String)> {
    let properties = schema.get("properties").and_then(Value::as_object);
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|name| !arguments.contains_key(*name))
        .map(|name| {
            let kind = properties
                .and_then(|p| p.get(name))
                .and_then(|p| p.get("type"))
                .map(|t| match t {
                    Value::String(kind) => kind.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| "any".into());
            (name.to_owned(), kind)
        })
        .collect()
}

/// Builds an argument object from `key=value` pairs using `schema` for types.
pub fn from_pairs(
    pairs: &[String],
    schema: &Map<String, Value>,
) -> Result<Map<String, Value>, ArgError> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut arguments = Map::new();
    for pair in pairs {
        let (key, raw) = pair
            .split_once('=')
            .ok_or_else(|| ArgError::NotKeyValue(pair.clone()))?;
        let declared = properties
            .and_then(|p| p.get(key))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str);
        arguments.insert(key.to_owned(), typed(key, raw, declared)?);
    }
    Ok(arguments)
}

fn typed(key: &str, raw: &str, declared: Option<&str>) -> Result<Value, ArgError> {
    let wrong = |expected: &str| ArgError::WrongType {
        key: key.to_owned(),
        expected: expected.to_owned(),
        value: raw.to_owned(),
    };
    match declared {
        Some("string") => Ok(Value::String(raw.to_owned())),
        Some("integer") => raw
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| wrong("an integer")),
        // A whole number stays an integer (`2`, not `2.0`): servers that check for integers,
        // or print what they got, see what the user typed.
        Some("number") => raw
            .parse::<i64>()
            .map(Value::from)
            .ok()
            .or_else(|| {
                raw.parse::<f64>()
                    .ok()
                    .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
            })
            .ok_or_else(|| wrong("a number")),
        Some("boolean") => raw
            .parse::<bool>()
            .map(Value::Bool)
            .map_err(|_| wrong("true or false")),
        Some("array") | Some("object") => serde_json::from_str(raw)
            .map_err(|_| wrong(&format!("JSON ({})", declared.unwrap_or("")))),
        _ => Ok(serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn required_arguments_left_out_are_named_with_their_types() {
        let schema = json!({"type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "string"}, "c": {}},
            "required": ["a", "b", "c"]});
        let given = json!({"b": "x"});
        assert_eq!(
            missing_required(given.as_object().unwrap(), schema.as_object().unwrap()),
            [("a".into(), "number".into()), ("c".into(), "any".into())]
        );
    }

    #[test]
    fn pairs_follow_the_schema_types() {
        let schema = json!({"type": "object", "properties": {
            "a": {"type": "number"}, "whole": {"type": "number"}, "n": {"type": "integer"},
            "s": {"type": "string"},
            "b": {"type": "boolean"}, "xs": {"type": "array"}}});
        let schema = schema.as_object().unwrap();
        let args = from_pairs(
            &[
                "a=1.5".into(),
                "whole=2".into(),
                "n=2".into(),
                "s=3".into(),
                "b=true".into(),
                "xs=[1]".into(),
                "free=7".into(),
                "word=hi".into(),
            ],
            schema,
        )
        .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"a": 1.5, "whole": 2, "n": 2, "s": "3", "b": true, "xs": [1], "free": 7, "word": "hi"})
        );
        assert!(matches!(
            from_pairs(&["n=x".into()], schema),
            Err(ArgError::WrongType { .. })
        ));
        assert!(matches!(
            from_pairs(&["novalue".into()], schema),
            Err(ArgError::NotKeyValue(_))
        ));
        assert!(parse_json_object("[1]").is_err());
        assert!(parse_json_object("{\"a\":1}").is_ok());
    }
}
