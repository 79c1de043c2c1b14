package e2e_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The tests in this file keep the docs true to the tree: a package added
// without a line in the architecture table, a file renamed under a doc that
// names it, or a heading renamed under a code comment that cites it fails
// the suite instead of leaving a stale pointer behind.

// root is the module root, seen from this package's directory.
const root = "../.."

// TestArchitectureTableNamesEveryPackage checks that every package of the
// module (as go list sees it) is named, in backticks, in the package table
// of docs/architecture.md ("Packages").
func TestArchitectureTableNamesEveryPackage(t *testing.T) {
	deps := goList(t)
	table := docSection(t, "docs/architecture.md", "Packages")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9_./-]+)`").FindAllStringSubmatch(table, -1) {
		named[m[1]] = true
	}
	var missing []string
	for pkg := range deps {
		if !named[pkg] {
			missing = append(missing, pkg)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("docs/architecture.md, \"Packages\" does not name these packages (add a row or add them to a row): %s",
			strings.Join(missing, ", "))
	}
}

// repoPath matches a backticked path into the repository as the docs write
// them: a top-level directory of ours, then a path.
var repoPath = regexp.MustCompile("`((?:internal|cmd|scripts|docs|packaging|deploy|\\.ci)/[^`\\s]*)`")

// placeholder is a "<name>" part of a path in prose.
var placeholder = regexp.MustCompile(`<[^>/]+>`)

// TestDocsNameOnlyExistingPaths checks that every backticked repository path
// in README.md and docs/*.md exists (a glob must match something). A path
// with an ellipsis ("internal/…/x.go") is a pattern in prose and is skipped.
func TestDocsNameOnlyExistingPaths(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, doc := range docs {
		body, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range repoPath.FindAllStringSubmatch(string(body), -1) {
			p := strings.TrimRight(m[1], ".,:;")
			if strings.Contains(p, "…") || strings.Contains(p, "...") {
				continue
			}
			// A line or symbol suffix ("x.go:42", "x.go#L4") names a place in the file.
			if i := strings.IndexAny(p, ":#"); i > 0 {
				p = p[:i]
			}
			// A placeholder ("migrations/<dialect>/") stands for any name.
			p = placeholder.ReplaceAllString(p, "*")
			matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
			if err != nil {
				t.Errorf("%s: `%s`: bad pattern: %v", rel, p, err)
				continue
			}
			if len(matches) == 0 {
				t.Errorf("%s names `%s`, which does not exist", rel, p)
			}
		}
	}
}

// citation matches a code comment's reference to a docs heading, such as
// (docs/email-pipeline.md, "Admission") or (README.md, "Configuration"),
// after the comment markers of a wrapped comment are folded into spaces.
var citation = regexp.MustCompile(`((?:docs/[a-z0-9_-]+|README)\.md),?\s+"([^"\n]+)"`)

// commentBreak is a line break inside a // comment block, with the next
// line's indentation and comment marker.
var commentBreak = regexp.MustCompile(`\n[ \t]*//[ \t]?`)

// TestCodeCommentsCiteRealHeadings checks that every docs heading a Go
// comment cites (`docs/X.md, "Heading"`) exists in that document.
func TestCodeCommentsCiteRealHeadings(t *testing.T) {
	headings := map[string]map[string]bool{}
	headingsOf := func(doc string) map[string]bool {
		if h, ok := headings[doc]; ok {
			return h
		}
		h := map[string]bool{}
		body, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err == nil {
			for _, line := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(line, "#") {
					h[strings.TrimSpace(strings.TrimLeft(line, "#"))] = true
				}
			}
		} else {
			h = nil
		}
		headings[doc] = h
		return h
	}
	cited := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "node_modules" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		folded := commentBreak.ReplaceAllString(string(body), " ")
		rel, _ := filepath.Rel(root, path)
		for _, m := range citation.FindAllStringSubmatch(folded, -1) {
			doc, heading := m[1], m[2]
			cited++
			h := headingsOf(doc)
			if h == nil {
				t.Errorf("%s cites %s, which does not exist", rel, doc)
			} else if !h[heading] {
				t.Errorf("%s cites %s, %q: no such heading", rel, doc, heading)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 20 {
		t.Fatalf("found only %d citations; the pattern no longer matches how comments cite the docs", cited)
	}
}

// dialectBranch matches a choice of statement by database.
var dialectBranch = regexp.MustCompile(`Dialect [!=]= db\.Postgres`)

// TestDocsNameEveryDialectBranch checks that every non-test file outside
// internal/db (whose dialect helpers are the point) that chooses a
// statement by database is named in docs/architecture.md, "Two databases,
// one SQL": a store file by its name, any other by its path. A new
// PostgreSQL-only statement then cannot hide behind "the same SQL on
// both".
func TestDocsNameEveryDialectBranch(t *testing.T) {
	section := docSection(t, "docs/architecture.md", "Two databases, one SQL")
	found := 0
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "internal/db" || rel == "internal/dbtest" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		body, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !dialectBranch.Match(body) {
			return nil
		}
		found++
		name := "`" + rel + "`"
		if dir, file := filepath.Split(rel); dir == "internal/store/" {
			name = "`" + file + "`"
		}
		if !strings.Contains(section, name) {
			t.Errorf("%s chooses a statement by database, and docs/architecture.md, \"Two databases, one SQL\" does not name it (%s)", rel, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 10 {
		t.Fatalf("found only %d files with a dialect branch; the pattern no longer matches how the code branches", found)
	}
}

// docSection returns the text of the named level-2 section of doc.
func docSection(t *testing.T, doc, heading string) string {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
	if err != nil {
		t.Fatal(err)
	}
	text := string(body)
	start := strings.Index(text, "\n## "+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", doc, heading)
	}
	rest := text[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		rest = rest[:end+3]
	}
	return rest
}
