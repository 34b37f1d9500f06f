package adapter

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the table of settings in doc.go from the tags of Settings")

// settingsDoc returns the package doc's table of the shared settings, as
// the tags of Settings make it: a row per field, its doc, env, json and
// doc_default tags in columns two spaces apart at least, each line of the
// comment indented by a tab.
func settingsDoc() string {
	rows := [][]string{{"Setting", "Environment variable", "File key", "Default"}}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Settings]()) {
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		rows = append(rows, []string{f.Tag.Get("doc"), f.Tag.Get("env"), key, f.Tag.Get("doc_default")})
	}
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			line.WriteString(c)
			if i < len(r)-1 {
				line.WriteString(strings.Repeat(" ", width[i]-len(c)+2))
			}
		}
		b.WriteString("//\t" + strings.TrimRight(line.String(), " ") + "\n")
	}
	return b.String()
}

// TestSettingsDoc checks that the package doc's table of the shared
// settings is the one the tags of Settings make (go test -update rewrites
// it), and that every field has its row's tags.
func TestSettingsDoc(t *testing.T) {
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Settings]()) {
		for _, tag := range []string{"json", "env", "doc"} {
			if f.Tag.Get(tag) == "" {
				t.Errorf("Settings.%s has no %s tag: its row of the table of settings is incomplete", f.Name, tag)
			}
		}
	}
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "//\tSetting ")
	if start < 0 {
		t.Fatal("doc.go has no table of settings (a line starting //\\tSetting)")
	}
	end := start + strings.Index(doc[start:], "//\n")
	want := settingsDoc()
	if *update {
		if err := os.WriteFile("doc.go", []byte(doc[:start]+want+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, doc[start:end]); diff != "" {
		t.Errorf("doc.go's table of settings (-tags +doc; go test -update rewrites it):\n%s", diff)
	}
}
