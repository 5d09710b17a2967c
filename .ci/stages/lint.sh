#!/usr/bin/env bash
# Format, lint and docs: `cargo fmt --check`, clippy with warnings as errors, rustdoc with
# warnings as errors.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cargo --version
rustup component list --installed 2>/dev/null | grep -qE '^(rustfmt|clippy)' \
  || rustup component add rustfmt clippy
step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
