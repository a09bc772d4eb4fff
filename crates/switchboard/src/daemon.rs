//! Finding and talking to the daemon that serves this data directory.
//!
//! While `switchboard serve` runs, the CLI's reads and calls (`status`, `tools`, `call`, ...)
//! and `switchboard stdio` go through it instead of starting every server a second time: its
//! servers are already connected, a stdio server runs once, and a question a tool asks reaches
//! the console where a person answers it. `serve` announces itself in the data directory's
//! `daemon.json` (its URL, process and store; owner-only, removed when it stops); `--daemon URL`
//! names one explicitly, `--standalone` runs the servers in the CLI's own process as before.
//!
//! A daemon that needs an API key (a listener on another address than loopback, or
//! `serve --users`) gets the one in `SWITCHBOARD_API_KEY`. No key is written to disk: the
//! file holds nothing a reader of the data directory could not see already.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The file in the data directory naming the daemon that serves it.
pub const DAEMON_FILE: &str = "daemon.json";

/// The environment variable with the key the CLI presents to a daemon that needs one.
pub const API_KEY_ENV: &str = "SWITCHBOARD_API_KEY";

/// How long finding the daemon may take: it is on this machine, or named on purpose.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What `daemon.json` says.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DaemonFile {
    /// Where its HTTP listener answers (`http://127.0.0.1:8750`).
    pub url: url::Url,
    /// Its process id.
    pub pid: u32,
    /// The store it serves, as `--store` names it (a password shown as `********`).
    pub store: String,
}

/// Why the daemon could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Nothing answers at its URL.
    #[error("the daemon at {url} does not answer: {reason}")]
    Unreachable {
        /// Its URL.
        url: url::Url,
        /// What the connection said.
        reason: String,
    },
    /// It wants an API key the CLI does not have, or refused the one it has.
    #[error(
        "the daemon at {url} needs an API key: set {API_KEY_ENV} to one of its operator keys \
         (SWITCHBOARD_API_KEYS) or a user's key, or run the servers here with --standalone"
    )]
    NeedsKey {
        /// Its URL.
        url: url::Url,
    },
    /// It answered with an error.
    #[error("{message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its words.
        message: String,
    },
    /// Its answer was not what the API describes.
    #[error("the daemon's answer to {path} could not be read: {reason}")]
    BadAnswer {
        /// What was asked.
        path: String,
        /// Why it could not be read.
        reason: String,
    },
}

/// Announces a running daemon in its data directory; the announcement is withdrawn when this
/// is dropped (unless another daemon has announced itself since).
#[derive(Debug)]
pub struct Announcement {
    path: PathBuf,
    pid: u32,
}

impl Announcement {
    /// Writes `daemon.json` into `dir` (owner-only): the daemon at `url` serves `store`.
    pub fn write(dir: &Path, url: url::Url, store: String) -> std::io::Result<Self> {
        let pid = std::process::id();
        let path = dir.join(DAEMON_FILE);
        let text = serde_json::to_vec_pretty(&DaemonFile { url, pid, store })
            .map_err(std::io::Error::other)?;
        let partial = dir.join(format!(".{DAEMON_FILE}.{pid}"));
        write_owner_only(&partial, &text)?;
        std::fs::rename(&partial, &path)?;
        Ok(Self { path, pid })
    }
}

impl Drop for Announcement {
    fn drop(&mut self) {
        let still_ours = std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<DaemonFile>(&bytes).ok())
            .is_some_and(|file| file.pid == self.pid);
        if still_ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn write_owner_only(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// A running daemon the CLI talks to through its admin API and `/mcp`.
#[derive(Debug, Clone)]
pub struct Daemon {
    base: url::Url,
    http: reqwest::Client,
    key: Option<String>,
}

impl Daemon {
    /// The daemon to use: the one `explicit` names (which must answer), else the one
    /// announced in `dir` for `store`, if it answers. `None`: run the servers here.
    pub async fn find(
        explicit: Option<&url::Url>,
        dir: &Path,
        store: &str,
    ) -> Result<Option<Self>, DaemonError> {
        let key = std::env::var(API_KEY_ENV)
            .ok()
            .filter(|key| !key.trim().is_empty());
        if let Some(url) = explicit {
            let daemon = Self::at(url.clone(), key)?;
            daemon.probe().await?;
            return Ok(Some(daemon));
        }
        let Some(file) = std::fs::read(dir.join(DAEMON_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<DaemonFile>(&bytes).ok())
        else {
            return Ok(None);
        };
        // Another store's daemon (the same directory with `--store postgres://...`, say) is
        // not this one's.
        if file.store != store {
            return Ok(None);
        }
        let daemon = Self::at(file.url, key)?;
        // A file left by a daemon that was killed names nothing that answers, or something
        // else on its port: the servers are started here then. A daemon that wants a key the
        // CLI lacks is said, not bypassed.
        match daemon.probe().await {
            Ok(()) => Ok(Some(daemon)),
            Err(error @ DaemonError::NeedsKey { .. }) => Err(error),
            Err(DaemonError::Unreachable { .. }) => Ok(None),
            Err(other) => {
                eprintln!(
                    "warning: {} names {}, which did not answer as a Switchboard daemon ({other}); starting the servers here",
                    dir.join(DAEMON_FILE).display(),
                    daemon.url()
                );
                Ok(None)
            }
        }
    }

    fn at(base: url::Url, key: Option<String>) -> Result<Self, DaemonError> {
        let unreachable = |reason: String| DaemonError::Unreachable {
            url: base.clone(),
            reason,
        };
        if !matches!(base.scheme(), "http" | "https") {
            return Err(unreachable("not an http(s) URL".into()));
        }
        let on_this_machine = match base.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(name)) => name == "localhost",
            None => false,
        };
        if key.is_some() && base.scheme() == "http" && !on_this_machine {
            eprintln!(
                "warning: {API_KEY_ENV} goes to {base} over plain http: anyone on the way can read it; use https"
            );
        }
        let http = reqwest::Client::builder()
            .connect_timeout(PROBE_TIMEOUT)
            // It is the daemon the user named or this machine's own: no proxy in between, and
            // the key goes nowhere a redirect would send it.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(Self { base, http, key })
    }

    /// Its base URL.
    pub fn url(&self) -> &url::Url {
        &self.base
    }

    /// The URL of `path` (with its query) at the daemon.
    pub fn url_of(&self, path: &str) -> url::Url {
        let mut url = self.base.clone();
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let base = url.path().trim_end_matches('/').to_owned();
        url.set_path(&format!("{base}{path}"));
        url.set_query((!query.is_empty()).then_some(query));
        url
    }

    /// The key it gets, if any.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The HTTP client that reaches it.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Checks that it answers as a Switchboard daemon (`/api/me` names a workspace) and takes
    /// the CLI's key.
    async fn probe(&self) -> Result<(), DaemonError> {
        let me: Value = tokio::time::timeout(PROBE_TIMEOUT, self.get("/api/me"))
            .await
            .map_err(|_| DaemonError::Unreachable {
                url: self.base.clone(),
                reason: format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
            })??;
        if me.get("workspace").and_then(Value::as_str).is_none() {
            return Err(DaemonError::BadAnswer {
                path: "/api/me".into(),
                reason: "it names no workspace".into(),
            });
        }
        Ok(())
    }

    /// A request for `path`, with the key.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, self.url_of(path));
        match &self.key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// `GET path`, read as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, DaemonError> {
        self.send(path, self.request(reqwest::Method::GET, path))
            .await
    }

    /// `POST path` with `body`, read as `T`.
    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<T, DaemonError> {
        self.send(path, self.request(reqwest::Method::POST, path).json(body))
            .await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        path: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<T, DaemonError> {
        let response = self.answer(request).await?;
        let bytes = response.bytes().await.map_err(|e| self.unreachable(e))?;
        serde_json::from_slice(&bytes).map_err(|e| DaemonError::BadAnswer {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    /// Sends `request`; a response that is not a success becomes the error it says.
    pub async fn answer(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, DaemonError> {
        let response = request.send().await.map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(DaemonError::NeedsKey {
                url: self.base.clone(),
            });
        }
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|body| {
                body.get("error")
                    .and_then(|e| e.as_str().or_else(|| e.get("message")?.as_str()))
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("the daemon answered {status}: {}", text.trim()));
        Err(DaemonError::Refused {
            status: status.as_u16(),
            message,
        })
    }

    fn unreachable(&self, error: reqwest::Error) -> DaemonError {
        DaemonError::Unreachable {
            url: self.base.clone(),
            reason: without_url(&error),
        }
    }
}

/// What went wrong with a request: its causes, without the URL reqwest puts in front.
fn without_url(error: &reqwest::Error) -> String {
    let mut causes = Vec::new();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    if causes.is_empty() {
        error.to_string()
    } else {
        causes.join(": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_the_daemons_url_with_their_query() {
        let daemon = Daemon::at("http://127.0.0.1:8750".parse().unwrap(), None).unwrap();
        assert_eq!(
            daemon.url_of("/api/tools/search?q=a%20b").as_str(),
            "http://127.0.0.1:8750/api/tools/search?q=a%20b"
        );
        let behind = Daemon::at("http://127.0.0.1:8750/sb/".parse().unwrap(), None).unwrap();
        assert_eq!(
            behind.url_of("/mcp").as_str(),
            "http://127.0.0.1:8750/sb/mcp"
        );
    }

    #[test]
    fn an_announcement_is_owner_only_and_withdrawn_only_by_its_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let url: url::Url = "http://127.0.0.1:1".parse().unwrap();
        let ours = Announcement::write(dir.path(), url.clone(), "store".into()).unwrap();
        let path = dir.path().join(DAEMON_FILE);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "only its owner reads it: {mode:o}");
        }
        // Another daemon took the directory over: dropping ours leaves its file.
        let other = DaemonFile {
            url,
            pid: std::process::id() + 1,
            store: "store".into(),
        };
        std::fs::write(&path, serde_json::to_vec(&other).unwrap()).unwrap();
        drop(ours);
        assert!(path.exists());
        std::fs::remove_file(&path).unwrap();
        let ours = Announcement::write(dir.path(), other.url, "store".into()).unwrap();
        drop(ours);
        assert!(!path.exists());
    }
}
