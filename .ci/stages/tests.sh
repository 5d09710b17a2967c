#!/usr/bin/env bash
# The README's test command: every crate's unit tests and its integration tests on the
# embedded kruise-sim.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# The binaries the later stages run are built in the same pass (build_workspace).
build_workspace
cargo test --workspace
