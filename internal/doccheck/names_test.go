package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// exported returns the names a package's documentation may refer to, by
// the package's name: "Name" for each exported top-level name and
// "Type.Member" for each field and method of its exported types.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names[d.Name.Name] = true
						continue
					}
					typ := d.Recv.List[0].Type
					if s, ok := typ.(*ast.StarExpr); ok {
						typ = s.X
					}
					if id, ok := typ.(*ast.Ident); ok {
						names[id.Name+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, sp := range d.Specs {
						switch sp := sp.(type) {
						case *ast.TypeSpec:
							names[sp.Name.Name] = true
							if st, ok := sp.Type.(*ast.StructType); ok {
								for _, fl := range st.Fields.List {
									for _, n := range fl.Names {
										names[sp.Name.Name+"."+n.Name] = true
									}
								}
							}
							if it, ok := sp.Type.(*ast.InterfaceType); ok {
								for _, m := range it.Methods.List {
									for _, n := range m.Names {
										names[sp.Name.Name+"."+n.Name] = true
									}
								}
							}
						case *ast.ValueSpec:
							for _, n := range sp.Names {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}

// documented are the module's packages whose names the docs use, by the
// name a program calls them.
var documented = map[string]string{
	"core": "core", "adapter": "adapter", "errcode": "errcode", "coretest": "core/coretest",
	"foundry": "foundry", "foundrytest": "foundry/foundrytest", "openaitest": "openai/openaitest",
	"responses": "responses", "journal": "journal", "sqlitejournal": "journal/sqlitejournal",
	"pgjournal": "journal/pgjournal", "journaltest": "journal/journaltest", "telemetry": "telemetry",
	"conformance": "conformance", "web": "web", "mcptools": "mcptools",
}

// reference matches pkg.Name and pkg.Type.Member in text.
var reference = regexp.MustCompile(`\b([a-z]+)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)

// TestNamesExist checks that every pkg.Name and pkg.Type.Member the
// package docs and README name, for a package of the module, exists: a
// field renamed (config.Options.Transport, now adapter.Options.WrapTransport)
// fails the test until the docs follow.
func TestNamesExist(t *testing.T) {
	root := filepath.Join("..", "..")
	names := map[string]map[string]bool{}
	for pkg, dir := range documented {
		names[pkg] = exported(t, filepath.Join(root, dir))
	}
	check := func(where, text string) int {
		n := 0
		for _, m := range reference.FindAllStringSubmatch(text, -1) {
			known, ok := names[m[1]]
			if !ok {
				continue
			}
			n++
			name := m[2]
			if m[3] != "" && !known[name+"."+m[3]] && known[name] {
				// Type.Member: the type must have it (a package-level
				// Name.Other that is not a type's member is a sentence
				// ending).
				if !strings.HasSuffix(m[0], ".") {
					t.Errorf("%s: %s.%s has no %s", where, m[1], name, m[3])
				}
				continue
			}
			if !known[name] {
				t.Errorf("%s: %s.%s does not exist", where, m[1], name)
			}
		}
		return n
	}
	found := 0
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	found += check("README.md", string(readme))
	goFiles(t, root, parser.PackageClauseOnly, func(path string, f *ast.File) {
		if f.Doc != nil {
			found += check(path+" (package doc)", f.Doc.Text())
		}
	})
	if found < 30 {
		t.Fatalf("found %d references; the extraction is broken", found)
	}
	t.Logf("%d references checked", found)
}

// goFiles calls fn with each Go file of the module under root, but for
// tests, testdata, hidden directories, node_modules and the temporal
// module, parsed with its comments and mode.
func goFiles(t *testing.T, root string, mode parser.Mode, fn func(path string, f *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "temporal") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|mode)
		if err != nil {
			return err
		}
		fn(path, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
