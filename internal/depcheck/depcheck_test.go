// Package depcheck checks that each program links only what it uses: a
// program importing a backend, the adapter package or the journal
// mux links no fake, no test helper, no database driver and no MCP SDK
// (which only package mcptools links).
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden are the packages a production program must not link unless it
// imports them itself.
var forbidden = []string{
	"net/http/httptest",
	"github.com/toolrelay/toolrelay/openai/openaitest",
	"github.com/toolrelay/toolrelay/foundry/foundrytest",
	"github.com/toolrelay/toolrelay/core/coretest",
	"github.com/jackc/pgx/v5",
	"modernc.org/sqlite",
	"go.opentelemetry.io/otel",
	"github.com/modelcontextprotocol/go-sdk",
	"github.com/toolrelay/toolrelay/mcptools/mcptest",
}

func TestDependencies(t *testing.T) {
	const mod = "github.com/toolrelay/toolrelay/"
	tests := []struct {
		pkgs []string // what the program imports
		may  []string // forbidden packages it may link all the same
		also []string // packages forbidden to it besides
	}{
		{pkgs: []string{"core"}},
		{pkgs: []string{"errcode"}},
		{pkgs: []string{"adapter"}},
		{pkgs: []string{"journal"}},
		{pkgs: []string{"adapter", "openai"}, also: []string{"github.com/Azure/azure-sdk-for-go/sdk/azcore", "github.com/Azure/azure-sdk-for-go/sdk/azidentity"}},
		{pkgs: []string{"adapter", "responses"}, also: []string{"github.com/Azure/azure-sdk-for-go/sdk/azcore", "github.com/Azure/azure-sdk-for-go/sdk/azidentity", mod + "foundry"}},
		{pkgs: []string{"adapter", "foundry"}},
		{pkgs: []string{"journal", "journal/sqlitejournal"}, may: []string{"modernc.org/sqlite"}},
		{pkgs: []string{"journal", "journal/pgjournal"}, may: []string{"github.com/jackc/pgx/v5"}},
		{pkgs: []string{"mcptools"}, may: []string{"github.com/modelcontextprotocol/go-sdk"}, also: []string{"github.com/openai/openai-go/v3", "github.com/Azure/azure-sdk-for-go/sdk/azcore"}},
	}
	for _, tt := range tests {
		name := strings.Join(tt.pkgs, "+")
		t.Run(name, func(t *testing.T) {
			args := []string{"list", "-deps"}
			for _, p := range tt.pkgs {
				args = append(args, mod+p)
			}
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
		check:
			for _, f := range append(forbidden[:len(forbidden):len(forbidden)], tt.also...) {
				for _, m := range tt.may {
					if f == m {
						continue check
					}
				}
				for _, d := range deps {
					if d == f || strings.HasPrefix(d, f+"/") {
						t.Errorf("a program importing %s links %s", name, d)
						break
					}
				}
			}
		})
	}
}

// TestExamplesImportWhatTheyUse checks that no example links package all
// (both fakes and both journal drivers: for tests and tools) or package
// testing (a test helper's), and that only the example whose doc offers a
// PostgreSQL journal links pgx.
func TestExamplesImportWhatTheyUse(t *testing.T) {
	const mod = "github.com/toolrelay/toolrelay/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./../../examples/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	mayPG := map[string]bool{mod + "examples/refund": true}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, deps := f[0], f[1:]
		if strings.Contains(pkg, "/internal/") {
			continue
		}
		n++
		for _, d := range deps {
			switch {
			case d == mod+"all":
				t.Errorf("example %s links package all: import what it uses", pkg)
			case d == "testing":
				t.Errorf("example %s links package testing: a test helper belongs in a package of its own", pkg)
			case d == "github.com/jackc/pgx/v5" && !mayPG[pkg]:
				t.Errorf("example %s links pgx, yet offers no PostgreSQL journal", pkg)
			}
		}
	}
	if n < 5 {
		t.Fatalf("go list found %d examples:\n%s", n, out)
	}
}
