// Package layering measures how package core's code hangs together
// (issue 49, item 1): the methods on *Runner, the uses of one file's
// names by another that point against the best one-way order of the
// files, and how often one step of a run, followed call by call, comes
// back to a file it had left. TestCoreLayering holds the targets; run it
// with -v to print the numbers.
package layering

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Targets of issue 49, item 1, which the test holds.
const (
	maxRunnerMethods = 30
	maxAgainst       = 25
	maxStepReturns   = 15
)

// stepRoots name the function that runs one step of a run, as
// "recv.name" (recv "" for a function): the first found is walked.
var stepRoots = []string{"run.step", "run.loop"}

// A pkg is core type-checked, with the file of each declaration.
type pkg struct {
	fset  *token.FileSet
	files map[string]*ast.File // base name → file (tests excluded)
	info  *types.Info
	tpkg  *types.Package
}

func load(t *testing.T, dir string) *pkg {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &pkg{fset: fset, files: map[string]*ast.File{}}
	var files []*ast.File
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		p.files[n] = f
		files = append(files, f)
	}
	p.info = &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	p.tpkg, err = conf.Check("github.com/toolrelay/toolrelay/core", fset, files, p.info)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fileOf returns the base name of the file declaring obj, "" if not in core.
func (p *pkg) fileOf(obj types.Object) string {
	if obj == nil || obj.Pkg() != p.tpkg || !obj.Pos().IsValid() {
		return ""
	}
	return filepath.Base(p.fset.Position(obj.Pos()).Filename)
}

// packageLevel reports whether obj is a package-level name of core, or a
// method or field of one of its types.
func (p *pkg) packageLevel(obj types.Object) bool {
	if obj == nil || obj.Pkg() != p.tpkg {
		return false
	}
	switch o := obj.(type) {
	case *types.Func:
		if sig := o.Signature(); sig.Recv() != nil {
			return true
		}
		return o.Parent() == p.tpkg.Scope()
	case *types.Var:
		if o.IsField() {
			return false // a field goes with its type
		}
		return o.Parent() == p.tpkg.Scope()
	default:
		return obj.Parent() == p.tpkg.Scope()
	}
}

// runnerMethods counts the methods declared on Runner.
func (p *pkg) runnerMethods() int {
	obj := p.tpkg.Scope().Lookup("Runner")
	return obj.Type().(*types.Named).NumMethods()
}

// uses returns, for each pair of files (from, to), the distinct names of
// to that from uses.
func (p *pkg) uses() map[[2]string]map[types.Object]bool {
	m := map[[2]string]map[types.Object]bool{}
	for id, obj := range p.info.Uses {
		if !p.packageLevel(obj) {
			continue
		}
		from := filepath.Base(p.fset.Position(id.Pos()).Filename)
		to := p.fileOf(obj)
		if to == "" || from == to {
			continue
		}
		k := [2]string{from, to}
		if m[k] == nil {
			m[k] = map[types.Object]bool{}
		}
		m[k][obj] = true
	}
	return m
}

// against counts the uses that point from a later file of order to an
// earlier one.
func against(order []string, w map[[2]string]int) int {
	pos := map[string]int{}
	for i, f := range order {
		pos[f] = i
	}
	n := 0
	for k, c := range w {
		if pos[k[0]] > pos[k[1]] {
			n += c
		}
	}
	return n
}

// bestOrder searches the order of files with the fewest uses against it
// (a weighted minimum feedback arc set: local search from several
// seeded starts, moving one file at a time while that helps).
func bestOrder(files []string, w map[[2]string]int) ([]string, int) {
	rng := rand.New(rand.NewPCG(49, 1))
	var best []string
	bestN := -1
	for try := 0; try < 60; try++ {
		order := slices.Clone(files)
		if try > 0 {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		n := against(order, w)
		for improved := true; improved; {
			improved = false
			for i := range order {
				for j := range order {
					if i == j {
						continue
					}
					cand := slices.Clone(order)
					f := cand[i]
					cand = slices.Delete(cand, i, i+1)
					cand = slices.Insert(cand, j, f)
					if c := against(cand, w); c < n {
						order, n, improved = cand, c, true
					}
				}
			}
		}
		if bestN < 0 || n < bestN {
			best, bestN = order, n
		}
	}
	return best, bestN
}

// funcDecls maps each function and method of core to its declaration.
func (p *pkg) funcDecls() map[types.Object]*ast.FuncDecl {
	m := map[types.Object]*ast.FuncDecl{}
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				m[p.info.Defs[fd.Name]] = fd
			}
		}
	}
	return m
}

// root finds the function named "recv.name".
func (p *pkg) root(name string) types.Object {
	recv, fn, _ := strings.Cut(name, ".")
	if recv == "" {
		return p.tpkg.Scope().Lookup(fn)
	}
	obj := p.tpkg.Scope().Lookup(recv)
	if obj == nil {
		return nil
	}
	named := obj.Type().(*types.Named)
	for m := range named.Methods() {
		if m.Name() == fn {
			return m
		}
	}
	return nil
}

// stepWalk follows the function root call by call, in source order,
// into every function of core it calls (each once). It returns the
// files the walk is in, one after another (a call enters the callee's,
// its return comes back to the caller's); up, how many times a call
// takes the walk back to a file it had left (the file of a caller still
// on the stack, below the one it is in: against any one-way layering);
// and again, how many times the walk, calls and returns alike, comes
// back to a file it had been in before.
func (p *pkg) stepWalk(root types.Object) (trail []string, up, again int) {
	decls := p.funcDecls()
	seen := map[types.Object]bool{}
	var stack []string
	at := func(f string) {
		if len(trail) == 0 || trail[len(trail)-1] != f {
			if slices.Contains(trail, f) {
				again++
			}
			trail = append(trail, f)
		}
	}
	var walk func(obj types.Object)
	walk = func(obj types.Object) {
		seen[obj] = true
		file := p.fileOf(obj)
		if len(stack) > 0 && stack[len(stack)-1] != file && slices.Contains(stack, file) {
			up++
		}
		at(file)
		stack = append(stack, file)
		defer func() { stack = stack[:len(stack)-1] }()
		fd := decls[obj]
		if fd == nil || fd.Body == nil {
			return
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				id = fun
			case *ast.SelectorExpr:
				id = fun.Sel
			default:
				return true
			}
			callee, ok := p.info.Uses[id].(*types.Func)
			if !ok || callee.Pkg() != p.tpkg || seen[callee.Origin()] {
				return true
			}
			walk(callee.Origin())
			at(file) // back in the caller
			return true
		})
	}
	walk(root)
	return trail, up, again
}

func TestCoreLayering(t *testing.T) {
	p := load(t, filepath.Join("..", "..", "core"))

	methods := p.runnerMethods()

	uses := p.uses()
	w := map[[2]string]int{}
	total := 0
	for k, names := range uses {
		w[k] = len(names)
		total += len(names)
	}
	files := make([]string, 0, len(p.files))
	for f := range p.files {
		files = append(files, f)
	}
	sort.Strings(files)
	order, n := bestOrder(files, w)

	var root types.Object
	var rootName string
	for _, name := range stepRoots {
		if root = p.root(name); root != nil {
			rootName = name
			break
		}
	}
	if root == nil {
		t.Fatalf("no step root among %v", stepRoots)
	}
	trail, returns, again := p.stepWalk(root)

	t.Logf("methods on *Runner: %d (target at most %d)", methods, maxRunnerMethods)
	t.Logf("uses of one file's names by another: %d, between %d files; against the best one-way order: %d (target at most %d)", total, len(files), n, maxAgainst)
	t.Logf("best order: %s", strings.Join(order, " → "))
	pos := map[string]int{}
	for i, f := range order {
		pos[f] = i
	}
	var back []string
	for k, names := range uses {
		if pos[k[0]] > pos[k[1]] {
			var ns []string
			for o := range names {
				ns = append(ns, o.Name())
			}
			sort.Strings(ns)
			back = append(back, k[0]+" → "+k[1]+": "+strings.Join(ns, ", "))
		}
	}
	sort.Strings(back)
	for _, b := range back {
		t.Logf("  against: %s", b)
	}
	t.Logf("one step (%s), followed call by call: a call goes back up to a file it had left %d times (target at most %d); calls and returns come back to a file it had been in %d times: %s", rootName, returns, maxStepReturns, again, strings.Join(trail, " → "))

	if methods > maxRunnerMethods {
		t.Errorf("*Runner has %d methods, want at most %d", methods, maxRunnerMethods)
	}
	if n > maxAgainst {
		t.Errorf("%d uses between core's files point against the best one-way order, want at most %d", n, maxAgainst)
	}
	if returns > maxStepReturns {
		t.Errorf("one step comes back to a file it had left %d times, want at most %d", returns, maxStepReturns)
	}
}
