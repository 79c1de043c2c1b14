package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func ev(action, pkg, test, output string) string {
	s := `{"Action":"` + action + `","Package":"` + pkg + `"`
	if test != "" {
		s += `,"Test":"` + test + `"`
	}
	if output != "" {
		s += `,"Output":` + quote(output)
	}
	return s + "}\n"
}

func quote(s string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, "\n", `\n`)
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// The counts are of leaf tests by database, failures and skips are shown
// with their output, passes are not, and a test cut off by a crash counts
// as failed.
func TestReadCountsLeavesByDatabase(t *testing.T) {
	in := ev("output", "p", "TestA/sqlite", "=== RUN   TestA/sqlite\n") +
		ev("output", "p", "TestA/sqlite", "    quiet pass\n") +
		ev("pass", "p", "TestA/sqlite", "") +
		ev("output", "p", "TestA/postgres", "    the reason\n") +
		ev("fail", "p", "TestA/postgres", "") +
		ev("fail", "p", "TestA", "") +
		ev("output", "p", "TestB/x/postgres", "=== RUN   TestB/x/postgres\n") +
		ev("skip", "p", "TestB/x/postgres", "") +
		ev("pass", "p", "TestB/x", "") +
		ev("pass", "p", "TestB", "") +
		ev("pass", "p", "TestPlain", "") +
		ev("output", "p", "TestCrash/sqlite", "=== RUN   TestCrash/sqlite\n") +
		ev("output", "p", "", "PASS\n") +
		ev("output", "p", "", "FAIL\tp\t1.0s\n") +
		ev("fail", "p", "", "") +
		"# plain text from go build\n"
	var log bytes.Buffer
	s, err := read(strings.NewReader(in), &log)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]counts{"sqlite": {1, 1, 0}, "postgres": {0, 1, 1}, "other": {1, 0, 0}}
	for kd, c := range want {
		if *s.byKind[kd] != c {
			t.Errorf("%s: %v, want %v", kd, *s.byKind[kd], c)
		}
	}
	out := log.String()
	for _, w := range []string{"the reason", "FAIL\tp", "=== RUN   TestCrash/sqlite", "plain text from go build"} {
		if !strings.Contains(out, w) {
			t.Errorf("log lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "quiet pass") || strings.Contains(out, "PASS\n") {
		t.Errorf("log shows passing output:\n%s", out)
	}
	if len(s.brokenPackages) != 0 {
		t.Errorf("broken packages: %v", s.brokenPackages)
	}
}

// A package that fails without a failed test (a build error) is a failure.
func TestReadCountsABrokenPackage(t *testing.T) {
	s, err := read(strings.NewReader(ev("fail", "q", "", "")), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if s.byKind["other"].failed != 1 || len(s.brokenPackages) != 1 {
		t.Fatalf("%+v", s)
	}
}

// The report has a line per extra pass, per kind of the main pass, and a
// closing total, each in the plain "N passed, M failed, K skipped" form.
func TestReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tally")
	data := "test sqlite 3 0 1\ntest postgres 3 1 0\ntest other 2 0 0\nrace sqlite 1 0 0\nrace postgres 1 0 0\nrace other 0 0 0\nfuzz other 5 0 0\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	failed, err := printReport(path, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "race: 2 passed, 0 failed, 0 skipped\nfuzz: 5 passed, 0 failed, 0 skipped\n" +
		"other: 2 passed, 0 failed, 0 skipped\nsqlite: 3 passed, 0 failed, 1 skipped\npostgres: 3 passed, 1 failed, 0 skipped\n" +
		"total: 15 passed, 1 failed, 1 skipped\n"
	if out.String() != want || !failed {
		t.Fatalf("report (failed=%v):\n%s\nwant:\n%s", failed, out.String(), want)
	}
}

// The slowest top-level tests are listed, slowest first; subtests are not.
func TestReadListsTheSlowestTopLevelTests(t *testing.T) {
	in := `{"Action":"pass","Package":"p","Test":"TestFast","Elapsed":0.5}` + "\n" +
		`{"Action":"pass","Package":"p","Test":"TestSlow/sqlite","Elapsed":40}` + "\n" +
		`{"Action":"pass","Package":"p","Test":"TestSlow","Elapsed":41}` + "\n" +
		`{"Action":"fail","Package":"q","Test":"TestMid","Elapsed":7}` + "\n"
	s, err := read(strings.NewReader(in), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := []timed{{"p TestSlow", 41}, {"q TestMid", 7}, {"p TestFast", 0.5}}
	if len(s.slowest) != len(want) {
		t.Fatalf("slowest: %v, want %v", s.slowest, want)
	}
	for i := range want {
		if s.slowest[i] != want[i] {
			t.Fatalf("slowest: %v, want %v", s.slowest, want)
		}
	}
}
