// Package openkruisee2e only holds the e2e suite's packages in this module's build list,
// so `go test -c github.com/openkruise/kruise/test/e2e` finds every package it needs.
package openkruisee2e

import (
	_ "github.com/openkruise/kruise/test/e2e"
	_ "github.com/openkruise/kruise/test/e2e/apps"
	_ "github.com/openkruise/kruise/test/e2e/policy"
)
