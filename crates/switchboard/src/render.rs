//! Printing results for people: content blocks, tables and summaries.

use switchboard_hub::model::{CallToolResult, ContentBlock, GetPromptResult, ResourceContents};

/// Renders a tool result's content blocks as readable text (safe for the terminal: the text is
/// the server's).
pub fn call_result(result: &CallToolResult) -> String {
    safe_lines(&raw_call_result(result)).into_owned()
}

fn raw_call_result(result: &CallToolResult) -> String {
    let mut out = Vec::new();
    for block in &result.content {
        out.push(content_block(block));
    }
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        out.push(serde_json::to_string_pretty(structured).unwrap_or_default());
    }
    out.join("\n")
}

fn human_size(bytes: usize) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MB", bytes as f64 / (1024.0 * 1024.0))
    } else if bytes >= 1024 {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// Decoded size of base64 data, without decoding it.
fn base64_size(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

fn content_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!(
            "[image: {}, {}]",
            image.mime_type,
            human_size(base64_size(&image.data))
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {}]",
            audio.mime_type,
            human_size(base64_size(&audio.data))
        ),
        ContentBlock::Resource(embedded) => resource_contents(&embedded.resource),
        ContentBlock::ResourceLink(link) => format!(
            "[resource link: {}{}]",
            link.uri,
            link.mime_type
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ),
        #[allow(unreachable_patterns)]
        other => format!("[{}]", serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Renders resource contents: text is shown, binary data is summarised.
pub fn resource_contents(contents: &ResourceContents) -> String {
    safe_lines(&raw_resource_contents(contents)).into_owned()
}

fn raw_resource_contents(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => format!(
            "[resource: {uri}{}]\n{text}",
            mime_type
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        ),
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => format!(
            "[resource: {uri}{}, {}]",
            mime_type
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default(),
            human_size(base64_size(blob))
        ),
        #[allow(unreachable_patterns)]
        other => format!(
            "[resource: {}]",
            serde_json::to_string(other).unwrap_or_default()
        ),
    }
}

/// Renders what a resource read gave: each content in turn.
pub fn read_contents(contents: &[ResourceContents]) -> String {
    contents
        .iter()
        .map(resource_contents)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Renders a prompt's messages, each under its role (safe for the terminal).
pub fn prompt_messages(prompt: &GetPromptResult) -> String {
    let mut out = Vec::new();
    if let Some(description) = &prompt.description {
        out.push(format!("# {description}"));
    }
    for message in &prompt.messages {
        let role = serde_json::to_value(&message.role)
            .ok()
            .and_then(|role| role.as_str().map(str::to_owned))
            .unwrap_or_default();
        let content = content_block(&message.content);
        out.push(format!("[{role}]\n{content}"));
    }
    safe_lines(&out.join("\n")).into_owned()
}

/// Prints rows as aligned columns, every cell made safe for the terminal ([`safe`]).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| safe(cell).into_owned()).collect())
        .collect();
    let rows = &rows;
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = vec![line(header.to_vec())];
    for row in rows {
        out.push(line(row.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}

/// `text` safe to write to a terminal: control characters (escape sequences, bells, carriage
/// returns and line breaks, C1 controls) and the invisible marks that reorder text (bidi
/// overrides) are shown as `\u{..}` instead of acting on the terminal. Names and descriptions
/// come from servers and authorization servers, which are not trusted to drive the screen.
pub fn safe(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c| c.is_control())
}

/// [`safe`] for text of several lines (a tool's result): line breaks and tabs stay.
pub fn safe_lines(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c| c.is_control() && !matches!(c, '\n' | '\t'))
}

fn escaped(text: &str, control: impl Fn(char) -> bool) -> std::borrow::Cow<'_, str> {
    let acts = |c: char| {
        control(c)
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| match acts(c) {
                true => c.escape_unicode().to_string(),
                false => c.to_string(),
            })
            .collect(),
    )
}

/// The first line of a description, shortened for a table.
pub fn short(text: Option<&str>, max: usize) -> String {
    let first = text.unwrap_or("").lines().next().unwrap_or("").trim();
    if first.chars().count() > max {
        format!("{}…", first.chars().take(max - 1).collect::<String>())
    } else {
        first.to_owned()
    }
}

/// A tool whose definition changed: each defining field that differs, as approved and now.
pub fn changed_definition(change: &switchboard_hub::ChangedDefinition) -> String {
    let held = if change.held {
        " (held back from clients)"
    } else {
        ""
    };
    let mut text = format!(
        "{}{held}: approved {} ({}), now {}",
        change.tool,
        &change.approved.sha256[..12.min(change.approved.sha256.len())],
        if change.approved.accepted_by.is_empty() {
            "as first seen".to_owned()
        } else {
            format!("accepted by {}", change.approved.accepted_by)
        },
        &change.current_sha256[..12.min(change.current_sha256.len())],
    );
    for field in switchboard_core::definitions::DEFINING_FIELDS {
        let (was, now) = (
            change.approved.definition.get(field),
            change.current.get(field),
        );
        if was != now {
            let show = |value: Option<&serde_json::Value>| {
                value.map_or_else(|| "(none)".to_owned(), serde_json::Value::to_string)
            };
            text.push_str(&format!(
                "\n  {field}:\n    - {}\n    + {}",
                show(was),
                show(now)
            ));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_from_servers_never_reach_the_terminal_raw() {
        assert_eq!(safe("plain_name-1.2"), "plain_name-1.2");
        let hostile = "x\u{1b}[2J\u{7}\r\nowned\u{9b}\u{202e}gpj.exe";
        let shown = safe(hostile);
        assert!(
            !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
            "{shown:?}"
        );
        assert!(
            shown.contains("\\u{1b}[2J") && shown.contains("owned"),
            "{shown}"
        );
    }

    #[test]
    fn sizes_and_tables_read_well() {
        assert_eq!(base64_size("aGVsbG8="), 5);
        assert_eq!(human_size(2048), "2.0 KB");
        let t = table(&["A", "BB"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A    BB\nxyz  1");
        assert_eq!(short(Some("line one\nline two"), 100), "line one");
        assert_eq!(short(Some("abcdef"), 4), "abc…");
    }
}
