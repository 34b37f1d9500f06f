// Package doccheck holds a test that every exported name in the module has
// a doc comment, and every package a package doc.
package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
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
