package doccheck

import (
	"go/ast"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackendSettingsDocs checks that the doc of every backend's settings
// type (a struct outside package adapter whose fields name environment
// variables, which adapter.OpenRequest.BackendSettings fills) says that
// code sets it in adapter.Options.BackendSettings: openai's and foundry's
// named adapter.Options.Settings, the shared settings, left from before
// the field was renamed.
func TestBackendSettingsDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	found := 0
	goFiles(t, root, 0, func(path string, f *ast.File) {
		if f.Name.Name == "adapter" {
			return // its Settings are the shared ones, in Options.Settings
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, sp := range gd.Specs {
				ts, ok := sp.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() || !namesEnv(ts) {
					continue
				}
				found++
				doc := ts.Doc
				if doc == nil {
					doc = gd.Doc
				}
				if !strings.Contains(strings.Join(strings.Fields(doc.Text()), " "), "adapter.Options.BackendSettings") {
					t.Errorf("%s: the doc of %s.%s does not say that code sets it in adapter.Options.BackendSettings:\n%s", path, f.Name.Name, ts.Name.Name, doc.Text())
				}
			}
		}
	})
	if found < 5 { // openai, foundry, responses, coretest, mcptools
		t.Fatalf("found %d backend settings types, want at least 5: the search is broken", found)
	}
}

// namesEnv reports whether ts is a struct one of whose fields names an
// environment variable (an env tag).
func namesEnv(ts *ast.TypeSpec) bool {
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		return false
	}
	for _, fl := range st.Fields.List {
		if fl.Tag != nil && strings.Contains(fl.Tag.Value, `env:"`) {
			return true
		}
	}
	return false
}
