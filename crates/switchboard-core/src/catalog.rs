//! A small built-in catalog of well-known remote MCP servers.
//!
//! `switchboard server add notion` resolves the name here, so users need not look up endpoint
//! URLs. Each entry is the vendor's public Streamable HTTP endpoint; all of them sign in with OAuth.

/// One catalog entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogEntry {
    /// The id the server gets when added.
    pub id: &'static str,
    /// Display name.
    pub display_name: &'static str,
    /// What the server offers.
    pub description: &'static str,
    /// The public MCP endpoint.
    pub url: &'static str,
}

/// Every built-in entry, in alphabetical order.
pub const CATALOG: &[CatalogEntry] = &[
    CatalogEntry {
        id: "ahrefs",
        display_name: "Ahrefs",
        description: "SEO data: backlinks, keywords, site metrics",
        url: "https://api.ahrefs.com/mcp/mcp",
    },
    CatalogEntry {
        id: "context7",
        display_name: "Context7",
        description: "Up-to-date library documentation and code examples",
        url: "https://mcp.context7.com/mcp",
    },
    CatalogEntry {
        id: "deepwiki",
        display_name: "DeepWiki",
        description: "Questions and answers over public GitHub repositories",
        url: "https://mcp.deepwiki.com/mcp",
    },
    CatalogEntry {
        id: "linear",
        display_name: "Linear",
        description: "Issues, projects and cycles in Linear",
        url: "https://mcp.linear.app/mcp",
    },
    CatalogEntry {
        id: "notion",
        display_name: "Notion",
        description: "Search, read and edit Notion pages and databases",
        url: "https://mcp.notion.com/mcp",
    },
    CatalogEntry {
        id: "supabase",
        display_name: "Supabase",
        description: "Manage Supabase projects, databases and functions",
        url: "https://mcp.supabase.com/mcp",
    },
];

/// Looks an entry up by id, ignoring case.
pub fn lookup(name: &str) -> Option<&'static CatalogEntry> {
    CATALOG.iter().find(|e| e.id.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{ServerId, TransportSpec};

    #[test]
    fn every_entry_is_a_valid_https_server() {
        for entry in CATALOG {
            ServerId::new(entry.id).unwrap();
            let transport = TransportSpec::from_url(entry.url, vec![]).unwrap();
            assert_eq!(transport.kind(), "http");
            assert!(entry.url.starts_with("https://"), "{}", entry.id);
        }
        assert_eq!(lookup("Notion").unwrap().id, "notion");
        assert!(lookup("nope").is_none());
    }
}
