package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReport: the plain output of go test comes through (a package's
// result, a failed test's output, a build error), the verbose lines do
// not, and the skipped tests are listed with their reasons, grouped.
func TestReport(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"m/a"}`,
		`{"Action":"run","Package":"m/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}`,
		`{"Action":"pass","Package":"m/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"m/a","Test":"TestPG","Output":"=== RUN   TestPG\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestPG","Output":"    pg_test.go:9: TOOLRELAY_TEST_POSTGRES is not set\n"}`,
		`{"Action":"output","Package":"m/a","Test":"TestPG","Output":"--- SKIP: TestPG (0.00s)\n"}`,
		`{"Action":"skip","Package":"m/a","Test":"TestPG"}`,
		`{"Action":"output","Package":"m/a","Test":"TestPG2","Output":"    pg_test.go:12: TOOLRELAY_TEST_POSTGRES is not set\n"}`,
		`{"Action":"skip","Package":"m/a","Test":"TestPG2"}`,
		`{"Action":"output","Package":"m/a","Output":"PASS\n"}`,
		`{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t0.1s\n"}`,
		`{"Action":"pass","Package":"m/a"}`,
		`{"Action":"output","Package":"m/b","Test":"TestBad","Output":"=== RUN   TestBad\n"}`,
		`{"Action":"output","Package":"m/b","Test":"TestBad","Output":"    b_test.go:3: got 1, want 2\n"}`,
		`{"Action":"output","Package":"m/b","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}`,
		`{"Action":"fail","Package":"m/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"m/b","Output":"FAIL\n"}`,
		`{"Action":"output","Package":"m/b","Output":"FAIL\tm/b\t0.2s\n"}`,
		`{"Action":"fail","Package":"m/b"}`,
		`# m/c`,
		`c.go:1:1: expected 'package', found 'EOF'`,
	}, "\n") + "\n"
	var out strings.Builder
	if err := report(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := "ok  \tm/a\t0.1s\n" +
		"=== RUN   TestBad\n    b_test.go:3: got 1, want 2\n--- FAIL: TestBad (0.00s)\n" +
		"FAIL\nFAIL\tm/b\t0.2s\n" +
		"# m/c\nc.go:1:1: expected 'package', found 'EOF'\n" +
		"skipped: 2 tests\n" +
		"  m/a: TOOLRELAY_TEST_POSTGRES is not set (TestPG, TestPG2)\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	out.Reset()
	report(strings.NewReader(`{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t0.1s\n"}`+"\n"), &out)
	if !strings.HasSuffix(out.String(), "skipped: none\n") {
		t.Errorf("no skips: %q, want it said", out.String())
	}
}
