package ui

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryRouteNamesItsAction keeps routeActions in step with the route
// table: every registered page route names what a 403 on it refuses, and
// no entry outlives its route.
func TestEveryRouteNamesItsAction(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`HandleFunc\("([^"]+)"`)
	// Routes that never answer the permission page: assets, sign-in and
	// the catch-all 404.
	exempt := map[string]bool{"GET /static/{name}": true, "GET /favicon.ico": true, "GET /login": true, "POST /login": true, "/": true}
	routes := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			routes[m[1]] = true
		}
	}
	if len(routes) < 40 {
		t.Fatalf("found only %d routes; is the route table still registered with HandleFunc?", len(routes))
	}
	for r := range routes {
		if !exempt[r] && routeActions[r] == "" {
			t.Errorf("route %q has no entry in routeActions", r)
		}
	}
	for r, a := range routeActions {
		if !routes[r] {
			t.Errorf("routeActions lists %q, which is not a route", r)
		}
		if a == "" || strings.HasSuffix(a, ".") || strings.ToLower(a[:1]) != a[:1] {
			t.Errorf("action %q of %s does not fit “You don’t have permission to {action}.”", a, r)
		}
	}
}
