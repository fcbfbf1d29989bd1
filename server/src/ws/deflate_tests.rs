use super::*;

fn plain(client_no_context_takeover: bool) -> Option<Agreed> {
    let mut response = String::from("permessage-deflate; server_no_context_takeover");
    if client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }
    Some(Agreed { response, client_no_context_takeover })
}

#[test]
fn negotiate_accepts_browser_and_library_offers() {
    // Chromium and Python websockets.
    assert_eq!(negotiate(["permessage-deflate; client_max_window_bits"]), plain(false));
    // Firefox.
    assert_eq!(negotiate(["permessage-deflate"]), plain(false));
    // Boost.Beast with its defaults written out.
    assert_eq!(negotiate(["permessage-deflate; client_max_window_bits=15; server_max_window_bits=15"]), plain(false));
}

#[test]
fn negotiate_is_tolerant_of_case_spaces_and_quotes() {
    let offer = "  Permessage-Deflate ;Client_Max_Window_Bits = \"10\" ;  SERVER_NO_CONTEXT_TAKEOVER ";
    assert_eq!(negotiate([offer]), plain(false));
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=\"15\""]), plain(false));
}

#[test]
fn negotiate_declines_other_extensions() {
    assert_eq!(negotiate(["x-webkit-deflate-frame"]), None);
    assert_eq!(negotiate(["deflate-frame, x-webkit-deflate-frame; max_window_bits=10"]), None);
    assert_eq!(negotiate([]), None);
    assert_eq!(negotiate([""]), None);
}

#[test]
fn negotiate_skips_an_offer_with_a_small_server_window() {
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=10, permessage-deflate"]), plain(false));
    // The declined first offer would have echoed client_no_context_takeover.
    let offers = "permessage-deflate; server_max_window_bits=10; client_no_context_takeover, permessage-deflate";
    assert_eq!(negotiate([offers]), plain(false));
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=10"]), None);
    // server_max_window_bits needs a value.
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits"]), None);
}

#[test]
fn negotiate_declines_duplicated_unknown_and_bad_parameters() {
    for offer in [
        "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; client_max_window_bits; Client_Max_Window_Bits=15",
        "permessage-deflate; server_max_window_bits=15; server_max_window_bits=15",
        "permessage-deflate; mystery",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=015",
        "permessage-deflate; client_max_window_bits=+9",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; client_max_window_bits=\"\"",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=true",
    ] {
        assert_eq!(negotiate([offer]), None, "{offer}");
    }
}

#[test]
fn negotiate_echoes_client_no_context_takeover() {
    let agreed = negotiate(["permessage-deflate; client_no_context_takeover; client_max_window_bits=12"]);
    assert_eq!(agreed, plain(true));
}

#[test]
fn negotiate_reads_several_header_lines() {
    let lines =
        ["x-webkit-deflate-frame", "foo; bar=1, permessage-deflate; client_no_context_takeover", "permessage-deflate"];
    assert_eq!(negotiate(lines), plain(true));
}

/// Text shaped like the book updates the server sends.
fn json_like(len: usize) -> Vec<u8> {
    let mut text = String::from("[");
    for i in 0.. {
        if text.len() >= len {
            break;
        }
        text.push_str(&format!(r#"{{"px":"{}.{}","sz":"{}","n":{}}},"#, 81_000 + i % 97, i % 10, i * 7 % 1000, i % 5));
    }
    text.truncate(len);
    text.into_bytes()
}

#[test]
fn deflate_message_round_trips_and_strips_the_tail() {
    let mut inflater = Inflater::new(false, 1 << 20);
    for len in [0, 1, 2, 125, 65_536, 100_000] {
        let text = json_like(len);
        let compressed = deflate_message(&text, 6);
        assert!(!compressed.ends_with(&TAIL), "{len} bytes left the tail on");
        assert_eq!(inflater.inflate(&compressed).unwrap(), text, "{len} bytes");
    }
    assert!(deflate_message(&json_like(100_000), 6).len() < 50_000, "JSON-like text should compress well");
}

#[test]
fn deflate_message_is_valid_at_every_level() {
    let text = json_like(5_000);
    for level in [0, 1, 9, 42] {
        let compressed = deflate_message(&text, level);
        assert!(!compressed.ends_with(&TAIL), "level {level}");
        assert_eq!(Inflater::new(true, 1 << 20).inflate(&compressed).unwrap(), text, "level {level}");
    }
}

#[test]
fn one_inflater_reads_messages_in_sequence() {
    for no_context_takeover in [false, true] {
        let mut inflater = Inflater::new(no_context_takeover, 1 << 20);
        for text in [json_like(3_000), json_like(10), Vec::new(), json_like(3_000)] {
            assert_eq!(inflater.inflate(&deflate_message(&text, 6)).unwrap(), text);
        }
    }
}

/// Messages compressed by one compressor kept across them, as a client with context takeover sends them.
fn with_context_takeover(messages: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut compress = Compress::new(Compression::default(), false);
    let mut out = Vec::new();
    for message in messages {
        let mut compressed = Vec::with_capacity(message.len() + 64);
        let before = compress.total_in();
        compress.compress_vec(message, &mut compressed, FlushCompress::Sync).unwrap();
        assert_eq!(compress.total_in() - before, message.len() as u64);
        assert!(compressed.len() < compressed.capacity(), "flush incomplete");
        assert!(compressed.ends_with(&TAIL));
        compressed.truncate(compressed.len() - TAIL.len());
        out.push(compressed);
    }
    out
}

#[test]
fn inflater_keeps_the_window_with_context_takeover() {
    let text = json_like(2_000);
    let compressed = with_context_takeover(&[&text, &text]);
    // The repeat is a back-reference into the first message.
    assert!(compressed[1].len() < compressed[0].len() / 4);
    let mut inflater = Inflater::new(false, 1 << 20);
    assert_eq!(inflater.inflate(&compressed[0]).unwrap(), text);
    assert_eq!(inflater.inflate(&compressed[1]).unwrap(), text);
    // An inflater that resets per message cannot follow that reference: it fails, or (miniz_oxide, which reads
    // zeros before the start of its window) inflates the wrong text.
    let mut resetting = Inflater::new(true, 1 << 20);
    assert_eq!(resetting.inflate(&compressed[0]).unwrap(), text);
    assert_ne!(resetting.inflate(&compressed[1]).ok(), Some(text));
}

#[test]
fn inflater_stops_a_bomb_at_the_cap() {
    let max = 1 << 20;
    let bomb = deflate_message(&vec![0; 10 << 20], 9);
    assert!(bomb.len() < 20_000);
    let mut inflater = Inflater::new(false, max);
    let error = inflater.inflate(&bomb).unwrap_err();
    assert!(matches!(error, InflateError::TooLarge { max: 1_048_576 }), "{error}");
    assert_eq!(error.to_string(), "compressed message inflates to more than 1048576 bytes");
    // The failed stream was dropped: the next message starts clean.
    assert_eq!(inflater.decompress.total_out(), 0);
    assert_eq!(inflater.inflate(&deflate_message(b"after", 6)).unwrap(), b"after");
}

#[test]
fn inflater_never_inflates_or_allocates_far_past_the_cap() {
    let max = 1 << 20;
    let bomb = deflate_message(&vec![0; 10 << 20], 9);
    let mut inflater = Inflater::new(false, max);
    let mut out = Vec::new();
    assert!(matches!(inflater.feed(&bomb, &mut out), Err(InflateError::TooLarge { .. })));
    // Stopped within one chunk of the cap instead of inflating all 10 MB, and kept at most the cap.
    let inflated = inflater.decompress.total_out();
    assert!(inflated <= (max + CHUNK) as u64, "inflated {inflated} bytes");
    assert!(out.len() <= max && out.capacity() <= max, "kept {} of {} bytes", out.len(), out.capacity());
}

#[test]
fn inflater_accepts_exactly_the_cap() {
    let max = 100_000;
    let mut inflater = Inflater::new(true, max);
    assert_eq!(inflater.inflate(&deflate_message(&vec![7; max], 6)).unwrap().len(), max);
    assert!(matches!(inflater.inflate(&deflate_message(&vec![7; max + 1], 6)), Err(InflateError::TooLarge { .. })));
}

#[test]
fn inflater_rejects_garbage() {
    let error = Inflater::new(false, 1 << 20).inflate(&[0xff; 32]).unwrap_err();
    assert!(matches!(error, InflateError::Corrupt(_)), "{error}");
}
