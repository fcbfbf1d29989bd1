//! The optional bearer token (`server.token`): who may open `/ws`, `POST /info` and the admin endpoints; and the
//! named tokens (`server.tokens`), which also open `/ws` and `POST /info` and carry allowances of their own.
//!
//! Given as `?token=` or `Authorization: Bearer`, and compared in constant time (`subtle`), so response timing
//! does not reveal how much of a guess was right, nor which token it was near.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::config::NamedToken;

/// Whether a request with this query string and these headers carries the token (always, when none is set).
pub fn authorized(token: &str, query: Option<&str>, headers: &HeaderMap) -> bool {
    if token.is_empty() {
        return true;
    }
    // Every candidate is compared, so the time taken does not depend on where a match was.
    candidates(query, headers).iter().fold(false, |ok, given| ok | same(given, token))
}

/// A client's way in to `/ws` and `POST /info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Access {
    Refused,
    /// `server.token` (or none is set): the per-IP allowances.
    Shared,
    /// The named token of this name: its own allowances.
    Named(Arc<str>),
}

/// Who a client request is: a named token it carries, else whether it carries `shared` (or none is set). Every
/// candidate is compared with every token, whatever matched, so the time taken says nothing of which matched.
pub fn access(shared: &str, named: &[NamedToken], query: Option<&str>, headers: &HeaderMap) -> Access {
    let given = candidates(query, headers);
    let mut found: Option<&NamedToken> = None;
    for t in named {
        let hit = given.iter().fold(false, |ok, g| ok | same(g, &t.token));
        found = if hit { Some(t) } else { found };
    }
    let shared_ok = shared.is_empty() || given.iter().fold(false, |ok, g| ok | same(g, shared));
    match found {
        Some(t) => Access::Named(t.name.as_str().into()),
        None if shared_ok => Access::Shared,
        None => Access::Refused,
    }
}

/// The tokens a request offers: its bearer and every `token=` of its query, decoded.
fn candidates(query: Option<&str>, headers: &HeaderMap) -> Vec<String> {
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let from_query = query.into_iter().flat_map(|q| q.split('&')).filter_map(|kv| kv.strip_prefix("token="));
    bearer.into_iter().chain(from_query).map(percent_decoded).collect()
}

/// `given == token` in time that depends on their lengths only.
fn same(given: &str, token: &str) -> bool {
    bool::from(given.as_bytes().ct_eq(token.as_bytes()))
}

/// `%XX` escapes and `+` decoded: tokens in a URL may be escaped by the client.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub fn unauthorized() -> Response {
    (StatusCode::UNAUTHORIZED, "a valid token is required (?token= or Authorization: Bearer)").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn token_from_query_or_bearer() {
        let none = HeaderMap::new();
        assert!(authorized("", None, &none));
        assert!(!authorized("s3cret", None, &none));
        assert!(authorized("s3cret", Some("audit=1&token=s3cret"), &none));
        assert!(!authorized("s3cret", Some("token=s3cre"), &none));
        assert!(authorized("a b/c", Some("token=a%20b%2Fc"), &none));
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer s3cret"));
        assert!(authorized("s3cret", Some("token=wrong"), &h));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer nope"));
        assert!(!authorized("s3cret", None, &h));
    }

    #[test]
    fn a_named_token_is_told_apart_from_the_shared_one() {
        let named = [NamedToken { name: "desk".into(), token: "d3sk".into(), ..NamedToken::default() }];
        let none = HeaderMap::new();
        let desk = Access::Named("desk".into());
        assert_eq!(access("s3cret", &named, Some("token=d3sk"), &none), desk);
        assert_eq!(access("s3cret", &named, Some("token=s3cret"), &none), Access::Shared);
        assert_eq!(access("s3cret", &named, Some("token=nope"), &none), Access::Refused);
        assert_eq!(access("s3cret", &named, None, &none), Access::Refused);
        // An open server: anyone comes in on the per-IP allowances, a named token on its own.
        assert_eq!(access("", &named, None, &none), Access::Shared);
        assert_eq!(access("", &named, Some("audit=1&token=d3sk"), &none), desk);
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer d3sk"));
        assert_eq!(access("s3cret", &named, None, &h), desk);
        // The admin endpoints take the shared token only.
        assert!(!authorized("s3cret", Some("token=d3sk"), &none));
    }
}
