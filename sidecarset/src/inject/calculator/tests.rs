//! Expected values printed by OpenKruise's own `pkg/util/calculator` (built against
//! k8s.io/apimachinery v0.32.10) for the same expression, variable and value.

use super::{Quantity, Value, evaluate};

enum Want {
    Q(&'static str),
    N(f64),
}
use Want::{N, Q};

/// `#1` is the plain number 1 (how OpenKruise's validation binds the variable), anything
/// else a quantity.
fn bind(value: &str) -> Value {
    match value.strip_prefix('#') {
        Some(n) => Value::Number(n.parse().unwrap()),
        None => Value::Quantity(Quantity::parse(value).unwrap()),
    }
}

#[test]
fn results_and_errors_match_openkruise() {
    let cases: &[(&str, &str, &str, Result<Want, &str>)] = &[
        ("cpu", "cpu", "500m", Ok(Q("500m"))),
        ("cpu", "cpu", "1500m", Ok(Q("1500m"))),
        ("cpu", "cpu", "2", Ok(Q("2"))),
        ("cpu*50%", "cpu", "2", Ok(Q("1"))),
        ("cpu*50%", "cpu", "1", Ok(Q("500m"))),
        ("cpu*50%", "cpu", "300m", Ok(Q("150m"))),
        ("max(cpu*50%, 50m)", "cpu", "60m", Ok(Q("50m"))),
        ("max(cpu*50%, 50m)", "cpu", "2", Ok(Q("1"))),
        ("min(cpu*50%, 1)", "cpu", "4", Ok(Q("1"))),
        ("cpu*0.33", "cpu", "1", Ok(Q("330m"))),
        ("cpu/3", "cpu", "1", Ok(Q("333m"))),
        ("cpu + 100m", "cpu", "1", Ok(Q("1100m"))),
        ("cpu - 100m", "cpu", "1", Ok(Q("900m"))),
        (
            "cpu - 2",
            "cpu",
            "1",
            Err("calculation result is negative: -1"),
        ),
        (
            "100m - cpu",
            "cpu",
            "1",
            Err("calculation result is negative: -900m"),
        ),
        ("memory", "memory", "1Gi", Ok(Q("1Gi"))),
        ("memory*50%", "memory", "1Gi", Ok(Q("512Mi"))),
        ("memory*50%", "memory", "1000Mi", Ok(Q("500Mi"))),
        ("memory*0.3", "memory", "1Gi", Ok(Q("322122547200m"))),
        ("memory/3", "memory", "100Mi", Ok(Q("34952533333m"))),
        ("max(memory*50%, 100Mi)", "memory", "100Mi", Ok(Q("100Mi"))),
        ("max(memory*50%, 100Mi)", "memory", "1Gi", Ok(Q("512Mi"))),
        ("memory + 100Mi", "memory", "1Gi", Ok(Q("1124Mi"))),
        ("memory + 100Mi", "memory", "1G", Ok(Q("1104857600"))),
        ("memory*2", "memory", "1500", Ok(Q("3k"))),
        ("memory*2", "memory", "1e3", Ok(Q("2e3"))),
        ("memory", "memory", "1e3", Ok(Q("1e3"))),
        ("memory*1", "memory", "1e3", Ok(Q("1e3"))),
        ("0.5", "cpu", "1", Ok(N(0.5))),
        ("2", "memory", "1Gi", Ok(N(2.0))),
        ("1+2*3", "cpu", "1", Ok(N(7.0))),
        ("(1+2)*3", "cpu", "1", Ok(N(9.0))),
        (
            "-2*3",
            "cpu",
            "1",
            Err("calculation result is negative: -6"),
        ),
        ("--1", "cpu", "1", Ok(N(1.0))),
        (
            "1 -",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 4"),
        ),
        (
            "1 2",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 4"),
        ),
        (
            "(1",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 3"),
        ),
        (
            "max(1,2,3)",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 9"),
        ),
        (
            "max(1)",
            "cpu",
            "1",
            Err("max function requires exactly 2 arguments, got 1"),
        ),
        ("foo(1,2)", "cpu", "1", Err("unknown function: foo")),
        ("foo(1)", "cpu", "1", Err("unknown function: foo")),
        ("mem", "cpu", "1", Err("undefined variable: mem")),
        ("memory", "cpu", "1", Err("undefined variable: memory")),
        (
            "cpu*cpu",
            "cpu",
            "1",
            Err("multiplication of two quantities"),
        ),
        ("cpu/cpu", "cpu", "1", Err("division by quantity")),
        ("cpu/0", "cpu", "1", Err("division by zero")),
        ("1/0", "cpu", "1", Err("division by zero")),
        ("cpu", "cpu", "#1", Ok(N(1.0))),
        ("cpu*2", "cpu", "#1", Ok(N(2.0))),
        (
            "cpu-2",
            "cpu",
            "#1",
            Err("calculation result is negative: -1"),
        ),
        (
            "cpu-2.5",
            "cpu",
            "#1",
            Err("calculation result is negative: -1.5"),
        ),
        (
            "cpu-200000",
            "cpu",
            "#1",
            Err("calculation result is negative: -199999"),
        ),
        (
            "cpu - 0.00001",
            "cpu",
            "#0",
            Err("calculation result is negative: -1e-05"),
        ),
        ("CPU*50%", "cpu", "1", Ok(Q("500m"))),
        ("MAX(cpu, 1)", "cpu", "500m", Ok(Q("1"))),
        ("max(cpu, 1)", "cpu", "500m", Ok(Q("1"))),
        ("max(cpu, 1)", "cpu", "1500m", Ok(Q("1500m"))),
        ("min(2, cpu)", "cpu", "1500m", Ok(Q("1500m"))),
        ("min(cpu, 2)", "cpu", "1500m", Ok(Q("1500m"))),
        ("1.5Gi", "memory", "1", Ok(Q("1536Mi"))),
        ("1e3", "memory", "1", Ok(N(1000.0))),
        (
            "1Ei",
            "memory",
            "1",
            Err("parse error: syntax error at line 1, col 4"),
        ),
        (
            "1e5m",
            "cpu",
            "1",
            Err(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        ),
        (
            "",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 1"),
        ),
        (
            "  cpu  +  ",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 11"),
        ),
        (
            "cpu $ 1",
            "cpu",
            "1",
            Err("parse error: syntax error at line 1, col 6"),
        ),
        ("cpu*50%", "cpu", "0", Ok(Q("0"))),
        ("100m+cpu", "cpu", "0", Ok(Q("100m"))),
        ("cpu+100Mi", "memory", "0", Err("undefined variable: cpu")),
        ("cpu*1.5", "cpu", "1.5", Ok(Q("2250m"))),
        ("cpu*3", "cpu", "333m", Ok(Q("999m"))),
        ("cpu*2", "cpu", "0.5", Ok(Q("1"))),
        ("memory*2", "memory", "1.5Gi", Ok(Q("3Gi"))),
        ("memory/2", "memory", "1.5Ki", Ok(Q("768"))),
        ("memory/1024", "memory", "1Gi", Ok(Q("1Mi"))),
    ];
    for (expr, variable, value, want) in cases {
        let got = evaluate(expr, variable, bind(value));
        match (got, want) {
            (Ok(Value::Quantity(q)), Ok(Q(w))) => {
                assert_eq!(q.to_go_string(), *w, "{expr} with {variable}={value}")
            }
            (Ok(Value::Number(n)), Ok(N(w))) => assert_eq!(n, *w, "{expr} with {variable}={value}"),
            (Err(e), Err(w)) => assert_eq!(e, *w, "{expr} with {variable}={value}"),
            (got, _) => panic!("{expr} with {variable}={value}: got {got:?}"),
        }
    }
}

#[test]
fn parsed_quantities_are_written_back_as_go_writes_them() {
    for (text, want) in [
        ("500m", "500m"),
        ("0.5", "500m"),
        ("1Gi", "1Gi"),
        ("1e3", "1e3"),
        ("1024Mi", "1Gi"),
    ] {
        assert_eq!(
            Quantity::parse(text).unwrap().to_go_string(),
            want,
            "{text}"
        );
    }
    assert_eq!(Quantity::parse("1x"), None);
}

proptest::proptest! {
    #[test]
    fn never_panics(expr in "[-+*/(), .%0-9a-zA-Z]{0,40}", milli in proptest::num::i64::ANY) {
        let _ = evaluate(&expr, "cpu", Value::Quantity(Quantity::from_milli(milli)));
        let _ = evaluate(&expr, "memory", Value::Number(1.0));
    }

    #[test]
    fn any_text_parses_or_is_refused_without_panicking(text in "\\PC{0,24}") {
        if let Some(q) = Quantity::parse(&text) {
            let _ = q.to_go_string();
        }
    }
}
