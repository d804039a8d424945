//! The scheduler's fire spans exported through OpenTelemetry, here to stdout: a cron job that
//! succeeds and a fixed-rate job that fails, for about three seconds.
//!
//! ```text
//! cargo run -p shedlock-tests --example opentelemetry
//! ```
//!
//! Each span `shedlock_job` prints with its attributes: `faas.trigger`, `faas.time`, `faas.cron`
//! for the cron job, `shedlock.schedule`, `shedlock.fencing_token`, `shedlock.claim` and
//! `shedlock.outcome`, and an error status for the failed runs (README.md, "OpenTelemetry").

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use shedlock_core::{InMemoryLockProvider, Job, LockingTaskExecutor, Schedule, Scheduler};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // To send the spans to a collector instead, build an OTLP exporter with the
    // `opentelemetry-otlp` crate and hand it to the provider in place of the stdout one:
    //
    //     let exporter = opentelemetry_otlp::SpanExporter::builder().with_tonic().build()?;
    //     SdkTracerProvider::builder().with_batch_exporter(exporter) ...
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .with_resource(
            Resource::builder()
                .with_service_name("shedlock-example")
                .build(),
        )
        .build();
    tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("shedlock-example")))
        .try_init()?;

    let executor = LockingTaskExecutor::builder(InMemoryLockProvider::new())
        .default_at_most(Duration::from_secs(30))
        .build()?;
    let scheduler = Scheduler::new(executor);
    scheduler.add(Job::new(
        "report",
        Schedule::cron("* * * * * *")?,
        |_run| async {},
    ))?;
    scheduler.add(Job::new(
        "sync",
        Schedule::every(Duration::from_secs(2))?,
        |_run| async { Err::<(), _>("the upstream answered 503") },
    ))?;
    scheduler.start().await?;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    scheduler.shutdown(Duration::from_secs(1)).await;
    // Exports what is left and stops the exporter.
    provider.shutdown()?;
    Ok(())
}
