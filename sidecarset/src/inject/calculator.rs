//! OpenKruise's resource-expression calculator (`pkg/util/calculator`): `+ - * /`, unary
//! minus, parentheses, `max(a, b)`, `min(a, b)`, numbers (`0.5`, `50%`, `1e3`), quantities
//! (`50m`, `128Mi`) and one variable (`cpu` or `memory`), with Go's `resource.Quantity`
//! arithmetic: sums are exact, a product or quotient is taken on the milli-value (rounded up)
//! and truncated back to milli-units, a plain number meets a quantity as milli-units of
//! `DecimalSI`, and a sum keeps the left operand's format unless that operand is zero.
//! Results are written as Go writes a quantity (its canonical form, or the text as written
//! when a parsed quantity comes out unchanged).

use kruise_compat::quantity::{self, Format, NANOS_PER_MILLI, NANOS_PER_UNIT, canonical_quantity};

/// A `resource.Quantity`: its value in nano-units (Go keeps no finer precision), its format,
/// and the text it was parsed from while no arithmetic has touched it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    nanos: i128,
    format: Format,
    text: Option<String>,
}

impl Quantity {
    /// Go's `resource.ParseQuantity` (values rounded up to nano-units). `None` when Kubernetes
    /// would not accept `text`.
    pub fn parse(text: &str) -> Option<Quantity> {
        let parsed = quantity::parse(text)?;
        Some(Quantity {
            nanos: parsed.nanos,
            format: parsed.format,
            text: Some(text.trim().to_string()),
        })
    }

    /// `resource.NewMilliQuantity(milli, DecimalSI)`.
    pub fn from_milli(milli: i64) -> Quantity {
        Quantity {
            nanos: i128::from(milli) * NANOS_PER_MILLI,
            format: Format::DecimalSi,
            text: None,
        }
    }

    /// `resource.NewQuantity(value, DecimalSI)`.
    pub fn from_units(value: i64) -> Quantity {
        Quantity::from_milli(0).with_nanos(i128::from(value) * NANOS_PER_UNIT)
    }

    /// A zero quantity, as an absent entry of a Go `ResourceList` reads.
    pub fn zero() -> Quantity {
        Quantity::from_milli(0)
    }

    fn with_nanos(mut self, nanos: i128) -> Quantity {
        self.nanos = nanos;
        self.text = None;
        self
    }

    /// `Quantity.Cmp`: by value alone (format and text do not count).
    pub fn cmp_value(&self, other: &Quantity) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }

    /// `Quantity.IsZero`.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// `Quantity.Add`: exact; a zero receiver takes the addend's format.
    pub fn add(&self, other: &Quantity) -> Quantity {
        let mut sum = self.clone();
        if sum.nanos == 0 {
            sum.format = other.format;
        }
        sum.with_nanos(self.nanos.saturating_add(other.nanos))
    }

    fn negated(&self) -> Quantity {
        self.clone().with_nanos(self.nanos.saturating_neg())
    }

    /// `Quantity.MilliValue`: rounded up, away from zero.
    fn milli_value(&self) -> i64 {
        quantity::rounded_up(self.nanos, NANOS_PER_MILLI)
    }

    /// `SetMilli(int64(float64(MilliValue()) * factor))`, the calculator's scaling.
    fn scaled(&self, factor: f64) -> Quantity {
        // Go's float-to-int64 conversion truncates toward zero; `as` does too.
        let milli = (self.milli_value() as f64 * factor) as i64;
        self.clone().with_nanos(i128::from(milli) * NANOS_PER_MILLI)
    }

    /// How Go's `json.Marshal` writes this quantity.
    pub fn to_go_string(&self) -> String {
        if let Some(text) = &self.text {
            return canonical_quantity(text).unwrap_or_else(|| text.clone());
        }
        if self.nanos == 0 {
            return "0".into();
        }
        let written = match self.format {
            Format::DecimalSi => format!("{}n", self.nanos),
            Format::DecimalExponent => format!("{}e-9", self.nanos),
            // nanos / (10^9 * 1024) Ki, exactly: 1/1024 = 9765625 / 10^10.
            Format::BinarySi => {
                let scaled = self.nanos.unsigned_abs() * 9_765_625;
                let digits = format!("{scaled:020}");
                let (whole, fraction) = digits.split_at(digits.len() - 19);
                let sign = if self.nanos < 0 { "-" } else { "" };
                format!("{sign}{whole}.{fraction}Ki")
            }
        };
        canonical_quantity(&written).unwrap_or(written)
    }
}

/// A calculator value: a plain number or a quantity.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `0.5`, `50%`, `2`.
    Number(f64),
    /// `50m`, `1Gi`, or the variable.
    Quantity(Quantity),
}

impl Value {
    /// The calculator's `toQuantity`: a number is milli-units of `DecimalSI`.
    fn to_quantity(&self) -> Quantity {
        match self {
            Value::Quantity(q) => q.clone(),
            Value::Number(n) => Quantity::from_milli((n * 1000.0) as i64),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(String),
    Quantity(String),
    Ident(String),
    Char(u8),
    End,
}

/// A token and where the lexer stood after reading it (Go's line and column, for the
/// syntax error message).
struct Lexed {
    token: Token,
    line: usize,
    col: usize,
}

/// Go reads the expression byte by byte as runes; these are `unicode`'s classes of those.
fn is_letter(b: u8) -> bool {
    b.is_ascii_alphabetic()
        || matches!(b, 0xAA | 0xB5 | 0xBA | 0xC0..=0xD6 | 0xD8..=0xF6 | 0xF8..=0xFF)
}

fn is_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | 0x85 | 0xA0)
}

struct Lexer<'a> {
    input: &'a [u8],
    pos: usize,
    line: usize,
    col: usize,
}

impl Lexer<'_> {
    fn peek(&self) -> u8 {
        self.input.get(self.pos).copied().unwrap_or(0)
    }

    fn bump(&mut self) {
        if self.pos < self.input.len() {
            if self.input[self.pos] == b'\n' {
                self.line += 1;
                self.col = 1;
            } else {
                self.col += 1;
            }
            self.pos += 1;
        }
    }

    fn text(&self, start: usize) -> String {
        String::from_utf8_lossy(&self.input[start..self.pos]).into_owned()
    }

    fn read_number(&mut self) -> String {
        let start = self.pos;
        let (mut dot, mut exp, mut percent, mut want_exp_digit) = (false, false, false, false);
        loop {
            let b = self.peek();
            match b {
                0 => break,
                b'0'..=b'9' => want_exp_digit = false,
                b'.' if !(dot || exp || percent) => dot = true,
                b'e' | b'E' if !(exp || percent) => {
                    exp = true;
                    want_exp_digit = true;
                }
                // A second exponent (or one after '%') ends the number; it is no unit.
                b'e' | b'E' => break,
                b'+' | b'-' if want_exp_digit => want_exp_digit = false,
                b'%' if !percent => percent = true,
                _ if is_letter(b) && !want_exp_digit => {
                    while is_letter(self.peek()) {
                        self.bump();
                    }
                    break;
                }
                _ => break,
            }
            self.bump();
        }
        self.text(start)
    }

    fn next_token(&mut self) -> Token {
        while self.peek() != 0 && is_space(self.peek()) {
            self.bump();
        }
        let b = self.peek();
        match b {
            0 => Token::End,
            b'.' | b'0'..=b'9' => {
                let number = self.read_number();
                if is_quantity(&number) {
                    Token::Quantity(number)
                } else {
                    Token::Number(number)
                }
            }
            _ if is_letter(b) => {
                let start = self.pos;
                while is_letter(self.peek()) || self.peek().is_ascii_digit() || self.peek() == b'_'
                {
                    self.bump();
                }
                Token::Ident(self.text(start))
            }
            _ => {
                self.bump();
                Token::Char(b)
            }
        }
    }
}

/// The lexer's `isQuantity`: a number part followed by one of the units it knows.
fn is_quantity(s: &str) -> bool {
    let Some(unit_start) = s
        .find(|c: char| !(c.is_ascii_digit() || ".eE+-".contains(c)))
        .filter(|&i| i > 0)
    else {
        return false;
    };
    matches!(
        &s[unit_start..],
        "m" | "k" | "M" | "G" | "T" | "P" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi"
    )
}

fn lex(input: &str) -> Vec<Lexed> {
    let mut lexer = Lexer {
        input: input.as_bytes(),
        pos: 0,
        line: 1,
        col: 1,
    };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token();
        let end = token == Token::End;
        tokens.push(Lexed {
            token,
            line: lexer.line,
            col: lexer.col,
        });
        if end {
            return tokens;
        }
    }
}

/// Go's `resource.ErrFormatWrong`, what a malformed quantity literal reports.
const QUANTITY_FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A syntax error at the token the parser could not take.
struct SyntaxError;

/// Evaluates `expr` with the variable `variable` (`cpu` or `memory`) bound to `value`, as
/// OpenKruise's `Calculator.Parse` does, errors worded as its.
pub fn evaluate(expr: &str, variable: &str, value: Value) -> Result<Value, String> {
    let mut parser = Parser {
        tokens: lex(expr),
        at: 0,
        variable,
        value,
        last_error: None,
    };
    let parsed = parser.expr().and_then(|v| match parser.peek() {
        Token::End => Ok(v),
        _ => Err(SyntaxError),
    });
    let result = match parsed {
        Err(SyntaxError) => {
            if let Some(e) = parser.last_error {
                return Err(e);
            }
            let at = &parser.tokens[parser.at.min(parser.tokens.len() - 1)];
            return Err(format!(
                "parse error: syntax error at line {}, col {}",
                at.line, at.col
            ));
        }
        Ok(None) => {
            return Err(parser
                .last_error
                .unwrap_or_else(|| "no result from parser".into()));
        }
        Ok(Some(v)) => v,
    };
    match &result {
        Value::Quantity(q) if q.nanos < 0 => Err(format!(
            "calculation result is negative: {}",
            q.to_go_string()
        )),
        Value::Number(n) if *n < 0.0 => Err(format!(
            "calculation result is negative: {}",
            go_float_g(*n)
        )),
        _ => Ok(result),
    }
}

/// Go's `%g` for the numbers a negative result can be.
fn go_float_g(n: f64) -> String {
    let magnitude = n.abs();
    if magnitude == 0.0 || (1e-4..1e21).contains(&magnitude) {
        return format!("{n}");
    }
    let written = format!("{n:e}");
    match written.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => written,
    }
}

/// Recursive descent over the calculator's grammar; each rule's action runs as the yacc
/// parser's would (operands first, left to right), a failed action leaving no value and its
/// error in `last_error` (a later error replaces an earlier one, as in Go).
struct Parser<'a> {
    tokens: Vec<Lexed>,
    at: usize,
    variable: &'a str,
    value: Value,
    last_error: Option<String>,
}

type Parsed = Result<Option<Value>, SyntaxError>;

impl Parser<'_> {
    fn peek(&self) -> &Token {
        self.tokens
            .get(self.at)
            .map(|t| &t.token)
            .unwrap_or(&Token::End)
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.at < self.tokens.len() - 1 {
            self.at += 1;
        }
        token
    }

    fn expect(&mut self, c: u8) -> Result<(), SyntaxError> {
        if *self.peek() == Token::Char(c) {
            self.advance();
            Ok(())
        } else {
            Err(SyntaxError)
        }
    }

    fn fail(&mut self, message: &str) -> Option<Value> {
        self.last_error = Some(message.to_string());
        None
    }

    /// Sets `fallback` as the error when an operation fails without one of its own.
    fn or_fail(&mut self, value: Option<Value>, fallback: &str) -> Option<Value> {
        if value.is_none() && self.last_error.is_none() {
            self.last_error = Some(fallback.to_string());
        }
        value
    }

    fn expr(&mut self) -> Parsed {
        let mut left = self.term()?;
        while let Token::Char(op @ (b'+' | b'-')) = *self.peek() {
            self.advance();
            let right = self.term()?;
            let combined = match (left, right) {
                (Some(l), Some(r)) => Some(add_or_sub(&l, &r, op == b'-')),
                _ => None,
            };
            let fallback = if op == b'+' {
                "invalid addition operation"
            } else {
                "invalid subtraction operation"
            };
            left = self.or_fail(combined, fallback);
        }
        Ok(left)
    }

    fn term(&mut self) -> Parsed {
        let mut left = self.factor()?;
        while let Token::Char(op @ (b'*' | b'/')) = *self.peek() {
            self.advance();
            let right = self.factor()?;
            let combined = match (left, right) {
                (Some(l), Some(r)) if op == b'*' => self.mul(&l, &r),
                (Some(l), Some(r)) => self.div(&l, &r),
                _ => None,
            };
            let fallback = if op == b'*' {
                "invalid multiplication operation"
            } else {
                "invalid division operation"
            };
            left = self.or_fail(combined, fallback);
        }
        Ok(left)
    }

    fn factor(&mut self) -> Parsed {
        let start = self.at;
        match self.advance() {
            Token::Number(text) => Ok(Some(Value::Number(parse_number(&text)))),
            Token::Quantity(text) => Ok(match Quantity::parse(&text) {
                Some(q) => Some(Value::Quantity(q)),
                None => self.fail(QUANTITY_FORMAT_ERROR),
            }),
            Token::Ident(name) if *self.peek() == Token::Char(b'(') => {
                self.advance();
                let first = self.expr()?;
                let second = if *self.peek() == Token::Char(b',') {
                    self.advance();
                    Some(self.expr()?)
                } else {
                    None
                };
                self.expect(b')')?;
                let called = self.call(&name, first, second);
                Ok(self.or_fail(called, "function call failed"))
            }
            Token::Ident(name) => {
                if name.to_lowercase() == self.variable {
                    Ok(Some(self.value.clone()))
                } else {
                    Ok(self.fail(&format!("undefined variable: {}", name.to_lowercase())))
                }
            }
            Token::Char(b'(') => {
                let inner = self.expr()?;
                self.expect(b')')?;
                Ok(inner)
            }
            Token::Char(b'-') => Ok(self.factor()?.map(|v| match v {
                Value::Quantity(q) => Value::Quantity(q.negated()),
                Value::Number(n) => Value::Number(-n),
            })),
            _ => {
                // The error is reported at the token just read.
                self.at = start;
                Err(SyntaxError)
            }
        }
    }

    fn mul(&mut self, left: &Value, right: &Value) -> Option<Value> {
        match (left, right) {
            (Value::Quantity(_), Value::Quantity(_)) => {
                self.fail("multiplication of two quantities")
            }
            (Value::Quantity(q), Value::Number(n)) | (Value::Number(n), Value::Quantity(q)) => {
                Some(Value::Quantity(q.scaled(*n)))
            }
            (Value::Number(a), Value::Number(b)) => Some(Value::Number(a * b)),
        }
    }

    fn div(&mut self, left: &Value, right: &Value) -> Option<Value> {
        match (left, right) {
            (_, Value::Quantity(_)) => self.fail("division by quantity"),
            (_, Value::Number(d)) if *d == 0.0 => self.fail("division by zero"),
            (Value::Quantity(q), Value::Number(d)) => {
                let milli = (q.milli_value() as f64 / d) as i64;
                Some(Value::Quantity(
                    q.clone().with_nanos(i128::from(milli) * NANOS_PER_MILLI),
                ))
            }
            (Value::Number(a), Value::Number(d)) => Some(Value::Number(a / d)),
        }
    }

    fn call(
        &mut self,
        name: &str,
        first: Option<Value>,
        second: Option<Option<Value>>,
    ) -> Option<Value> {
        let function = name.to_lowercase();
        if function != "max" && function != "min" {
            return self.fail(&format!("unknown function: {name}"));
        }
        let Some(second) = second else {
            return self.fail(&format!(
                "{function} function requires exactly 2 arguments, got 1"
            ));
        };
        let (left, right) = (first?, second?);
        let take_left = |ordering: std::cmp::Ordering| {
            if function == "max" {
                ordering.is_ge()
            } else {
                ordering.is_le()
            }
        };
        Some(match (&left, &right) {
            (Value::Number(a), Value::Number(b)) => {
                let ordering = a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Less);
                if take_left(ordering) { left } else { right }
            }
            _ => {
                // A number meets a quantity as milli-units; the chosen side is returned as
                // the quantity it became.
                let (l, r) = (left.to_quantity(), right.to_quantity());
                if take_left(l.cmp_value(&r)) {
                    Value::Quantity(l)
                } else {
                    Value::Quantity(r)
                }
            }
        })
    }
}

fn add_or_sub(left: &Value, right: &Value, subtract: bool) -> Value {
    match (left, right) {
        (Value::Number(a), Value::Number(b)) => Value::Number(if subtract { a - b } else { a + b }),
        _ => {
            let r = right.to_quantity();
            Value::Quantity(
                left.to_quantity()
                    .add(&if subtract { r.negated() } else { r }),
            )
        }
    }
}

/// The calculator's `parseNumber`: `50%` is 0.5; text Go's `ParseFloat` refuses reads as 0.
fn parse_number(text: &str) -> f64 {
    match text.strip_suffix('%') {
        Some(number) => parse_go_float(number) / 100.0,
        None => parse_go_float(text),
    }
}

fn parse_go_float(text: &str) -> f64 {
    // The lexer only hands over digits, '.', exponents and letters; Rust's parser agrees
    // with Go's on those, except that it also reads "inf"/"nan" words the lexer never starts
    // a number with.
    text.parse().unwrap_or(0.0)
}

#[cfg(test)]
mod tests;
