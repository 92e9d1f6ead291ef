package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestAuditCounts(t *testing.T) {
	event := func(verb, name, sub, agent, uri string, code int) string {
		return `{"stage":"ResponseComplete","verb":"` + verb + `","userAgent":"` + agent + `","requestURI":"` + uri +
			`","objectRef":{"resource":"crossplanemachines","subresource":"` + sub + `","name":"` + name + `"},"responseStatus":{"code":` + strconv.Itoa(code) + `}}`
	}
	lines := []string{
		event("patch", "m1", "status", "crossplane/v2.4.0", "/apis/x/m1/status?fieldManager=apiextensions.crossplane.io%2Fcomposite", 200),
		event("patch", "m1", "", "capxp/v0.1.0 (linux/amd64)", "/apis/x/m1", 200),
		event("update", "m1", "status", "crossplane/v2.4.0", "/apis/x/m1/status", 200),
		event("patch", "m1", "status", "capxp/v0.1.0", "/apis/x/m1/status?fieldManager=capxp-bridge", 200),
		event("update", "m1", "status", "crossplane/v2.4.0", "/apis/x/m1/status", 409),
		event("patch", "m1", "status", "crossplane/v2.4.0", "/apis/x/m1/status?fieldManager=apiextensions.crossplane.io%2Fcomposite", 200),
		// Not a write of a machine XR, or not finished.
		`{"stage":"RequestReceived","verb":"patch","objectRef":{"resource":"crossplanemachines","name":"m1"}}`,
		event("create", "m1", "", "bench.test", "/apis/x", 201),
		`{"stage":"ResponseComplete","verb":"patch","objectRef":{"resource":"machines","name":"m1"}}`,
		`not json`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	content := ""
	for _, l := range lines {
		content += l + "\n"
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	writes, err := machineXRWrites(path)
	if err != nil {
		t.Fatal(err)
	}
	want := xrWrites{"crossplane-apply status", "bridge spec", "crossplane status", "bridge status", "crossplane status conflict", "crossplane-apply status"}
	if got := writes["m1"]; len(writes) != 1 || len(got) != len(want) {
		t.Fatalf("writes = %v, want m1: %v", writes, want)
	}
	for i := range want {
		if writes["m1"][i] != want[i] {
			t.Errorf("write %d = %q, want %q", i, writes["m1"][i], want[i])
		}
	}
	got := auditReport(writes)
	wantReport := "audit log, 1 machine XRs: Crossplane's status writes per XR before the bridge's last write, median 2; after it, median 2 (max 2)\n" +
		"audit log, writes per machine XR by writer: bridge spec=1.0 bridge status=1.0 crossplane status=1.0 crossplane status conflict=1.0 crossplane-apply status=2.0\n"
	if got != wantReport {
		t.Errorf("auditReport() =\n%s\nwant\n%s", got, wantReport)
	}
}
