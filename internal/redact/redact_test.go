package redact_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toolrelay/toolrelay/internal/redact"
)

func TestConnString(t *testing.T) {
	const u = redact.Unparsable
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"memory", "memory", u},
		{"URL without secrets", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"},
		{"userinfo password", "postgres://user:SECRET@db:5432/app", "postgres://user:xxxxx@db:5432/app"},
		{"empty password", "postgres://user:@db/app", "postgres://user:xxxxx@db/app"},
		{"password parameter", "postgres://user@db/app?sslmode=require&password=SECRET", "postgres://user@db/app?sslmode=require&password=xxxxx"},
		{"secret parameters in any case", "postgres://db/app?SSLPassword=S1&sslkey=/k&api-key=S2&access_token=S3&sig=S4&client_secret=S5&x=1", "postgres://db/app?SSLPassword=xxxxx&sslkey=xxxxx&api-key=xxxxx&access_token=xxxxx&sig=xxxxx&client_secret=xxxxx&x=1"},
		{"escaped parameter name", "postgres://db/app?pass%77ord=SECRET", "postgres://db/app?pass%77ord=xxxxx"},
		{"parameter without value", "postgres://db/app?password", "postgres://db/app?password=xxxxx"},
		{"semicolon separator", "postgres://db/app?a=1;password=SECRET", "postgres://db/app?a=1&password=xxxxx"},
		{"fragment", "https://host/p#access_token=SECRET", "https://host/p#xxxxx"},
		{"sqlite opaque with parameter", "sqlite:journal.db?password=SECRET&busy_timeout=5s", "sqlite:journal.db?password=xxxxx&busy_timeout=5s"},
		{"sqlite absolute path", "sqlite:///var/lib/j.db?busy=1", "sqlite:///var/lib/j.db?busy=1"},
		{"endpoint", "https://res.services.ai.azure.com/api/projects/p", "https://res.services.ai.azure.com/api/projects/p"},
		{"bad port", "postgres://postgres@127.0.0.1:abc/test?password=SECRET", "postgres:" + u},
		{"bad port with userinfo", "postgres://u:SECRET@127.0.0.1:abc/test", "postgres:" + u},
		{"bad escape in password", "postgres://u:SEC%zzRET@db/app", "postgres:" + u},
		{"at sign in password", "postgres://u:SEC@RET@db/app", "postgres://u:xxxxx@db/app"},
		{"bad escape in parameter name", "postgres://db/app?pass%zz=SECRET", "postgres:" + u},
		{"multiple hosts", "postgres://u:SECRET@h1:5432,h2:5433/app", "postgres://u:xxxxx@h1:5432,h2:5433/app"},
		{"control character", "https://host/\x00SECRET", "https:" + u},
		{"key/value", "host=127.0.0.1 port=1 password=SECRET", "host=127.0.0.1 port=1 password=xxxxx"},
		{"key/value with spaces around =", "host = db  password =  SECRET dbname=app", "host=db password=xxxxx dbname=app"},
		{"key/value quoted", `host=db password='SEC RET' application_name='my app'`, `host=db password=xxxxx application_name='my app'`},
		{"key/value quoted with escapes", `password='it\'s \\ SECRET' user=o\'neil`, `password=xxxxx user='o\'neil'`},
		{"key/value empty quoted value", `host=db options=''`, `host=db options=''`},
		{"key/value sslpassword", "sslpassword=SECRET sslmode=verify-full", "sslpassword=xxxxx sslmode=verify-full"},
		{"key/value unterminated quote", "host=db password='SECRET", u},
		{"key/value key without =", "host=db SECRET", u},
		{"key/value trailing backslash", `host=db password=SECRET\`, u},
		{"key/value junk after quote", `host=db password='a'SECRET`, u},
		{"opaque of another scheme", "api.example.com:SECRET/v1", "api.example.com:" + u},
		{"mailto", "mailto:SECRET@example.com", "mailto:" + u},
		{"file opaque", "file:rel/j.db", "file:rel/j.db"},
		{"key/value empty value before password", "host= password=SECRET dbname=app", "host=xxxxx dbname=app"},
		{"key/value empty quoted value before password", "user='' host= password=SECRET", "user='' host=xxxxx"},
		{"key/value value holding a setting", `host='a password=SECRET'`, "host=xxxxx"},
		{"parameter value holding a setting", "postgres://db/app?host=password=SECRET", "postgres://db/app?host=xxxxx"},
		{"password repeated as a parameter's value", "postgres://u:SECRET@h/db?target_session_attrs=SECRET", "postgres://u:xxxxx@h/db?target_session_attrs=xxxxx"},
		{"password parameter repeated", "postgres://u@h/db?password=SECRET&sslmode=require&application_name=SECRET", "postgres://u@h/db?password=xxxxx&sslmode=require&application_name=xxxxx"},
		{"password repeated inside a value", "postgres://u:SECRET@h/db?options=-c%20x%3DSECRET&search_path=a,SECRET", "postgres://u:xxxxx@h/db?options=xxxxx&search_path=xxxxx"},
		{"password repeated, escaped otherwise", "postgres://u:S%40CRET@h/db?application_name=S%40CRET&target_session_attrs=S@CRET", "postgres://u:xxxxx@h/db?application_name=xxxxx&target_session_attrs=xxxxx"},
		{"password repeated as a parameter's name", "postgres://u:SECRET@h/db?SECRET=1", "postgres://u:xxxxx@h/db?xxxxx=xxxxx"},
		{"password repeated as the user", "postgres://SECRET:SECRET@h/db", "postgres://xxxxx:xxxxx@h/db"},
		{"password repeated as the host and the path", "postgres://u:SECRET@SECRET:5432/SECRET", "postgres://u:xxxxx@xxxxx/xxxxx"},
		{"password parameter repeated in the path, escaped", "postgres://u@h/S%45CRET?password=SECRET", "postgres://u@h/xxxxx?password=xxxxx"},
		{"password named inside a value, repeated", "postgres://db/app?x=password=SECRET&y=SECRET", "postgres://db/app?x=xxxxx&y=xxxxx"},
		{"sqlite password repeated in the path", "sqlite:SECRET.db?password=SECRET", "sqlite:xxxxx?password=xxxxx"},
		{"key/value password repeated", `host=db password=SECRET user=SECRET sslrootcert='/etc/SECRET.pem' dbname=app`, "host=db password=xxxxx user=xxxxx sslrootcert=xxxxx dbname=app"},
		{"key/value quoted password repeated", `password='SEC RET' application_name='SEC RET' target_session_attrs=SEC\ RET`, "password=xxxxx application_name=xxxxx target_session_attrs=xxxxx"},
		{"bare word", "SECRET", u},
		{"path", "/var/lib/SECRET.db", u},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.ConnString(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ConnString(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
			if strings.Contains(got, "SECRET") {
				t.Errorf("ConnString(%q) = %q shows the secret", tc.in, got)
			}
		})
	}
}

// TestSecrets checks that Secrets finds the secrets a connection string
// names, unescaped, in each form.
func TestSecrets(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"none", "postgres://u@h/db?sslmode=disable", nil},
		{"userinfo", "postgres://u:S%40CRET@h/db", []string{"S@CRET", "S%40CRET"}},
		{"parameters", "postgres://h/db?password=S1&sslpassword=S%202&x=1", []string{"S1", "S%202", "S 2"}},
		{"key/value", `host=db password='S 1' sslkey=/k user=u`, []string{"S 1", "/k"}},
		{"inside a value", "postgres://h/db?x=password=S1", []string{"S1"}},
		{"unparsable", "postgres://u:S1@h:port/db", []string{"S1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, redact.Secrets(tc.in)); diff != "" {
				t.Errorf("Secrets(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "PASSWORD": true, "sslpassword": true, "passfile": true, "pwd": true,
		"api-key": true, "apikey": true, "token": true, "client_secret": true, "sig": true,
		"Authorization": true, "credential": true,
		"host": false, "port": false, "dbname": false, "user": false, "sslmode": false,
		"busy_timeout": false, "toolrelay_schema": false, "application_name": false,
	} {
		if got := redact.Secret(name); got != want {
			t.Errorf("Secret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"no secret", "dial tcp 10.0.0.1:5432: connection refused", "dial tcp 10.0.0.1:5432: connection refused"},
		{"key/value", "connect host=db password=SECRET user=app: refused", "connect host=db password=xxxxx user=app: refused"},
		{"empty value before", "host= password=SECRET", "host= password=xxxxx"},
		{"spaced", "password = SECRET dbname=x", "password = xxxxx dbname=x"},
		{"quoted", "password='SEC RET' x=1", "password=xxxxx x=1"},
		{"escaped space", `password=SEC\ RET x=1`, "password=xxxxx x=1"},
		{"unterminated quote", "password='SEC RET", "password=xxxxx"},
		{"URL password", "open postgres://u:SECRET@db:5432/app: refused", "open postgres://u:xxxxx@db:5432/app: refused"},
		{"URL query", "GET https://h/v1?api-key=SECRET&x=1: 401", "GET https://h/v1?api-key=xxxxx&x=1: 401"},
		{"header", "Authorization: Bearer SECRET", "Authorization: Bearer xxxxx"},
		{"api-key header", "api-key: SECRET\nnext", "api-key: xxxxx\nnext"},
		{"JSON", `{"client_secret": "SECRET", "id": 1}`, `{"client_secret": xxxxx, "id": 1}`},
		{"bare bearer", "sent bearer SECRET to x", "sent bearer xxxxx to x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := redact.Text(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Text(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
