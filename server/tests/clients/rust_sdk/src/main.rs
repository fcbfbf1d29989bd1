//! Runs README.md's hyperliquid_rust_sdk snippet as written (build.rs copies it in) and prints every L2Book
//! message the SDK hands to the snippet's `sender`, one JSON line each, in the official l2Book data shape
//! (`{"coin","time","levels":[[{"px","sz","n"}…],[…]]}`). server/tests/sdk_clients.rs compares those lines with
//! the server's own frames.
//!
//!     rust_sdk_snippet COUNT SECONDS   exit 0 after COUNT books, 2 if the snippet returned an error, 3 if the
//!                                      books did not come within SECONDS, 4 if the SDK sent anything else
//!     rust_sdk_snippet --snippet       print the README snippet this binary was built from

use std::process::exit;
use std::time::Duration;

use hyperliquid_rust_sdk::{BaseUrl, BookLevel, InfoClient, L2BookData, Message, Subscription};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

include!(concat!(env!("OUT_DIR"), "/readme_snippet.rs"));

const SNIPPET: &str = include_str!(concat!(env!("OUT_DIR"), "/readme_snippet.txt"));

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--snippet") {
        print!("{SNIPPET}");
        return;
    }
    let [count, seconds] = &args[..] else {
        eprintln!("usage: rust_sdk_snippet COUNT SECONDS | rust_sdk_snippet --snippet");
        exit(64);
    };
    let (count, seconds): (usize, u64) = (count.parse().expect("COUNT"), seconds.parse().expect("SECONDS"));
    // The SDK logs messages it could not parse (and drops them) instead of returning an error.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    let (sender, receiver) = unbounded_channel();
    let run = readme_snippet(sender, books(receiver, count));
    match tokio::time::timeout(Duration::from_secs(seconds), run).await {
        Ok(Ok(Ok(()))) => exit(0),
        Ok(Ok(Err(other))) => {
            eprintln!("the SDK sent {other}");
            exit(4)
        }
        Ok(Err(e)) => {
            eprintln!("the snippet returned an error: {e}");
            exit(2)
        }
        Err(_) => {
            eprintln!("fewer than {count} books within {seconds} s");
            exit(3)
        }
    }
}

/// Prints the first `count` books; any other message (`NoData` is a closed connection) ends it.
async fn books(mut receiver: UnboundedReceiver<Message>, count: usize) -> Result<(), String> {
    for _ in 0..count {
        match receiver.recv().await {
            Some(Message::L2Book(book)) => println!("{}", as_json(&book.data)),
            Some(other) => return Err(format!("{other:?}")),
            None => return Err("nothing more: the channel closed".into()),
        }
    }
    Ok(())
}

/// The SDK's types only deserialize; this is the wire shape back.
fn as_json(book: &L2BookData) -> Value {
    let level = |l: &BookLevel| json!({"px": l.px, "sz": l.sz, "n": l.n});
    let levels: Vec<Value> = book.levels.iter().map(|side| side.iter().map(level).collect()).collect();
    json!({"coin": book.coin, "time": book.time, "levels": levels})
}
