package policies

// Kubeconfigs CAPI reads with its own identity: the ValidatingAdmissionPolicy
// that refuses a <cluster>-kubeconfig Secret whose kubeconfig reaches beyond
// itself.

import (
	"regexp"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// KubeconfigPolicyName names the ValidatingAdmissionPolicy (and its binding)
// that keeps file paths, commands and plugins out of the kubeconfig Secrets
// CAPI reads.
const KubeconfigPolicyName = "capxp-kubeconfig-content"

// kubeconfigReaching are the texts the policy refuses in a kubeconfig, by
// the field they spell: a command, a plugin, a file of the host that reads
// it, and a backslash (JSON and YAML escapes and line joins can spell any of
// them). exec and the file paths count only followed by what ends a key or
// a scalar in YAML and JSON, so that certificate-authority-data,
// client-certificate-data, client-key-data and the base64 in them pass.
var kubeconfigReaching = []struct{ field, text string }{
	{"a backslash escape", `\`},
	// A YAML tag (!!binary decodes base64 into any key), and a NUL byte
	// (UTF-16 and UTF-32, which YAML parsers read after a byte-order mark,
	// spell every ASCII text with NULs between its bytes).
	{"a YAML tag", "!"},
	{"a NUL byte (UTF-16 or UTF-32)", "\x00"},
	{"tokenFile", "tokenFile"},
	{"auth-provider", "auth-provider"},
	{"exec", "exec" + keyEnd},
	{"client-certificate", "client-certificate" + keyEnd},
	{"client-key", "client-key" + keyEnd},
	{"certificate-authority", "certificate-authority" + keyEnd},
}

// keyEnd, ending a text of kubeconfigReaching, stands for any one byte of
// keyEnds.
const (
	keyEnd  = "\xff\xfe"
	keyEnds = ":\"' \t\n\r,]}"
)

// KubeconfigPattern is a regular expression over the base64 of a Secret's
// value that matches when the decoded value holds a text: the API server's
// CEL has no base64 decoder. The encoding of a text depends on its offset in
// a 3-byte group, so the expression is anchored to the 4-character groups
// of the encoding and has one alternative per offset, each character the
// set of those that encode the text's bits there: it matches exactly the
// values holding the text.
type KubeconfigPattern struct {
	Field, Regexp string
}

// KubeconfigPatterns returns a pattern for every text of kubeconfigReaching.
func KubeconfigPatterns() []KubeconfigPattern {
	out := make([]KubeconfigPattern, 0, len(kubeconfigReaching))
	for _, r := range kubeconfigReaching {
		// One text per byte of keyEnds: a set of bytes in one position
		// would also match bytes outside it (the characters that encode
		// its bits are chosen independently).
		texts := []string{r.text}
		if prefix, ok := strings.CutSuffix(r.text, keyEnd); ok {
			texts = texts[:0]
			for _, e := range keyEnds {
				texts = append(texts, prefix+string(e))
			}
		}
		var alts []string
		for _, t := range texts {
			for off := range 3 {
				alts = append(alts, encodedAt([]byte(t), off))
			}
		}
		out = append(out, KubeconfigPattern{Field: r.field, Regexp: "^(?:" + anyB64 + "{4})*(?:" + strings.Join(alts, "|") + ")"})
	}
	return out
}

const (
	b64    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	anyB64 = "[A-Za-z0-9+/]"
)

// encodedAt returns the regular expression of the base64 characters, from
// the start of a 4-character group, that encode text starting off bytes
// into a 3-byte group.
func encodedAt(text []byte, off int) string {
	first := 8 * off / 6
	last := (8*(off+len(text)) - 1) / 6
	var b strings.Builder
	for range first {
		b.WriteString(anyB64)
	}
	for k := first; k <= last; k++ {
		// Character k carries bits [6k, 6k+6) of the group's bytes; the
		// text's byte i sits at bits [8(off+i), 8(off+i)+8).
		values := map[int]bool{}
		for v := range 64 {
			if charFits(text, off, k, v) {
				values[v] = true
			}
		}
		b.WriteString(class(values))
	}
	return b.String()
}

// charFits reports whether the 6-bit value v of character k agrees with
// the text's bytes at every bit of k they hold.
func charFits(text []byte, off, k, v int) bool {
	for i := max(0, 6*k/8-off); i <= (6*k+5)/8-off && i < len(text); i++ {
		if !byteFits(text[i], off+i, k, v) {
			return false
		}
	}
	return true
}

// byteFits reports whether byte c, the group's byte at, agrees with v at
// every bit of character k it holds.
func byteFits(c byte, at, k, v int) bool {
	for bit := max(6*k, 8*at); bit < min(6*k+6, 8*at+8); bit++ {
		if int(c)>>(7-(bit-8*at))&1 != v>>(5-(bit-6*k))&1 {
			return false
		}
	}
	return true
}

// class renders a set of 6-bit values as a regular expression's character
// class of their base64 characters.
func class(values map[int]bool) string {
	if len(values) == 64 {
		return anyB64
	}
	var chars []byte
	for v := range 64 {
		if values[v] {
			chars = append(chars, b64[v])
		}
	}
	if len(chars) == 1 {
		return regexp.QuoteMeta(string(chars))
	}
	return "[" + strings.ReplaceAll(string(chars), "+", `\+`) + "]"
}

// Kubeconfig returns the policy and binding that refuse, from anyone, a
// Secret named <cluster>-kubeconfig whose key value (what CAPI's
// controllers read to reach a workload cluster, acting as themselves) holds
// a kubeconfig naming a file of the reader, a command or an auth plugin, or
// a backslash escape, a YAML tag or a NUL byte (UTF-16) that could spell
// one. With such a kubeconfig CAPI's
// controllers would send their own service account token to a server the
// writer picks. It needs no parameter, so it holds whatever state the
// manager is in.
func Kubeconfig() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	patterns := make([]string, 0, len(kubeconfigReaching))
	for _, p := range KubeconfigPatterns() {
		patterns = append(patterns, "['"+p.Field+"', r'"+p.Regexp+"']")
	}
	return validatingPolicy(KubeconfigPolicyName, admissionv1.ValidatingAdmissionPolicySpec{
		MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}, Scope: ptr.To(admissionv1.NamespacedScope)},
		}}}},
		FailurePolicy: ptr.To(admissionv1.Fail),
		// One condition, cheapest first: the API server evaluates every
		// condition of a policy, and most Secrets are no kubeconfig.
		MatchConditions: []admissionv1.MatchCondition{{
			Name: "a-cluster-kubeconfig-set-or-changed",
			Expression: `object.metadata.name.endsWith('-kubeconfig') && has(object.data) && 'value' in object.data && ` +
				`(request.operation == 'CREATE' || !has(oldObject.data) || !('value' in oldObject.data) || oldObject.data['value'] != object.data['value'])`,
		}},
		Variables: []admissionv1.Variable{
			{Name: "found", Expression: `[` + strings.Join(patterns, ", ") + `].filter(p, string(object.data['value']).matches(p[1])).map(p, p[0])`},
		},
		Validations: []admissionv1.Validation{{
			Expression: `size(variables.found) == 0`,
			MessageExpression: `'data.value: Secret ' + request.namespace + '/' + object.metadata.name + ' is read by Cluster API as the kubeconfig of cluster ' + object.metadata.name.substring(0, size(object.metadata.name) - 11) + ` +
				`' with its own identity, and holds ' + variables.found.join(', ') + ': a kubeconfig there may not name a file (tokenFile, client-certificate, client-key, certificate-authority), a command (exec) or a plugin (auth-provider), nor hold a backslash escape, a YAML tag or a NUL byte (it must be UTF-8 YAML or JSON); ` +
				`put the token, certificates and keys inline (token, client-certificate-data, client-key-data, certificate-authority-data)'`,
			Reason: ptr.To(metav1.StatusReasonForbidden),
		}},
	}, nil)
}
