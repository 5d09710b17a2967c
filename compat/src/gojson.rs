//! Go `encoding/json` compatible serialization of a [`serde_json::Value`].
//!
//! OpenKruise stores ControllerRevision data as the output of Go's `json.Marshal` of a
//! generic map: object keys sorted by byte order, `<`, `>`, `&`, U+2028 and U+2029 escaped as
//! `\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`, control characters escaped (`\b`, `\f`,
//! `\n`, `\r`, `\t`, else `\u00XX`), and every number round-tripped through `float64` (printed
//! in shortest form, exponent form outside `[1e-6, 1e21)`). Producing the same bytes lets the
//! revision hash (FNV-1 over these bytes) match OpenKruise's for the same data.

use serde_json::{Map, Value};

/// Serialize `v` exactly as Go's `json.Marshal` would serialize the same generic value.
pub fn to_go_json(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let f = if let Some(i) = n.as_i64() {
                i as f64
            } else if let Some(u) = n.as_u64() {
                u as f64
            } else {
                n.as_f64().unwrap_or(0.0)
            };
            out.push_str(&go_float(f));
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                if let Some(val) = map.get(k) {
                    write_value(out, val);
                }
            }
            out.push('}');
        }
    }
}

/// Format a float as Go's `encoding/json` does (`strconv.AppendFloat(f, 'f' or 'e', -1, 64)`).
pub fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    if !f.is_finite() {
        // Go refuses to marshal these; JSON input cannot contain them.
        return "null".into();
    }
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        return format!("{f}");
    }
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            let digits = if digits.len() < 2 {
                format!("0{digits}")
            } else {
                digits.to_string()
            };
            format!("{mantissa}e{sign}{digits}")
        }
        None => s,
    }
}

fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let cp = c as u32;
                out.push_str("\\u");
                for shift in [12u32, 8, 4, 0] {
                    out.push(HEX[((cp >> shift) & 0xf) as usize] as char);
                }
            }
            c if (c as u32) < 0x20 => {
                let b = c as u32;
                out.push_str("\\u00");
                out.push(HEX[((b >> 4) & 0xf) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Add the Go struct-encoding artefacts OpenKruise's revision data always carries:
/// `metadata.creationTimestamp: null` and `resources: {}` on every (init/ephemeral) container.
pub fn with_go_artefacts(template: &Value) -> Value {
    let mut t = template.clone();
    if let Value::Object(map) = &mut t {
        let meta = map
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = meta {
            m.entry("creationTimestamp").or_insert(Value::Null);
        }
        if let Some(Value::Object(spec)) = map.get_mut("spec") {
            for key in ["containers", "initContainers", "ephemeralContainers"] {
                if let Some(Value::Array(cs)) = spec.get_mut(key) {
                    for c in cs {
                        if let Value::Object(c) = c {
                            c.entry("resources")
                                .or_insert_with(|| Value::Object(Map::new()));
                        }
                    }
                }
            }
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_marshal_golden() {
        let v = json!({"b": 1, "a": [true, null, 1.5], "$patch": "replace", "h": "<a&b>\u{2028}\n\u{1}"});
        assert_eq!(
            to_go_json(&v),
            r#"{"$patch":"replace","a":[true,null,1.5],"b":1,"h":"\u003ca\u0026b\u003e\u2028\n\u0001"}"#
        );
    }

    #[test]
    fn go_floats() {
        assert_eq!(go_float(1e21), "1e+21");
        assert_eq!(go_float(1.5e-7), "1.5e-07");
        assert_eq!(go_float(123456789.0), "123456789");
        assert_eq!(go_float(0.000001), "0.000001");
        assert_eq!(go_float(9007199254740993u64 as f64), "9007199254740992");
        assert_eq!(go_float(-2.5), "-2.5");
    }
}
