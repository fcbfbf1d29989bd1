//! `[nats]`: how `hlbook relay --nats` publishes a node's lines and snapshots and how `nats://` sources read them
//! (credentials and TLS from files named here, never from the command line).

use std::path::PathBuf;

use serde::Deserialize;

/// `[nats]` in the config file: how to reach NATS and what to call things there. Credentials are read from
/// files named here, never from the command line.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct NatsConfig {
    /// The JetStream stream of one node's lines (each racing node publishes its own).
    pub stream: String,
    /// Subjects are `<subject_prefix>.<mode>.<stream>`; two nodes' streams need different prefixes.
    pub subject_prefix: String,
    /// A NATS user and a file holding its password (deploy/nats/hlbook.conf defines `publisher` and `edge`).
    pub user: String,
    pub password_file: Option<PathBuf>,
    /// A NATS credentials file (JWT + nkey), instead of user and password.
    pub creds_file: Option<PathBuf>,
    /// PEM CA that signed the NATS servers' certificates; set: TLS is required.
    pub tls_ca_file: Option<PathBuf>,
    /// Edge: its own name in the NATS permissions (`deploy/nats/edge.sh add NAME` writes them): replies come to
    /// the inbox `_INBOX_<name>.>` only it may read, and its consumers are named `<name>` (no other edge may
    /// read or delete them). Empty: the shared `_INBOX.>` and consumers the server names.
    pub name: String,
    /// The JetStream domain streams and snapshots are read in: a regional leaf node's or cluster's (its mirror of
    /// the stream and of the snapshot store, `hlbook relay --mirror-from`); empty: the server's own.
    pub domain: String,
    /// Publisher: how long, and how many bytes, the stream keeps (0 bytes: no byte limit).
    pub max_age_secs: u64,
    pub max_bytes: i64,
    /// Publisher: stream replicas (3 in a 3-node cluster).
    pub replicas: usize,
    /// Publisher: lines longer than this go in parts of at most this many bytes (below NATS's 1 MB default
    /// `max_payload`, headers included).
    pub chunk_bytes: usize,
    /// Publisher: lines of at least this many bytes travel zstd-compressed (0: none). Edges read either.
    pub compress_min_bytes: usize,
    /// Edge: also take the next line straight from its subject, before JetStream has stored it (the stream stays
    /// the record; docs/scale-out.md, "Latency"). Off: lines come from the stream only.
    pub live_subjects: bool,
    /// Publisher: take a node snapshot into the object store this often, so an edge rarely waits for one
    /// (0: only on request).
    pub snapshot_interval_secs: u64,
    /// Publisher: snapshots kept in the object store; older ones are deleted.
    pub snapshots_kept: usize,
    /// Publisher: at most one node snapshot per this many seconds, whoever asks (edges cannot make the node
    /// write snapshots in a loop).
    pub snapshot_min_interval_secs: u64,
    /// Edge: largest snapshot taken from the object store, in bytes once inflated (and as downloaded); a larger
    /// one is refused, as a failed snapshot, before it fills the disk.
    pub max_snapshot_bytes: u64,
    /// Publisher: a snapshot request above the newest height it has published plus this many blocks is refused
    /// (an edge cannot make the node write a snapshot for a height that will not exist for days).
    pub snapshot_max_ahead: u64,
    /// Publisher: a client (by its reply inbox's prefix, i.e. its name) may ask for a new node snapshot at most
    /// once per this many seconds; more often it is answered from the stored ones, or refused.
    pub snapshot_client_interval_secs: u64,
}

impl Default for NatsConfig {
    fn default() -> NatsConfig {
        NatsConfig {
            stream: "HL".into(),
            subject_prefix: "hl".into(),
            user: String::new(),
            password_file: None,
            creds_file: None,
            tls_ca_file: None,
            name: String::new(),
            domain: String::new(),
            max_age_secs: 6 * 3600,
            max_bytes: 0,
            replicas: 1,
            chunk_bytes: 900 * 1024,
            compress_min_bytes: 32 * 1024,
            live_subjects: true,
            snapshot_interval_secs: 30,
            snapshots_kept: 3,
            snapshot_min_interval_secs: 5,
            // A whole-market snapshot is hundreds of MB of JSON.
            max_snapshot_bytes: 16 << 30,
            snapshot_max_ahead: 1000,
            snapshot_client_interval_secs: 30,
        }
    }
}

impl NatsConfig {
    pub fn check(&self) -> Result<(), String> {
        let name_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok(&self.stream) {
            return Err(format!("nats.stream {:?}: letters, digits, `_` and `-` only", self.stream));
        }
        if self.subject_prefix.is_empty() || self.subject_prefix.contains(['*', '>', ' ']) {
            return Err(format!("nats.subject_prefix {:?}: a subject without wildcards", self.subject_prefix));
        }
        if !(4096..=64 << 20).contains(&self.chunk_bytes) {
            return Err("nats.chunk_bytes: 4096 ..= 67108864".into());
        }
        if !(1..=5).contains(&self.replicas) {
            return Err("nats.replicas: 1 ..= 5".into());
        }
        if !(1..=100).contains(&self.snapshots_kept) {
            return Err("nats.snapshots_kept: 1 ..= 100".into());
        }
        if !self.name.is_empty() && !name_ok(&self.name) {
            return Err(format!("nats.name {:?}: letters, digits, `_` and `-` only", self.name));
        }
        if !self.domain.is_empty() && !name_ok(&self.domain) {
            return Err(format!("nats.domain {:?}: letters, digits, `_` and `-` only", self.domain));
        }
        if self.user.is_empty() != self.password_file.is_none() {
            return Err("nats.user and nats.password_file go together".into());
        }
        Ok(())
    }

    /// The inbox prefix replies come to: the edge's own under `nats.name`.
    pub fn inbox_prefix(&self) -> String {
        if self.name.is_empty() { "_INBOX".into() } else { format!("_INBOX_{}", self.name) }
    }
}

#[cfg(test)]
mod tests {
    use super::NatsConfig;

    #[test]
    fn a_name_gives_its_own_inbox_and_names_and_domains_are_single_tokens() {
        let mut c = NatsConfig::default();
        assert_eq!(c.inbox_prefix(), "_INBOX");
        c.name = "tokyo-1".into();
        assert_eq!(c.inbox_prefix(), "_INBOX_tokyo-1");
        assert!(c.check().is_ok());
        c.name = "a.b".into();
        assert!(c.check().unwrap_err().contains("nats.name"));
        c.name = String::new();
        c.domain = "hub>".into();
        assert!(c.check().unwrap_err().contains("nats.domain"));
    }
}
