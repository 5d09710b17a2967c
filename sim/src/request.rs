//! What a request asks for besides its path: the query parameters and the representation
//! (object, Table or PartialObjectMetadata) its Accept header negotiates. Read by the
//! HTTP routing (`server`) and by the watch streams (`watch`) alike.

use std::collections::HashMap;

use http::{HeaderMap, header};

/// A request's query parameters.
pub type Query = HashMap<String, String>;

/// Decodes a URL query string (`None`: no query).
pub fn parse_query(q: Option<&str>) -> Query {
    let mut out = HashMap::new();
    if let Some(q) = q {
        for (k, v) in form_urlencoded::parse(q.as_bytes()) {
            out.insert(k.into_owned(), v.into_owned());
        }
    }
    out
}

/// What the Accept header asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    Object,
    Table,
    PartialMetadata,
}

/// The representation the Accept header asks for.
pub fn representation(headers: &HeaderMap) -> Representation {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The first acceptable alternative wins, as in the API server's negotiation.
    for alt in accept.split(',') {
        let alt = alt.trim();
        if alt.contains("as=Table") && alt.contains("g=meta.k8s.io") {
            return Representation::Table;
        }
        if alt.contains("as=PartialObjectMetadata") && alt.contains("g=meta.k8s.io") {
            return Representation::PartialMetadata;
        }
        if alt.starts_with("application/json")
            || alt.starts_with("*/*")
            || alt.starts_with("application/yaml")
        {
            return Representation::Object;
        }
    }
    Representation::Object
}
