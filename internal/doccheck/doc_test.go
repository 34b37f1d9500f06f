// Package doccheck holds a test that every exported name in the module has
// a doc comment, and every package a package doc.
package doccheck

import (
	"bytes"
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

func TestExportedNamesHaveDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			checkDir(t, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkDir(t *testing.T, dir string) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Errorf("%s: %v", dir, err)
		return
	}
	for name, pkg := range pkgs {
		if name == "main" {
			continue
		}
		hasPkgDoc := false
		for fname, f := range pkg.Files {
			if f.Doc != nil {
				hasPkgDoc = true
			}
			for _, decl := range f.Decls {
				checkDecl(t, fset, fname, decl)
			}
		}
		if !hasPkgDoc {
			t.Errorf("package %s (%s) has no package doc", name, dir)
		}
	}
}

func checkDecl(t *testing.T, fset *token.FileSet, fname string, decl ast.Decl) {
	report := func(pos token.Pos, what string) {
		t.Errorf("%s: exported %s has no doc comment", fset.Position(pos), what)
	}
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || d.Doc != nil {
			return
		}
		if d.Recv != nil && !exportedRecv(d.Recv) {
			return
		}
		report(d.Pos(), d.Name.Name)
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
					report(s.Pos(), s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					if n.IsExported() && s.Doc == nil && d.Doc == nil && s.Comment == nil {
						report(n.Pos(), n.Name)
					}
				}
			}
		}
	}
}

func exportedRecv(fl *ast.FieldList) bool {
	if len(fl.List) == 0 {
		return false
	}
	typ := fl.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// TestDocsListEverySetting checks that every setting a package reads from
// the environment (an env tag of a settings struct) is listed in that
// package's doc.go, whose table users read.
func TestDocsListEverySetting(t *testing.T) {
	root := filepath.Join("..", "..")
	envTag := regexp.MustCompile(`env:"([A-Z0-9_]+)"`)
	found := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tags := envTag.FindAllSubmatch(src, -1)
		if len(tags) == 0 {
			return nil
		}
		doc, err := os.ReadFile(filepath.Join(filepath.Dir(path), "doc.go"))
		if err != nil {
			t.Errorf("%s reads settings, but its package has no doc.go listing them", path)
			return nil
		}
		for _, m := range tags {
			found++
			if !bytes.Contains(doc, m[1]) {
				t.Errorf("%s: %s is not listed in %s", path, m[1], filepath.Join(filepath.Dir(path), "doc.go"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < 20 {
		t.Errorf("found %d settings in the module; the walk missed some", found)
	}
}
