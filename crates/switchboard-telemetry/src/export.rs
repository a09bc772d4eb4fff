//! Sending spans to an OpenTelemetry collector over OTLP/HTTP (protobuf).
//!
//! Only an operator turns this on (`serve --otlp-endpoint`), naming the collector. Spans are
//! batched in memory (the SDK's batch processor: at most 2,048 waiting, newer ones dropped
//! when the collector is slow or away) and sent from the processor's own thread, so a slow
//! collector never holds a call up. The standard `OTEL_*` variables (`OTEL_SERVICE_NAME`,
//! `OTEL_EXPORTER_OTLP_HEADERS` for a collector's key, `OTEL_BSP_SCHEDULE_DELAY`,
//! `OTEL_TRACES_SAMPLER`) apply as they do everywhere.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The endpoint is not an `http` or `https` URL.
    #[error("the OTLP endpoint '{0}' is not an http:// or https:// URL")]
    Endpoint(String),
    /// The exporter could not be built.
    #[error("cannot set up the OTLP exporter: {0}")]
    Exporter(String),
}

/// The trace export running; [`Self::shutdown`] sends what is still waiting.
pub struct Export {
    provider: SdkTracerProvider,
}

impl Export {
    /// Sends the spans still waiting (within the exporter's timeout) and stops. Call it
    /// outside the async runtime: it blocks until the collector answered.
    pub fn shutdown(self) {
        if let Err(error) = self.provider.shutdown() {
            eprintln!("warning: traces not all sent to the OTLP collector: {error}");
        }
    }
}

/// The URL spans are posted to: `endpoint` as given when it already ends with `/v1/traces`,
/// else that path below it (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read).
pub fn traces_url(endpoint: &str) -> Result<url::Url, ExportError> {
    let bad = || ExportError::Endpoint(endpoint.to_owned());
    let mut url = url::Url::parse(endpoint).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(bad());
    }
    if !url.path().ends_with("/v1/traces") {
        let path = format!("{}/v1/traces", url.path().trim_end_matches('/'));
        url.set_path(&path);
    }
    Ok(url)
}

/// A layer exporting the spans of [`crate::TARGET`] (and nothing else: no log line becomes a
/// span event) to the collector at `endpoint`, and the export's handle.
pub fn layer<S>(endpoint: &str) -> Result<(impl Layer<S> + Send + Sync, Export), ExportError>
where
    S: tracing::Subscriber + for<'span> LookupSpan<'span> + Send + Sync,
{
    let url = traces_url(endpoint)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url.as_str())
        .build()
        .map_err(|error| ExportError::Exporter(error.to_string()))?;
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("switchboard");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("switchboard");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_level(false)
        .with_filter(Targets::new().with_target(crate::TARGET, tracing::Level::TRACE));
    Ok((layer, Export { provider }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_to_a_base_endpoint_and_kept_on_a_full_one() {
        for (given, posted) in [
            ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
            (
                "https://otel.example/prefix",
                "https://otel.example/prefix/v1/traces",
            ),
            ("http://[::1]:4318/v1/traces", "http://[::1]:4318/v1/traces"),
        ] {
            assert_eq!(traces_url(given).expect(given).as_str(), posted);
        }
        for bad in [
            "127.0.0.1:4318",
            "ftp://host/",
            "file:///tmp/x",
            "not a url",
        ] {
            assert!(traces_url(bad).is_err(), "{bad}");
        }
    }
}
