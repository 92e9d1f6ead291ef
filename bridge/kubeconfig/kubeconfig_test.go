package kubeconfig

import (
	"strings"
	"testing"
)

// kc builds a kubeconfig whose one user and one cluster carry the given
// fields (YAML flow mappings).
func kc(cluster, user string) string {
	return `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {` + cluster + `}}]
users: [{name: u, user: {` + user + `}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
}

const server = `server: "https://10.0.0.1:6443"`

func TestUsable(t *testing.T) {
	cases := map[string]struct {
		reason string
		raw    string
		// want is a substring of the error; "" when usable.
		want string
	}{
		"Inline": {
			reason: "a kubeconfig holding its CA, certificate and key inline is usable",
			raw:    kc(server+`, certificate-authority-data: Zm9v`, `client-certificate-data: Zm9v, client-key-data: Zm9v`),
		},
		"Token": {
			reason: "an inline token is usable",
			raw:    kc(server, `token: abc`),
		},
		"JSON": {
			reason: "a kubeconfig in JSON is read as clientcmd reads it",
			raw:    `{"apiVersion":"v1","kind":"Config","clusters":[{"name":"c","cluster":{"server":"https://h:1"}}],"users":[{"name":"u","user":{"tokenFile":"/dev/zero"}}],"contexts":[{"name":"x","context":{"cluster":"c","user":"u"}}],"current-context":"x"}`,
			want:   `user "u": tokenFile`,
		},
		"TokenFile": {
			reason: "a token file is a file of whoever reads the kubeconfig, never opened",
			raw:    kc(server, `tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token`),
			want:   `user "u": tokenFile`,
		},
		"DevZero": {
			reason: "a file that never ends is refused without being read",
			raw:    kc(server, `tokenFile: /dev/zero`),
			want:   `tokenFile`,
		},
		"ClientCertificateFile": {
			reason: "certificate and key paths are files of the reader",
			raw:    kc(server, `client-certificate: /etc/x.crt, client-key: /etc/x.key`),
			want:   `user "u": client-certificate (a file of the host that reads it); user "u": client-key`,
		},
		"CAFile": {
			reason: "a CA path is a file of the reader",
			raw:    kc(server+`, certificate-authority: /nonexistent`, `token: a`),
			want:   `cluster "c": certificate-authority`,
		},
		"Exec": {
			reason: "an exec plugin runs a command",
			raw:    kc(server, `exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}`),
			want:   `user "u": exec`,
		},
		"AuthProvider": {
			reason: "an auth provider plugin acts with the reader's environment",
			raw:    kc(server, `auth-provider: {name: oidc}`),
			want:   `user "u": auth-provider`,
		},
		"UnusedUser": {
			reason: "a user the current context does not name is judged too: a client may switch contexts",
			raw: `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://h:1"}}]
users: [{name: u, user: {token: a}}, {name: other, user: {tokenFile: /etc/passwd}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
			want: `user "other": tokenFile`,
		},
		"NotAKubeconfig": {
			reason: "bytes that do not parse say so",
			raw:    "{",
			want:   errParse,
		},
		"DuplicateUsers": {
			reason: "a decoder's error, which prints what it read, is not quoted: the key stays out of the message",
			raw: `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://h:1"}}]
users: [{name: u, user: {client-key-data: c2VjcmV0LWtleS1ieXRlcw==}}, {name: u, user: {token: a}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
			want: "it names a cluster, user or context twice",
		},
		"NoCurrentContext": {
			reason: "a client needs a current context",
			raw:    strings.Replace(kc(server, `token: a`), "current-context: x", "", 1),
			want:   errNoContext,
		},
		"MissingContext": {
			reason: "the current context must exist",
			raw:    strings.Replace(kc(server, `token: a`), "current-context: x", "current-context: other", 1),
			want:   errNoCtx,
		},
		"NoServer": {
			reason: "a cluster without a server cannot be reached",
			raw:    kc(`insecure-skip-tls-verify: true`, `token: a`),
			want:   errNoServer,
		},
		"NotAURL": {
			reason: "the server must be an http or https URL",
			raw:    kc(`server: "unix:///var/run/docker.sock"`, `token: a`),
			want:   errBadServer,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Usable([]byte(tc.raw))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s\nUsable(): %v, want nil", tc.reason, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s\nUsable(): %v, want an error containing %q", tc.reason, err, tc.want)
			case err != nil && (strings.Contains(err.Error(), "115 101 99") || strings.Contains(err.Error(), "secret-key")):
				t.Errorf("%s\nUsable(): %v quotes the kubeconfig's key", tc.reason, err)
			}
		})
	}
}

// FuzzUsable: whatever the bytes, judging them returns, and a kubeconfig
// judged usable names no field Reaches lists.
func FuzzUsable(f *testing.F) {
	f.Add([]byte(kc(server, `token: a`)))
	f.Add([]byte(kc(server, `tokenFile: /dev/zero`)))
	f.Add([]byte(kc(server+`, certificate-authority: /x`, `exec: {command: x}`)))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if Usable(raw) != nil {
			return
		}
		cfg, err := Parse(raw)
		if err != nil {
			t.Fatalf("usable yet unparseable: %v", err)
		}
		if r := Reaches(cfg); len(r) > 0 {
			t.Fatalf("usable yet reaching beyond itself: %v", r)
		}
	})
}
