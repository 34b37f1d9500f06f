// Package leaktest holds the tests that credentials and secrets stay where
// they belong, across every backend and journal: every HTTP client the
// backends build refuses a redirect to another origin or to plain http
// before it sends a credential there (redirect_test.go), and a secret
// planted in every credential setting and every journal URL form appears
// in no error, log line or event, whatever error path is taken
// (secrets_test.go). It has no code of its own.
package leaktest
