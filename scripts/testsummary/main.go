// Command testsummary reads `go test -json` on standard input, prints a
// readable log (package results, and the full output of every failed or
// skipped test) and tallies the leaf tests by database: a test whose name
// has a "sqlite" or "postgres" element (the subtests of dbtest.Each and
// dbtest.EachURL) counts for that database, any other for "other".
//
//	go test -json ./... | testsummary -tally counts.txt -pass test
//	testsummary -report counts.txt
//
// With -tally it appends "PASS KIND PASSED FAILED SKIPPED" lines to the
// file; -report sums such a file and prints one "KIND: N passed, M failed,
// K skipped" line per kind and a closing "total:" line. It exits 1 when a
// test or a package failed, or the input held no test result at all.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// counts are the results of one kind of test.
type counts struct{ passed, failed, skipped int }

func (c *counts) add(o counts) {
	c.passed += o.passed
	c.failed += o.failed
	c.skipped += o.skipped
}

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
}

// kinds are the tally categories in report order.
var kinds = []string{"sqlite", "postgres", "other"}

// kindOf classifies a test by its name's elements.
func kindOf(name string) string {
	for _, part := range strings.Split(name, "/") {
		if part == "sqlite" || part == "postgres" {
			return part
		}
	}
	return "other"
}

// summary is the outcome of reading one `go test -json` stream.
type summary struct {
	byKind map[string]*counts
	// brokenPackages failed without a failed test: a build error, a panic
	// outside a test, a timeout or a TestMain failure.
	brokenPackages []string
	results        int
	// slowest are the top-level tests that took longest, slowest first,
	// so a suite creeping toward CI's time limit shows where its time goes.
	slowest []timed
}

// timed is one top-level test and its duration in seconds.
type timed struct {
	name    string
	seconds float64
}

// slowestShown is how many of the slowest top-level tests a pass lists.
const slowestShown = 12

// read consumes the stream, writing the readable log to log.
func read(in io.Reader, log io.Writer) (summary, error) {
	type key struct{ pkg, test string }
	output := map[key]*strings.Builder{}
	final := map[key]string{}
	failedTests := map[string]bool{}
	failedPkgs := map[string]bool{}
	var tops []timed
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil || ev.Action == "" {
			// go test writes build errors as plain text before the JSON.
			fmt.Fprintln(log, string(line))
			continue
		}
		k := key{ev.Package, ev.Test}
		switch ev.Action {
		case "build-output":
			fmt.Fprint(log, ev.Output)
		case "output":
			if ev.Test == "" {
				if keepPackageLine(ev.Output) {
					fmt.Fprint(log, ev.Output)
				}
				continue
			}
			b := output[k]
			if b == nil {
				b = &strings.Builder{}
				output[k] = b
			}
			b.WriteString(ev.Output)
		case "pass", "fail", "skip":
			if ev.Test == "" {
				if ev.Action == "fail" {
					failedPkgs[ev.Package] = true
				}
				continue
			}
			final[k] = ev.Action
			if !strings.Contains(ev.Test, "/") {
				tops = append(tops, timed{ev.Package + " " + ev.Test, ev.Elapsed})
			}
			if ev.Action == "fail" {
				failedTests[ev.Package] = true
			}
			if ev.Action != "pass" && output[k] != nil {
				fmt.Fprint(log, output[k].String())
			}
			delete(output, k)
		}
	}
	if err := sc.Err(); err != nil {
		return summary{}, fmt.Errorf("read go test output: %w", err)
	}
	s := summary{byKind: map[string]*counts{}}
	for _, kd := range kinds {
		s.byKind[kd] = &counts{}
	}
	// A test that started but never ended (its binary crashed or timed
	// out) counts as failed.
	for k, b := range output {
		if k.test != "" && final[k] == "" && strings.Contains(b.String(), "=== RUN") {
			final[k] = "fail"
			failedTests[k.pkg] = true
			fmt.Fprint(log, b.String())
		}
	}
	// Only leaves count: a parent's result is the sum of its subtests'.
	parent := map[key]bool{}
	for k := range final {
		for i := strings.LastIndex(k.test, "/"); i > 0; i = strings.LastIndex(k.test[:i], "/") {
			parent[key{k.pkg, k.test[:i]}] = true
		}
	}
	for k, action := range final {
		if parent[k] {
			continue
		}
		s.results++
		c := s.byKind[kindOf(k.test)]
		switch action {
		case "pass":
			c.passed++
		case "fail":
			c.failed++
		case "skip":
			c.skipped++
		}
	}
	for pkg := range failedPkgs {
		if !failedTests[pkg] {
			s.brokenPackages = append(s.brokenPackages, pkg)
			s.byKind["other"].failed++
			s.results++
		}
	}
	sort.Strings(s.brokenPackages)
	sort.SliceStable(tops, func(i, j int) bool { return tops[i].seconds > tops[j].seconds })
	s.slowest = tops[:min(len(tops), slowestShown)]
	return s, nil
}

// keepPackageLine drops the noise of package-level output: the bare PASS
// line that precedes "ok" and the "no test files" notices.
func keepPackageLine(l string) bool {
	t := strings.TrimSpace(l)
	return t != "" && t != "PASS" && !strings.Contains(l, "[no test files]")
}

func main() {
	tally := flag.String("tally", "", "read go test -json from stdin and append this pass's counts to `file`")
	pass := flag.String("pass", "test", "the pass name recorded with -tally")
	report := flag.String("report", "", "print the summary lines of the tally `file`")
	flag.Parse()
	switch {
	case *report != "":
		failed, err := printReport(*report, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		if failed {
			os.Exit(1)
		}
	case *tally != "":
		s, err := read(os.Stdin, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		if err := appendTally(*tally, *pass, s); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		if len(s.slowest) > 0 {
			fmt.Println("slowest tests of this pass:")
			for _, t := range s.slowest {
				fmt.Printf("  %7.1f s  %s\n", t.seconds, t.name)
			}
		}
		for _, p := range s.brokenPackages {
			fmt.Printf("FAIL %s: the package failed outside any test (build error, panic or timeout)\n", p)
		}
		failed := 0
		for _, c := range s.byKind {
			failed += c.failed
		}
		if failed > 0 || s.results == 0 {
			if s.results == 0 {
				fmt.Println("no test ran")
			}
			os.Exit(1)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func appendTally(path, pass string, s summary) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, kd := range kinds {
		c := s.byKind[kd]
		if _, err := fmt.Fprintf(f, "%s %s %d %d %d\n", pass, kd, c.passed, c.failed, c.skipped); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// printReport prints, for the tally file, one line per pass other than
// "test" (such as the fuzz pass), then one line per kind of the "test"
// pass (sqlite, postgres, other), then the total of everything. It reports
// whether anything failed.
func printReport(path string, out io.Writer) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	byKind := map[string]*counts{}
	byPass := map[string]*counts{}
	var passes []string
	var total counts
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var pass, kind string
		var c counts
		if _, err := fmt.Sscan(line, &pass, &kind, &c.passed, &c.failed, &c.skipped); err != nil {
			return false, fmt.Errorf("tally line %q: %w", line, err)
		}
		total.add(c)
		if pass == "test" {
			if byKind[kind] == nil {
				byKind[kind] = &counts{}
			}
			byKind[kind].add(c)
			continue
		}
		if byPass[pass] == nil {
			byPass[pass] = &counts{}
			passes = append(passes, pass)
		}
		byPass[pass].add(c)
	}
	for _, p := range passes {
		fmt.Fprintf(out, "%s: %s\n", p, byPass[p])
	}
	for _, kd := range []string{"other", "sqlite", "postgres"} {
		if c := byKind[kd]; c != nil {
			fmt.Fprintf(out, "%s: %s\n", kd, c)
		}
	}
	fmt.Fprintf(out, "total: %s\n", total)
	return total.failed > 0, nil
}
