package policies

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

// TestKubeconfigPatterns reads the policy's patterns as the API server's
// CEL does, against the base64 of kubeconfigs: every field that reaches
// beyond the kubeconfig is found at whatever offset it sits, inline data is
// not.
func TestKubeconfigPatterns(t *testing.T) {
	var res []*regexp.Regexp
	for _, p := range KubeconfigPatterns() {
		res = append(res, regexp.MustCompile(p.Regexp))
	}
	matches := func(s string) bool {
		for _, re := range res {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	inline := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://10.0.0.1:6443\", certificate-authority-data: %s}}]\n" +
		"users: [{name: u, user: {client-certificate-data: %s, client-key-data: %s}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	cases := map[string]struct {
		reason  string
		content string
		refused bool
	}{
		"Inline":       {reason: "a kubeconfig holding everything inline passes", content: strings.ReplaceAll(inline, "%s", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=")},
		"Token":        {reason: "an inline token passes", content: "users: [{name: u, user: {token: abc}}]\n"},
		"TokenFile":    {reason: "a token file is refused", content: "users: [{name: u, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]\n", refused: true},
		"Exec":         {reason: "an exec plugin is refused", content: "users:\n- name: u\n  user:\n    exec:\n      command: sh\n", refused: true},
		"ExecJSON":     {reason: "in JSON too", content: `{"users":[{"name":"u","user":{"exec" :{"command":"sh"}}}]}`, refused: true},
		"AuthProvider": {reason: "an auth provider is refused", content: "users: [{name: u, user: {auth-provider: {name: oidc}}}]\n", refused: true},
		"CAFile":       {reason: "a CA file is refused", content: "clusters: [{name: c, cluster: {certificate-authority: /etc/ca.crt}}]\n", refused: true},
		"KeyFile":      {reason: "a key file is refused", content: "users: [{name: u, user: {'client-key': /etc/k}}]\n", refused: true},
		"Escape":       {reason: "an escape that could spell a field is refused", content: `{"users":[{"name":"u","user":{"token\u0046ile":"/dev/zero"}}]}`, refused: true},
		"BinaryTag":    {reason: "a YAML !!binary key decodes into any key", content: "users: [{name: u, user: {!!binary dG9rZW5GaWxl: /dev/zero}}]\n", refused: true},
		"UTF16":        {reason: "UTF-16 spells every field with NULs between its bytes", content: "\xff\xfeu\x00s\x00e\x00r\x00s\x00", refused: true},
		"AnchoredExec": {reason: "an anchor spelling exec as a flow item is refused", content: "x: [&a exec]\nusers: [{name: u, user: {*a : {command: sh}}}]\n", refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// The text at each offset of a base64 group.
			for pad := range 3 {
				enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", pad) + tc.content))
				if got := matches(enc); got != tc.refused {
					t.Errorf("%s\noffset %d: matched %t, want %t", tc.reason, pad, got, tc.refused)
				}
			}
		})
	}
}

// FuzzKubeconfigPatterns: for any value, the patterns over its base64 match
// exactly when the value holds one of the refused texts.
func FuzzKubeconfigPatterns(f *testing.F) {
	var res []*regexp.Regexp
	for _, p := range KubeconfigPatterns() {
		res = append(res, regexp.MustCompile(p.Regexp))
	}
	holds := func(v []byte) bool {
		for _, r := range kubeconfigReaching {
			if prefix, ok := strings.CutSuffix(r.text, keyEnd); ok {
				for _, e := range keyEnds {
					if strings.Contains(string(v), prefix+string(e)) {
						return true
					}
				}
				continue
			}
			if strings.Contains(string(v), r.text) {
				return true
			}
		}
		return false
	}
	f.Add([]byte("client-certificate-data: x"))
	f.Add([]byte("#client-key: /x"))
	f.Add([]byte(`{"exec":{}}`))
	f.Add([]byte("a\\b"))
	f.Fuzz(func(t *testing.T, v []byte) {
		enc := base64.StdEncoding.EncodeToString(v)
		matched := false
		for _, re := range res {
			matched = matched || re.MatchString(enc)
		}
		if want := holds(v); matched != want {
			t.Fatalf("%q: matched %t, holds a refused text %t", v, matched, want)
		}
	})
}
