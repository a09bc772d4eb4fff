//! Checking a person's answer against the form they were shown.
//!
//! Elicitation forms are flat: an object whose properties are strings, numbers, integers,
//! booleans, single choices (`enum`, or `oneOf` of `const`s) and multiple choices (an array of
//! such). That small subset is checked here by hand, so that a wrong answer is refused at the
//! desk (and can be corrected) instead of reaching the server; a general JSON Schema validator
//! would be a large dependency for it.

use serde_json::{Map, Value};

/// Checks `content` (the fields a person filled in) against the form's `schema`, and returns
/// it as the object to send (an absent content is an empty form). The error says, in plain
/// words, which field is wrong.
pub fn check_form(schema: &Value, content: Option<&Value>) -> Result<Value, String> {
    let content = content
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let Some(fields) = content.as_object() else {
        return Err("the answer must be an object of field values".into());
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for name in required {
        if !fields.contains_key(name) {
            return Err(format!("'{name}' is required"));
        }
    }
    for (name, value) in fields {
        let Some(property) = properties.and_then(|p| p.get(name)) else {
            return Err(format!("the form has no field '{name}'"));
        };
        check_field(name, property, value)?;
    }
    Ok(content)
}

fn check_field(name: &str, property: &Value, value: &Value) -> Result<(), String> {
    let kind = property.get("type").and_then(Value::as_str);
    let fits = match kind {
        Some("string") => value.is_string(),
        Some("number") => value.is_number(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("boolean") => value.is_boolean(),
        Some("array") => value.is_array(),
        _ => true,
    };
    if !fits {
        return Err(format!(
            "'{name}' must be {}",
            article(kind.unwrap_or("value"))
        ));
    }
    if let Some(items) = value.as_array() {
        let choices = property.get("items").map(choices_of).unwrap_or_default();
        if let Some(stray) = items
            .iter()
            .find(|item| !choices.is_empty() && !choices.contains(item))
        {
            return Err(format!("'{name}' offers no choice {stray}"));
        }
        let count = items.len() as f64;
        bound(name, "choices", count, property, "minItems", "maxItems")?;
        if let Some(item) = property.get("items") {
            for value in items {
                check_field(name, item, value)?;
            }
        }
        return Ok(());
    }
    let choices = choices_of(property);
    if !choices.is_empty() && !choices.contains(&value) {
        return Err(format!("'{name}' offers no choice {value}"));
    }
    if let Some(text) = value.as_str() {
        if property.get("format").and_then(Value::as_str) == Some("data-url")
            && !is_base64_data_url(text)
        {
            return Err(format!(
                "'{name}' must be a file as a data: URL (data:<type>;base64,...)"
            ));
        }
        let length = text.chars().count() as f64;
        bound(
            name,
            "characters",
            length,
            property,
            "minLength",
            "maxLength",
        )?;
    }
    if let Some(number) = value.as_f64() {
        bound(name, "", number, property, "minimum", "maximum")?;
    }
    Ok(())
}

/// Whether `text` is a `data:<type>/<subtype>;base64,<data>` URL whose data decodes.
fn is_base64_data_url(text: &str) -> bool {
    use base64::Engine;
    let Some((head, data)) = text
        .strip_prefix("data:")
        .and_then(|rest| rest.split_once(','))
    else {
        return false;
    };
    let Some(media_type) = head.strip_suffix(";base64") else {
        return false;
    };
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let names_a_type = media_type
        .split_once('/')
        .is_some_and(|(kind, sub)| token(kind) && token(sub));
    names_a_type
        && base64::engine::general_purpose::STANDARD
            .decode(data)
            .is_ok()
}

/// The values a single-choice property allows (`enum`, or the `const`s of `oneOf`/`anyOf`);
/// empty when it is not a choice.
fn choices_of(property: &Value) -> Vec<&Value> {
    if let Some(values) = property.get("enum").and_then(Value::as_array) {
        return values.iter().collect();
    }
    ["oneOf", "anyOf"]
        .iter()
        .filter_map(|key| property.get(*key).and_then(Value::as_array))
        .flatten()
        .filter_map(|option| option.get("const"))
        .collect()
}

fn bound(
    name: &str,
    unit: &str,
    amount: f64,
    property: &Value,
    low: &str,
    high: &str,
) -> Result<(), String> {
    let limit = |key: &str| property.get(key).and_then(Value::as_f64);
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    if let Some(least) = limit(low)
        && amount < least
    {
        return Err(format!("'{name}' must be at least {least}{unit}"));
    }
    if let Some(most) = limit(high)
        && amount > most
    {
        return Err(format!("'{name}' must be at most {most}{unit}"));
    }
    Ok(())
}

fn article(kind: &str) -> String {
    match kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
        true => format!("an {kind}"),
        false => format!("a {kind}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 2, "maxLength": 5},
                "age": {"type": "integer", "minimum": 0},
                "ok": {"type": "boolean"},
                "colour": {"type": "string", "enum": ["red", "blue"]},
                "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l"}]},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 1}
            },
            "required": ["name"]
        })
    }

    #[test]
    fn a_complete_answer_passes_unchanged() {
        let answer = json!({"name": "Ada", "age": 36, "ok": true, "colour": "red", "size": "l", "tags": ["b"]});
        assert_eq!(check_form(&schema(), Some(&answer)), Ok(answer));
    }

    #[test]
    fn each_kind_of_wrong_answer_is_named() {
        let wrong = |answer: Value| check_form(&schema(), Some(&answer)).unwrap_err();
        assert_eq!(wrong(json!({})), "'name' is required");
        assert_eq!(
            wrong(json!({"name": "Ada", "x": 1})),
            "the form has no field 'x'"
        );
        assert_eq!(wrong(json!({"name": 3})), "'name' must be a string");
        assert_eq!(
            wrong(json!({"name": "A"})),
            "'name' must be at least 2 characters"
        );
        assert_eq!(
            wrong(json!({"name": "Adelaide"})),
            "'name' must be at most 5 characters"
        );
        assert_eq!(
            wrong(json!({"name": "Ada", "age": 1.5})),
            "'age' must be an integer"
        );
        assert_eq!(
            wrong(json!({"name": "Ada", "age": -1})),
            "'age' must be at least 0"
        );
        assert_eq!(
            wrong(json!({"name": "Ada", "colour": "green"})),
            "'colour' offers no choice \"green\""
        );
        assert_eq!(
            wrong(json!({"name": "Ada", "size": "m"})),
            "'size' offers no choice \"m\""
        );
        assert_eq!(
            wrong(json!({"name": "Ada", "tags": ["c"]})),
            "'tags' offers no choice \"c\""
        );
        assert_eq!(
            wrong(json!({"name": "Ada", "tags": ["a", "b"]})),
            "'tags' must be at most 1 choices"
        );
        assert_eq!(
            wrong(json!(["Ada"])),
            "the answer must be an object of field values"
        );
    }

    #[test]
    fn no_content_is_an_empty_form() {
        let optional = json!({"type": "object", "properties": {"note": {"type": "string"}}});
        assert_eq!(check_form(&optional, None), Ok(json!({})));
        assert!(check_form(&schema(), None).is_err());
    }
}
