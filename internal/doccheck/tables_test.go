package doccheck

import (
	"fmt"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/adapter"
	_ "github.com/toolrelay/toolrelay/all" // every backend, for the table of backends
	"github.com/toolrelay/toolrelay/core/coretest"
	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/openai"
	"github.com/toolrelay/toolrelay/responses"
)

// codeBlocks returns the code blocks of the package doc in dir.
func codeBlocks(t *testing.T, dir string) []string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			if f.Doc == nil {
				continue
			}
			var p comment.Parser
			for _, b := range p.Parse(f.Doc.Text()).Content {
				if c, ok := b.(*comment.Code); ok {
					out = append(out, c.Text)
				}
			}
		}
	}
	return out
}

// table returns the rows of the code block whose first line starts with
// header, split at runs of two spaces or more.
func table(t *testing.T, dir, header string) [][]string {
	t.Helper()
	for _, b := range codeBlocks(t, dir) {
		lines := strings.Split(strings.TrimRight(b, "\n"), "\n")
		if !strings.HasPrefix(lines[0], header) {
			continue
		}
		var rows [][]string
		for _, l := range lines[1:] {
			rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1))
		}
		return rows
	}
	t.Fatalf("%s: no table headed %q in the package doc", dir, header)
	return nil
}

// TestBackendTable checks the table of backends in package adapter's doc
// against the code: it names every registered backend (this test links
// them all), and each with the package that registers it.
func TestBackendTable(t *testing.T) {
	root := filepath.Join("..", "..")
	var names []string
	for _, row := range table(t, filepath.Join(root, "adapter"), "Backend") {
		if row[0] == "all of them" {
			continue
		}
		if len(row) < 2 {
			t.Errorf("row %q: want a backend and its import", row)
			continue
		}
		name, path := row[0], strings.Fields(row[1])[0]
		names = append(names, name)
		rel, ok := strings.CutPrefix(path, "github.com/toolrelay/toolrelay/")
		if !ok {
			t.Errorf("backend %s: import %s is not of the module", name, path)
			continue
		}
		files, _ := filepath.Glob(filepath.Join(root, rel, "*.go"))
		registers := false
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err == nil && !strings.HasSuffix(f, "_test.go") && strings.Contains(string(src), fmt.Sprintf("Register(%q", name)) {
				registers = true
			}
		}
		if !registers {
			t.Errorf("backend %s: the table says %s registers it, which it does not", name, path)
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff(adapter.Backends(), names); diff != "" {
		t.Errorf("the backends of adapter's doc table (-registered +documented):\n%s", diff)
	}
}

// TestSettingsTables checks each table of settings in the package docs
// (Setting, Environment variable, File key) against the settings struct
// the package reads: every row's variable and file key are a field's, and
// every field with a variable has a row.
func TestSettingsTables(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, tc := range []struct {
		dir, section string
		settings     any
	}{
		{"adapter", "", adapter.Settings{}},
		{"openai", "openai", openai.Settings{}},
		{"foundry", "foundry", foundry.Settings{}},
		{"responses", "responses", responses.Settings{}},
		{"core/coretest", "fake", coretest.FakeSettings{}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			want := map[string]string{} // variable → file key
			typ := reflect.TypeOf(tc.settings)
			for i := range typ.NumField() {
				f := typ.Field(i)
				env, key := f.Tag.Get("env"), strings.Split(f.Tag.Get("json"), ",")[0]
				if env == "" {
					continue
				}
				if tc.section != "" {
					key = tc.section + "." + key
				}
				want[env] = key
			}
			got := map[string]string{}
			for _, row := range table(t, filepath.Join(root, tc.dir), "Setting") {
				if len(row) < 3 || !regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`).MatchString(row[1]) {
					continue // a line continuing the one before
				}
				got[row[1]] = strings.Fields(row[2])[0]
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s's table of settings (-code +doc):\n%s", tc.dir, diff)
			}
		})
	}
}

// TestReadmeLinks checks that every relative link of README names a file
// or folder of the repository.
func TestReadmeLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`\]\(([^)#]+)(#[^)]*)?\)`).FindAllStringSubmatch(string(b), -1) {
		link := m[1]
		if strings.Contains(link, "://") {
			continue
		}
		n++
		if _, err := os.Stat(filepath.Join(root, link)); err != nil {
			t.Errorf("README links to %s, which is not there", link)
		}
	}
	if n < 10 {
		t.Fatalf("found %d relative links; the extraction is broken", n)
	}
}
