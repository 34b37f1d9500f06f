package doccheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A sample is a Go sample of the docs: where it is, and its text.
type sample struct {
	where, text string
}

// readmeSamples returns the ```go blocks of the README, dedented.
func readmeSamples(t *testing.T, root string) []sample {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []sample
	var cur *sample
	indent := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```go":
			indent = line[:strings.Index(line, "`")]
			cur = &sample{where: fmt.Sprintf("README.md:%d", n)}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += strings.TrimPrefix(line, indent) + "\n"
		}
	}
	return out
}

// goLike matches the code blocks of package docs that are Go: they declare
// something (:=), or begin as Go does.
var goLike = regexp.MustCompile(`:=|^(import|func|type|var|if|switch|defer|for) `)

// docSamples returns the Go code blocks of the package docs of the module
// at root (less the directories skip names, other modules).
func docSamples(t *testing.T, root string, skip ...string) []sample {
	t.Helper()
	var out []sample
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || slices.Contains(skip, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil || f.Doc == nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var p comment.Parser
		for _, b := range p.Parse(f.Doc.Text()).Content {
			if c, ok := b.(*comment.Code); ok && goLike.MatchString(c.Text) && !strings.HasPrefix(c.Text, "{") {
				out = append(out, sample{where: rel + " (package doc)", text: c.Text})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// imports are the packages a sample may use by their names alone, with
// their import paths.
var imports = map[string]string{
	"adapter": "github.com/toolrelay/toolrelay/adapter", "core": "github.com/toolrelay/toolrelay/core",
	"coretest": "github.com/toolrelay/toolrelay/core/coretest", "errcode": "github.com/toolrelay/toolrelay/errcode",
	"conformance": "github.com/toolrelay/toolrelay/conformance", "journaltest": "github.com/toolrelay/toolrelay/journal/journaltest",
	"driver": "github.com/toolrelay/toolrelay/journal/driver", "pgjournal": "github.com/toolrelay/toolrelay/journal/pgjournal",
	"sqlitejournal": "github.com/toolrelay/toolrelay/journal/sqlitejournal", "mcptools": "github.com/toolrelay/toolrelay/mcptools",
	"a2atools":   "github.com/toolrelay/toolrelay/a2atools",
	"openaitest": "github.com/toolrelay/toolrelay/openai/openaitest", "web": "github.com/toolrelay/toolrelay/web",
	"telemetry": "github.com/toolrelay/toolrelay/telemetry", "journal": "github.com/toolrelay/toolrelay/journal",
	"openai": "github.com/openai/openai-go/v3", "option": "github.com/openai/openai-go/v3/option",
	"temporal": "github.com/toolrelay/toolrelay/temporal", "worker": "go.temporal.io/sdk/worker",
	"fmt": "fmt", "errors": "errors", "context": "context", "http": "net/http", "filepath": "path/filepath",
	"testing": "testing", "strings": "strings", "time": "time", "json": "encoding/json", "slog": "log/slog", "os": "os", "log": "log",
}

// givens declares what samples use without declaring: the program's
// context, runner and toolbox, and the like. A sample's own declarations
// shadow them.
var givens = map[string]string{
	"ctx":        "var ctx context.Context",
	"runner":     "var runner *core.Runner",
	"tools":      "var tools *core.Toolbox",
	"backend":    "var backend coredriver.Backend",
	"token":      "var token string",
	"userOf":     "var userOf func(*http.Request) (string, error)",
	"mux":        "var mux *http.ServeMux",
	"horoscope":  "var horoscope func(context.Context, struct{ Sign string }) (string, error)",
	"newHarness": "var newHarness conformance.HarnessMaker",
	"mystore":    "var mystore struct{ Open func(context.Context, string) (*sqlitejournal.Journal, error) }",
	"retry":      "var retry func()",
	"c":          "var c client.Client",
	"err":        "var err error",
}

// givenImports are the imports of givens.
var givenImports = map[string][]string{
	"ctx": {"context"}, "runner": {"github.com/toolrelay/toolrelay/core"}, "tools": {"github.com/toolrelay/toolrelay/core"},
	"backend": {`coredriver "github.com/toolrelay/toolrelay/core/driver"`}, "userOf": {"net/http"}, "mux": {"net/http"},
	"horoscope": {"context"}, "newHarness": {"github.com/toolrelay/toolrelay/conformance"},
	"mystore": {"context", "github.com/toolrelay/toolrelay/journal/sqlitejournal"}, "c": {"go.temporal.io/sdk/client"},
}

// elided matches the lines that stand for code left out ("...", "{ ... }").
var elided = regexp.MustCompile(`(?m)^\s*\.\.\.\s*$|\{ \.\.\. \}`)

// program turns a sample into the source of package name: its imports
// and top-level declarations as they are, its statements the body of a
// function (every variable they declare used, so that a sample need not
// use what it shows), and the givens it refers to without declaring.
func program(s sample, name string) (string, error) {
	text := elided.ReplaceAllStringFunc(s.text, func(m string) string {
		if strings.Contains(m, "{") {
			return "{}"
		}
		return ""
	})
	// Split the top-level declarations (from a line starting "import",
	// "type" or "func" to the line that closes it) from the statements.
	var decls, stmts strings.Builder
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "package ") {
			// A complete program: its package is the sample's own.
			continue
		}
		if !regexp.MustCompile(`^(import|type|func) `).MatchString(l) {
			stmts.WriteString(l + "\n")
			continue
		}
		decls.WriteString(l + "\n")
		if strings.HasSuffix(l, "{") || strings.HasSuffix(l, "(") {
			for i++; i < len(lines); i++ {
				decls.WriteString(lines[i] + "\n")
				if lines[i] == "}" || lines[i] == ")" {
					break
				}
			}
		}
	}
	fset := token.NewFileSet()
	src := "package " + name + "\n\n" + decls.String() + "\nfunc sample() error {\n" + stmts.String() + "\nreturn nil\n}\n"
	f, err := parser.ParseFile(fset, "sample.go", src, parser.ParseComments)
	if err != nil {
		return src, err
	}
	useDeclared(f)
	// The imports its names need, and the givens.
	declared := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			declared[d.Name.Name] = true
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				switch sp := sp.(type) {
				case *ast.TypeSpec:
					declared[sp.Name.Name] = true
				case *ast.ImportSpec:
					n := strings.Trim(sp.Path.Value, `"`)
					n = n[strings.LastIndex(n, "/")+1:]
					if sp.Name != nil {
						n = sp.Name.Name
					}
					declared[n] = true
				}
			}
		}
	}
	need := map[string]bool{}
	var extra []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && imports[id.Name] != "" && !declared[id.Name] && !need[imports[id.Name]] {
				need[imports[id.Name]] = true
			}
		case *ast.Ident:
			if g := givens[n.Name]; g != "" && !declared[n.Name] {
				declared[n.Name] = true
				extra = append(extra, g)
				for _, imp := range givenImports[n.Name] {
					need[imp] = true
				}
			}
		}
		return true
	})
	var b bytes.Buffer
	if err := format.Node(&b, fset, f); err != nil {
		return src, err
	}
	out := b.String()
	var imps []string
	for p := range need {
		if !strings.Contains(p, `"`) {
			p = `"` + p + `"`
		}
		if !strings.Contains(out, p+"\n") {
			imps = append(imps, p)
		}
	}
	slices.Sort(imps)
	head := "package " + name + "\n"
	if len(imps) > 0 {
		head += "\nimport (\n\t" + strings.Join(imps, "\n\t") + "\n)\n"
	}
	body := strings.TrimPrefix(out, "package "+name+"\n")
	return head + body + "\n" + strings.Join(extra, "\n") + "\n", nil
}

// useDeclared adds, after each statement of f that declares variables, a
// statement using them (_ = x), and at the top of a range loop's body one
// using its variables: a sample shows what it needs, not what a compiler
// asks of a whole program.
func useDeclared(f *ast.File) {
	uses := func(names []ast.Expr) []ast.Stmt {
		var out []ast.Stmt
		for _, e := range names {
			if id, ok := e.(*ast.Ident); ok && id.Name != "_" {
				out = append(out, &ast.AssignStmt{Lhs: []ast.Expr{ast.NewIdent("_")}, Tok: token.ASSIGN, Rhs: []ast.Expr{ast.NewIdent(id.Name)}})
			}
		}
		return out
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BlockStmt:
			var list []ast.Stmt
			for _, s := range n.List {
				list = append(list, s)
				switch s := s.(type) {
				case *ast.AssignStmt:
					if s.Tok == token.DEFINE {
						list = append(list, uses(s.Lhs)...)
					}
				case *ast.DeclStmt:
					if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
						for _, sp := range g.Specs {
							var names []ast.Expr
							for _, id := range sp.(*ast.ValueSpec).Names {
								names = append(names, id)
							}
							list = append(list, uses(names)...)
						}
					}
				}
			}
			n.List = list
		case *ast.RangeStmt:
			if n.Tok == token.DEFINE {
				n.Body.List = append(uses([]ast.Expr{n.Key, n.Value}), n.Body.List...)
			}
		}
		return true
	})
}

// TestGoSamples compiles every Go sample of the README and of the package
// docs, as a package of its own: a sample that calls a function that is
// gone, or names a field by its old name, fails the test. The temporal
// module's samples are compiled in that module.
func TestGoSamples(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	samples := append(readmeSamples(t, root), docSamples(t, root, "temporal", "examples/temporal")...)
	temporalSamples := docSamples(t, filepath.Join(root, "temporal"), "realtest")
	if len(samples) < 10 {
		t.Fatalf("found %d samples; the extraction is broken", len(samples))
	}
	dir := t.TempDir()
	type built struct {
		sample
		pkg, src string
	}
	byModule := map[string][]built{} // module root → its samples
	for i, s := range append(samples, temporalSamples...) {
		name := fmt.Sprintf("sample%d", i)
		src, err := program(s, name)
		if err != nil {
			t.Errorf("%s: does not parse as Go: %v\n%s", s.where, err, s.text)
			continue
		}
		mod := root
		if strings.Contains(src, `"go.temporal.io/`) || i >= len(samples) {
			mod = filepath.Join(root, "temporal")
		}
		byModule[mod] = append(byModule[mod], built{s, name, src})
	}
	for mod, list := range byModule {
		overlay := map[string]string{}
		var pkgs []string
		for _, b := range list {
			file := filepath.Join(dir, b.pkg+".go")
			if err := os.WriteFile(file, []byte(b.src), 0o600); err != nil {
				t.Fatal(err)
			}
			overlay[filepath.Join(mod, "testdata", "doccheck", b.pkg, "sample.go")] = file
			pkgs = append(pkgs, "./testdata/doccheck/"+b.pkg)
		}
		o, _ := json.Marshal(map[string]any{"Replace": overlay})
		of := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(of, o, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", append([]string{"build", "-overlay", of}, pkgs...)...)
		cmd.Dir = mod
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Logf("%s: %d samples compile", mod, len(list))
			continue
		}
		for _, b := range list {
			if bytes.Contains(out, []byte("/"+b.pkg+".go:")) {
				t.Errorf("%s: the sample does not compile:\n%s\nas compiled:\n%s", b.where, grep(out, "/"+b.pkg+".go:"), b.src)
			}
		}
		if !t.Failed() {
			t.Errorf("go build in %s: %v\n%s", mod, err, out)
		}
	}
}

// grep returns the lines of out that name pkg.
func grep(out []byte, pkg string) string {
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, pkg) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
