package plane

import "testing"

func TestCacheKey(t *testing.T) {
	cases := map[string]struct {
		reason, source, digest, want string
	}{
		"LongSource": {
			reason: "the source is cut at 50 characters and the digest at 12, as crossplane-runtime's xpkg.FriendlyID does",
			source: "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform",
			digest: "sha256:0123456789abcdef",
			want:   "xpkg-crossplane-io-crossplane-contrib-function-pat-sha256-01234",
		},
		"ShortSource": {
			reason: "separators become dashes",
			source: "registry.example/fn",
			digest: "sha256:ffffffffffff",
			want:   "registry-example-fn-sha256-fffff",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := cacheKey(tc.source, tc.digest); got != tc.want {
				t.Errorf("%s: got %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}
