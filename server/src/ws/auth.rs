//! The optional bearer token (`server.token`): who may open `/ws`, `POST /info` and the admin endpoints.
//!
//! Given as `?token=` or `Authorization: Bearer`, and compared in constant time (`subtle`), so response timing
//! does not reveal how much of a guess was right.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

/// Whether a request with this query string and these headers carries the token (always, when none is set).
pub fn authorized(token: &str, query: Option<&str>, headers: &HeaderMap) -> bool {
    if token.is_empty() {
        return true;
    }
    let same = |given: &str| bool::from(given.as_bytes().ct_eq(token.as_bytes()));
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let from_query = query.into_iter().flat_map(|q| q.split('&')).filter_map(|kv| kv.strip_prefix("token="));
    // Every candidate is compared, so the time taken does not depend on where a match was.
    let mut ok = false;
    for given in bearer.into_iter().chain(from_query) {
        ok |= same(&percent_decoded(given));
    }
    ok
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
}
