package redact_test

import (
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/internal/redact"
)

// planted is the secret the fuzz targets plant: letters and digits only,
// so that no text around it can be read as part of it and shown.
const planted = "Pl4ntedS3cret"

// connForms are the ways a connection string names a secret, the
// secret's value as it reads there, and what ends the value, if anything
// must (the text after it could go on with it).
var connForms = []struct{ form, value, end string }{
	{"password=" + planted, planted, " "},
	{"password = " + planted, planted, " "},
	{"password='" + planted + "'", planted, ""},
	{"password='a " + planted + " b'", "a " + planted + " b", ""},
	{"sslpassword=" + planted, planted, " "},
	{"postgres://u:" + planted + "@h/db", planted, ""},
	{"?password=" + planted, planted, "&"},
	{"&sslpassword=" + planted, planted, "&"},
}

// FuzzConnString plants a secret in a connection string, in each form,
// with any text around it, which repeats the secret's value where it
// holds a $ (as another parameter's value, a user, a host, a path; the
// value then ended, so that what is repeated is the whole secret):
// ConnString never shows it, whatever the parse (a URL, key/value
// settings, neither).
func FuzzConnString(f *testing.F) {
	for i := range connForms {
		for _, around := range [][2]string{
			{"", ""}, {"host=db ", " port=1"}, {"host= ", ""}, {"user= dbname= ", " x=1"}, {"host='", "'"},
			{"host=a\\ ", ""}, {"postgres://db/app?x=", ""}, {"postgres://", "@h"}, {"postgres://h/", ""},
			{"sqlite:", ""}, {"postgres://u@h/db?", "&x=1"}, {"options='-c ", "'"},
			{"", "target_session_attrs=$"}, {"user='$' ", " application_name='$' dbname=$"},
			{"postgres://u@h/db?target_session_attrs=$&", ""}, {"postgres://$@$:5432/$?", "&sslmode=$"},
			{"postgres://h/db?", "target_session_attrs=$"}, {"sqlite:$.db", ""}, {"postgres://db/app?x=", "&y=$"},
		} {
			f.Add(around[0], uint8(i), around[1])
		}
	}
	f.Fuzz(func(t *testing.T, before string, form uint8, after string) {
		c := connForms[int(form)%len(connForms)]
		if strings.Contains(before+after, "$") {
			after = c.end + after
		}
		s := strings.ReplaceAll(before, "$", c.value) + c.form + strings.ReplaceAll(after, "$", c.value)
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
