#!/usr/bin/env bash
# The README's test command: every crate's unit tests and its integration tests on the
# embedded kruise-sim.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
cargo test --workspace
