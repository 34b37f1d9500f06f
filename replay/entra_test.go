package replay_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/toolrelay/toolrelay/foundry"
	"github.com/toolrelay/toolrelay/replay"
)

// TestEntraTokenRequests records the token requests of an azidentity
// credential given foundry.CredentialOptions (what the foundry backend
// gives the DefaultAzureCredential it builds) over a cassette's transport,
// as the adapter's replay setting wraps it, and replays them with the
// authority stopped: the cassette holds neither the client secret nor the
// token, and the replayed credential gets a token (the mask) with no
// authority at all.
func TestEntraTokenRequests(t *testing.T) {
	const tenant, secret, token = "00000000-0000-0000-0000-000000000001", "client-SECRET-value-1", "token-from-authority-1"
	authority := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "https://" + r.Host + "/" + tenant
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
			fmt.Fprintf(w, `{"token_endpoint":%q,"authorization_endpoint":%q,"issuer":%q}`, base+"/oauth2/v2.0/token", base+"/oauth2/v2.0/authorize", base+"/v2.0")
		case strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token") && r.ParseForm() == nil && r.PostForm.Get("client_secret") == secret:
			fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":3600,"access_token":%q}`, token)
		default:
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		}
	}))
	defer authority.Close()
	file := filepath.Join(t.TempDir(), "entra.yaml")
	getToken := func(c *replay.Cassette, under http.RoundTripper) (string, error) {
		co := foundry.CredentialOptions(&http.Client{Transport: c.Wrap(under)})
		co.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: authority.URL + "/"}
		co.Retry.MaxRetries = -1
		cred, err := azidentity.NewClientSecretCredential(tenant, "client-id", secret, &azidentity.ClientSecretCredentialOptions{ClientOptions: co, DisableInstanceDiscovery: true})
		if err != nil {
			return "", err
		}
		tok, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{foundry.Scope}})
		return tok.Token, err
	}
	rec, err := replay.Open("record:"+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := getToken(rec, authority.Client().Transport); err != nil || got != token {
		t.Fatalf("recording: token %q, %v", got, err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	authority.Close()
	b, _ := os.ReadFile(file)
	for _, s := range []string{secret, token} {
		if strings.Contains(string(b), s) {
			t.Errorf("the cassette holds %q", s)
		}
	}
	if !strings.Contains(string(b), "/oauth2/v2.0/token") {
		t.Errorf("the cassette holds no token request:\n%s", b)
	}
	play, err := replay.Open("replay:"+file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := getToken(play, failing{t}); err != nil || got != replay.Mask {
		t.Errorf("replaying: token %q, %v; want the mask %q", got, err, replay.Mask)
	}
}
