//! Label selectors (equality- and set-based) and field selectors, parsed from the
//! query-string syntax the API server accepts.

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum LabelRequirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    pub requirements: Vec<LabelRequirement>,
}

fn valid_label_key(key: &str) -> bool {
    if key.is_empty() {
        return false;
    }
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253)
    {
        return false;
    }
    valid_label_value(name) && !name.is_empty()
}

fn valid_label_value(v: &str) -> bool {
    if v.len() > 63 {
        return false;
    }
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    b.iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// Splits on commas outside parentheses.
fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for part in split_top_level(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err(format!(
                    "unable to parse requirement: found '', expected: identifier in \"{s}\""
                ));
            }
            requirements.push(parse_requirement(p)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Converts a `metav1.LabelSelector` JSON object (matchLabels/matchExpressions).
    pub fn from_json(sel: &Value) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
            for (k, v) in ml {
                requirements.push(LabelRequirement::Eq(
                    k.clone(),
                    v.as_str().unwrap_or_default().to_string(),
                ));
            }
        }
        if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
            for e in exprs {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or("matchExpressions[].key is required")?
                    .to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                requirements.push(match op {
                    "In" => LabelRequirement::In(key, values),
                    "NotIn" => LabelRequirement::NotIn(key, values),
                    "Exists" => LabelRequirement::Exists(key),
                    "DoesNotExist" => LabelRequirement::NotExists(key),
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                });
            }
        }
        Ok(LabelSelector { requirements })
    }

    /// The query-string form (`labels.Selector.String()`), used for Scale.status.selector.
    pub fn to_query(&self) -> String {
        let mut parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| match r {
                LabelRequirement::Eq(k, v) => format!("{k}={v}"),
                LabelRequirement::NotEq(k, v) => format!("{k}!={v}"),
                LabelRequirement::In(k, vs) => {
                    let mut vs = vs.clone();
                    vs.sort();
                    format!("{k} in ({})", vs.join(","))
                }
                LabelRequirement::NotIn(k, vs) => {
                    let mut vs = vs.clone();
                    vs.sort();
                    format!("{k} notin ({})", vs.join(","))
                }
                LabelRequirement::Exists(k) => k.clone(),
                LabelRequirement::NotExists(k) => format!("!{k}"),
                LabelRequirement::Gt(k, n) => format!("{k}>{n}"),
                LabelRequirement::Lt(k, n) => format!("{k}<{n}"),
            })
            .collect();
        parts.sort();
        parts.join(",")
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            LabelRequirement::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelRequirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelRequirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelRequirement::Exists(k) => get(k).is_some(),
            LabelRequirement::NotExists(k) => get(k).is_none(),
            LabelRequirement::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelRequirement::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

fn parse_values(s: &str, whole: &str) -> Result<Vec<String>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| {
            format!("unable to parse requirement: found '{s}', expected: '(' in \"{whole}\"")
        })?;
    let mut out = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        if !valid_label_value(v) {
            return Err(format!(
                "unable to parse requirement: values[0]: Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
            ));
        }
        out.push(v.to_string());
    }
    Ok(out)
}

fn parse_requirement(p: &str) -> Result<LabelRequirement, String> {
    let key_err = |k: &str| {
        format!(
            "unable to parse requirement: key: Invalid value: \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        )
    };
    if let Some(k) = p.strip_prefix('!') {
        let k = k.trim();
        if !valid_label_key(k) {
            return Err(key_err(k));
        }
        return Ok(LabelRequirement::NotExists(k.into()));
    }
    // Set-based: `key in (...)` / `key notin (...)`.
    let words: Vec<&str> = p.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let key = words[0].trim();
        let rest = words[1].trim_start();
        if let Some(vals) = rest.strip_prefix("notin") {
            if !valid_label_key(key) {
                return Err(key_err(key));
            }
            return Ok(LabelRequirement::NotIn(key.into(), parse_values(vals, p)?));
        }
        if let Some(vals) = rest.strip_prefix("in") {
            if !valid_label_key(key) {
                return Err(key_err(key));
            }
            return Ok(LabelRequirement::In(key.into(), parse_values(vals, p)?));
        }
    }
    for (op, which) in [("!=", 0), ("==", 1), ("=", 1), (">", 2), ("<", 3)] {
        if let Some((k, v)) = p.split_once(op) {
            let k = k.trim();
            let v = v.trim();
            if !valid_label_key(k) {
                return Err(key_err(k));
            }
            return match which {
                0 | 1 => {
                    if !valid_label_value(v) {
                        return Err(format!(
                            "unable to parse requirement: values[0]: Invalid value: \"{v}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                        ));
                    }
                    if which == 0 {
                        Ok(LabelRequirement::NotEq(k.into(), v.into()))
                    } else {
                        Ok(LabelRequirement::Eq(k.into(), v.into()))
                    }
                }
                _ => {
                    let n: i64 = v.parse().map_err(|_| {
                        "unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer".to_string()
                    })?;
                    if which == 2 {
                        Ok(LabelRequirement::Gt(k.into(), n))
                    } else {
                        Ok(LabelRequirement::Lt(k.into(), n))
                    }
                }
            };
        }
    }
    let k = p.trim();
    if !valid_label_key(k) {
        return Err(key_err(k));
    }
    Ok(LabelRequirement::Exists(k.into()))
}

#[derive(Debug, Clone, PartialEq)]
pub struct FieldRequirement {
    pub field: String,
    pub value: String,
    pub negate: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    pub requirements: Vec<FieldRequirement>,
}

fn unescape_field(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Splits on `sep` not preceded by a backslash.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for part in split_unescaped(s, ',') {
            let (field, value, negate) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, false)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            requirements.push(FieldRequirement {
                field: field.trim().to_string(),
                value: unescape_field(value.trim()),
                negate,
            });
        }
        Ok(FieldSelector { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Field value as the API server's field-label conversion renders it (strings,
    /// booleans and numbers as text; missing as the empty string).
    pub fn field_value(obj: &Value, field: &str) -> String {
        let v = if field == "source" {
            // core/v1 Event: `source` means source.component.
            obj.get("source").and_then(|s| s.get("component"))
        } else {
            crate::meta::get_path(obj, field)
        };
        match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            Some(Value::Null) | None => {
                if field == "spec.unschedulable" || field == "spec.hostNetwork" {
                    "false".into()
                } else {
                    String::new()
                }
            }
            Some(other) => other.to_string(),
        }
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = Self::field_value(obj, &r.field);
            (actual == r.value) != r.negate
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let labels = json!({"app": "web", "tier": "fe", "n": "5"});
        let l = labels.as_object();
        let ok = |s: &str| LabelSelector::parse(s).map(|x| x.matches(l));
        assert_eq!(ok("app=web"), Ok(true));
        assert_eq!(ok("app==web,tier!=be"), Ok(true));
        assert_eq!(ok("app in (web, api),tier notin (be)"), Ok(true));
        assert_eq!(ok("app notin (web)"), Ok(false));
        assert_eq!(ok("!missing,app"), Ok(true));
        assert_eq!(ok("missing"), Ok(false));
        assert_eq!(ok("n>4,n<6"), Ok(true));
        assert!(LabelSelector::parse("a b c=").is_err());
        assert!(LabelSelector::parse("=x").is_err());
    }

    #[test]
    fn field_selectors() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let f = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed").ok();
        assert_eq!(f.map(|f| f.matches(&pod)), Some(true));
        let f = FieldSelector::parse("spec.nodeName=").ok();
        assert_eq!(f.map(|f| f.matches(&pod)), Some(false));
        assert!(FieldSelector::parse("bogus").is_err());
    }
}
