package redact_test

import (
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/internal/redact"
)

// planted is the secret the fuzz targets plant: letters and digits only,
// so that no text around it can be read as part of it and shown.
const planted = "Pl4ntedS3cret"

// connForms are the ways a connection string names a secret.
var connForms = []string{
	"password=" + planted,
	"password = " + planted,
	"password='" + planted + "'",
	"password='a " + planted + " b'",
	"sslpassword=" + planted,
	"postgres://u:" + planted + "@h/db",
	"?password=" + planted,
	"&sslpassword=" + planted,
}

// FuzzConnString plants a secret in a connection string, in each form,
// with any text around it: ConnString never shows it, whatever the parse
// (a URL, key/value settings, neither).
func FuzzConnString(f *testing.F) {
	for i := range connForms {
		for _, around := range [][2]string{
			{"", ""}, {"host=db ", " port=1"}, {"host= ", ""}, {"user= dbname= ", " x=1"}, {"host='", "'"},
			{"host=a\\ ", ""}, {"postgres://db/app?x=", ""}, {"postgres://", "@h"}, {"postgres://h/", ""},
			{"sqlite:", ""}, {"postgres://u@h/db?", "&x=1"}, {"options='-c ", "'"},
		} {
			f.Add(around[0], uint8(i), around[1])
		}
	}
	f.Fuzz(func(t *testing.T, before string, form uint8, after string) {
		s := before + connForms[int(form)%len(connForms)] + after
		if got := redact.ConnString(s); strings.Contains(got, planted) {
			t.Errorf("ConnString(%q) = %q shows the secret", s, got)
		}
	})
}

// textForms are the ways an error's text names a secret.
var textForms = []string{
	"password=" + planted,
	"password = " + planted,
	"password='x " + planted + "'",
	`"api_key": "` + planted + `"`,
	"postgres://u:" + planted + "@h/db",
	"https://h/v1?api-key=" + planted,
	"Authorization: Bearer " + planted,
	"api-key: " + planted,
	"bearer " + planted,
	"token=" + planted,
}

// FuzzText plants a secret in an error's text, in each form, with any
// text around it: Text never shows it.
func FuzzText(f *testing.F) {
	for i := range textForms {
		for _, around := range [][2]string{{"", ""}, {"connect ", ": refused"}, {"host= ", ""}, {`{"x":1,`, "}"}, {"x'", "'"}, {"a:", "/"}} {
			f.Add(around[0], uint8(i), around[1])
		}
	}
	f.Fuzz(func(t *testing.T, before string, form uint8, after string) {
		s := before + textForms[int(form)%len(textForms)] + after
		if got := redact.Text(s); strings.Contains(got, planted) {
			t.Errorf("Text(%q) = %q shows the secret", s, got)
		}
	})
}
