package origin_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/toolrelay/toolrelay/errcode"
	"github.com/toolrelay/toolrelay/internal/origin"
)

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSame(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://h/a", "https://h/b?x=1", true},
		{"https://H:443/a", "HTTPS://h/b", true},
		{"http://h/a", "http://h:80/b", true},
		{"https://h/a", "http://h/a", false},
		{"https://h/a", "https://h:8443/a", false},
		{"https://h/a", "https://g/a", false},
		{"https://h/a", "https://sub.h/a", false},
		{"http://127.0.0.1:1/", "http://localhost:1/", false},
	} {
		if got := origin.Same(mustParse(t, tc.a), mustParse(t, tc.b)); got != tc.want {
			t.Errorf("Same(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST": true, "localhost.": true, "127.0.0.1": true, "127.9.8.7": true, "::1": true,
		"example.com": false, "10.0.0.1": false, "169.254.169.254": false, "localhost.example.com": false, "": false, "::": false,
	} {
		if got := origin.Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", host, got, want)
		}
	}
}

// TestClient checks that a guarded client follows a redirect within its
// origin, refuses one to another origin without sending anything there
// (even when the caller's CheckRedirect would follow it), and leaves the
// caller's client as it was.
func TestClient(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other origin received %s %s", r.Method, r.URL)
	}))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/here":
			http.Redirect(w, r, "/there", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		default:
			io.WriteString(w, "ok "+r.Header.Get("api-key"))
		}
	}))
	t.Cleanup(srv.Close)

	var calls int
	follow := func(*http.Request, []*http.Request) error { calls++; return nil }
	mine := &http.Client{CheckRedirect: follow}
	c := origin.Client(mine)
	if reflect.ValueOf(mine.CheckRedirect).Pointer() != reflect.ValueOf(follow).Pointer() {
		t.Fatal("Client changed the caller's CheckRedirect")
	}

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/here", nil)
	req.Header.Set("api-key", "k")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "ok k" || calls != 1 {
		t.Errorf("same-origin redirect: body %q, caller's CheckRedirect called %d times; want %q, 1", body, calls, "ok k")
	}

	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/away", nil)
	req.Header.Set("api-key", "k")
	_, err = c.Do(req)
	var re *origin.RedirectError
	if !errors.As(err, &re) || errcode.Of(err) != errcode.PermissionDenied {
		t.Fatalf("redirect to another origin: %v, want a PermissionDenied *RedirectError", err)
	}
	if re.From != srv.URL || re.To != other.URL || !strings.Contains(err.Error(), "refused a redirect") {
		t.Errorf("RedirectError = %+v (%v), want from %s to %s", re, err, srv.URL, other.URL)
	}
	var nr interface{ NonRetriable() }
	if !errors.As(err, &nr) {
		t.Error("the error is not NonRetriable for azcore")
	}
	if calls != 1 {
		t.Errorf("the caller's CheckRedirect saw the refused redirect")
	}
}

func TestCheckBaseURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		withKey bool
		want    string // "" for no error
	}{
		{"https://api.example.com/v1", true, ""},
		{"http://127.0.0.1:8080/v1", true, ""},
		{"http://[::1]:8080/v1", true, ""},
		{"http://localhost/v1", true, ""},
		{"http://api.example.com/v1", false, ""},
		{"http://api.example.com/v1", true, "plain http"},
		{"ftp://api.example.com/", false, "not an http or https URL"},
		{"api.example.com/v1", false, "not an http or https URL"},
		{"https://u:SECRET@api.example.com/v1", false, "user information"},
		{"https://api.example.com:SECRET/v1", false, "not an http or https URL"},
	} {
		err := origin.CheckBaseURL("base URL", tc.url, tc.withKey)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckBaseURL(%q, %v) = %v, want nil", tc.url, tc.withKey, err)
		case tc.want != "" && (errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckBaseURL(%q, %v) = %v, want InvalidArgument containing %q", tc.url, tc.withKey, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "SECRET"):
			t.Errorf("CheckBaseURL(%q) = %v shows the secret", tc.url, err)
		}
	}
}

func TestMiddleware(t *testing.T) {
	for _, tc := range []struct {
		url, header string
		refused     bool
	}{
		{"http://api.example.com/v1/x", "Authorization", true},
		{"http://api.example.com/v1/x", "api-key", true},
		{"http://api.example.com/v1/x", "", false},
		{"https://api.example.com/v1/x", "Authorization", false},
		{"http://127.0.0.1:1/v1/x", "Authorization", false},
	} {
		req := httptest.NewRequest(http.MethodGet, tc.url, nil)
		if tc.header != "" {
			req.Header.Set(tc.header, "k")
		}
		sent := false
		_, err := origin.Middleware(req, func(*http.Request) (*http.Response, error) { sent = true; return nil, nil })
		if tc.refused != (err != nil) || sent == tc.refused {
			t.Errorf("%s with %q: sent %v, error %v; want refused %v", tc.url, tc.header, sent, err, tc.refused)
		}
		if err != nil && (!errors.Is(err, origin.ErrPlainHTTP) || errcode.Of(err) != errcode.InvalidArgument) {
			t.Errorf("error %v, want InvalidArgument matching ErrPlainHTTP", err)
		}
	}
}
