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
