//! The publisher's stream as the config says it should be: created when missing, updated when a setting changed
//! (`max_age_secs`, `max_bytes`, `replicas` and the rest), or refused with an error that names the setting when
//! NATS cannot change it in place (storage type, or the subjects, which would move another publisher's lines).
//! Before this, an existing stream kept whatever it was created with and config changes were silently ignored.

use anyhow::Context;
use async_nats::jetstream::{self, stream};

/// A stream NATS cannot bring to the config's settings: the relay stops with this rather than retry forever.
#[derive(Debug)]
pub struct Unchangeable(pub String);

impl std::fmt::Display for Unchangeable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unchangeable {}

/// The settings of `have` that differ from `want`, by config name; the stream is left alone when none do.
fn changed(have: &stream::Config, want: &stream::Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut check = |differs: bool, name| {
        if differs {
            out.push(name);
        }
    };
    check(have.max_age != want.max_age, "nats.max_age_secs");
    check(have.max_bytes != want.max_bytes, "nats.max_bytes");
    check(have.num_replicas != want.num_replicas, "nats.replicas");
    check(have.duplicate_window != want.duplicate_window, "duplicate window");
    check(have.allow_direct != want.allow_direct, "allow_direct");
    check(have.deny_delete != want.deny_delete || have.deny_purge != want.deny_purge, "deny delete/purge");
    out
}

/// Why `have` cannot become `want` in place, if it cannot.
fn unchangeable(name: &str, have: &stream::Config, want: &stream::Config) -> Option<String> {
    if have.subjects != want.subjects {
        return Some(format!(
            "stream {name} holds subjects {:?}, this publisher's are {:?} (another mode or nats.subject_prefix): \
             use another nats.stream, or delete the stream first",
            have.subjects, want.subjects
        ));
    }
    if have.storage != want.storage {
        return Some(format!("stream {name}: its storage type cannot change; delete the stream first"));
    }
    None
}

fn not_found(e: &jetstream::context::GetStreamError) -> bool {
    use jetstream::context::GetStreamErrorKind as K;
    matches!(e.kind(), K::JetStream(j) if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND)
}

/// The stream `want.name`, created or brought to `want`'s settings.
pub async fn ensure(js: &jetstream::Context, want: stream::Config) -> anyhow::Result<stream::Stream> {
    let name = want.name.clone();
    let mut st = match js.get_stream(&name).await {
        Ok(st) => st,
        Err(e) if not_found(&e) => {
            return js.create_stream(want).await.with_context(|| format!("creating stream {name}"));
        }
        Err(e) => return Err(e).with_context(|| format!("stream {name}")),
    };
    let have = st.info().await.with_context(|| format!("stream {name}"))?.config.clone();
    if let Some(why) = unchangeable(&name, &have, &want) {
        return Err(Unchangeable(why).into());
    }
    let what = changed(&have, &want);
    if what.is_empty() {
        return Ok(st);
    }
    tracing::info!(stream = %name, "applying changed settings to the stream: {}", what.join(", "));
    js.update_stream(want).await.with_context(|| {
        format!("stream {name}: NATS refused to apply {} (see its error; some need a new stream)", what.join(", "))
    })?;
    js.get_stream(&name).await.with_context(|| format!("stream {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn config(age: u64) -> stream::Config {
        stream::Config {
            name: "HL".into(),
            subjects: vec!["hl.by-block.*".into()],
            max_age: Duration::from_secs(age),
            num_replicas: 1,
            ..Default::default()
        }
    }

    #[test]
    fn changed_settings_are_named_and_the_same_ones_are_left_alone() {
        assert!(changed(&config(60), &config(60)).is_empty());
        let mut want = config(120);
        want.num_replicas = 3;
        assert_eq!(changed(&config(60), &want), ["nats.max_age_secs", "nats.replicas"]);
        assert!(unchangeable("HL", &config(60), &want).is_none());
    }

    #[test]
    fn other_subjects_or_storage_are_refused_not_changed() {
        let mut other = config(60);
        other.subjects = vec!["hl.streaming.*".into()];
        assert!(unchangeable("HL", &config(60), &other).unwrap().contains("another mode"));
        other = config(60);
        other.storage = stream::StorageType::Memory;
        assert!(unchangeable("HL", &config(60), &other).unwrap().contains("storage"));
    }
}
