package localkube

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenAuditLog(t *testing.T) {
	cases := map[string]struct {
		parts map[string]string
		want  string
	}{
		"NotRotated": {parts: map[string]string{"audit.log": "c\n"}, want: "c\n"},
		"RotatedOldestFirst": {parts: map[string]string{
			"audit-2026-11-28T00-08-32.182.log": "b\n",
			"audit-2026-11-28T00-06-31.684.log": "a\n",
			"audit.log":                         "c\n",
			"audit.log.policy.yaml":             "not the log\n",
			"other-2026-11-28T00-06-31.684.log": "another log\n",
		}, want: "a\nb\nc\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, content := range tc.parts {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r, err := OpenAuditLog(filepath.Join(dir, "audit.log"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("OpenAuditLog read %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := OpenAuditLog(filepath.Join(t.TempDir(), "audit.log")); err == nil {
		t.Error("OpenAuditLog of no log: no error")
	}
}
